#include "kiln/base/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <utility>

#include "kiln/base/output_path.h"
#include "kiln/base/temp_file_cleanup.h"

namespace kiln {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

Status open_error(const std::string& path, int err) {
  if (err == ENOENT) return not_found("'{}': no such file", path);
  if (err == EISDIR) return invalid_argument("'{}' is a directory, not a file", path);
  return invalid_argument("cannot open '{}': {}", path, errno_text(err));
}

int open_retrying(const char* path, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::open(path, flags, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

// close() errors on a written file can report lost data (NFS), so the writer checks them; a
// read-only descriptor's close error carries nothing useful.
void close_quietly(int fd) {
  if (fd >= 0) ::close(fd);
}

std::atomic<bool> g_named_temp_files_for_testing{false};

uint64_t random_u64() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// Opens `path` for reading and stats it; a directory is refused. On success the caller owns
// the descriptor.
struct OpenedFile {
  int fd = -1;
  struct stat st {};
};
StatusOr<OpenedFile> open_for_reading(const std::string& path) {
  OpenedFile f;
  f.fd = open_retrying(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return open_error(path, errno);
  if (::fstat(f.fd, &f.st) != 0) {
    int err = errno;
    close_quietly(f.fd);
    return data_loss("cannot stat '{}': {}", path, errno_text(err));
  }
  if (S_ISDIR(f.st.st_mode)) {
    close_quietly(f.fd);
    return invalid_argument("'{}' is a directory, not a file", path);
  }
  return f;
}

}  // namespace

StatusOr<std::string> read_file(const std::string& path, uint64_t max_bytes) {
  KILN_ASSIGN_OR_RETURN(OpenedFile file, open_for_reading(path));
  const int fd = file.fd;
  const struct stat& st = file.st;
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes) {
    close_quietly(fd);
    return out_of_range("'{}' is {} bytes, larger than the limit of {} bytes", path,
                        static_cast<uint64_t>(st.st_size), max_bytes);
  }

  std::string out;
  if (S_ISREG(st.st_mode)) out.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  while (true) {
    ssize_t got = ::read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int err = errno;
      close_quietly(fd);
      if (err == EISDIR) return invalid_argument("'{}' is a directory, not a file", path);
      return data_loss("error reading '{}': {}", path, errno_text(err));
    }
    if (got == 0) break;
    // The size may have grown since fstat, and pipes have no size at all.
    if (out.size() + static_cast<size_t>(got) > max_bytes) {
      close_quietly(fd);
      return out_of_range("'{}' is larger than the limit of {} bytes", path, max_bytes);
    }
    out.append(buffer, static_cast<size_t>(got));
  }
  close_quietly(fd);
  return out;
}

void set_named_temp_files_for_testing(bool named) { g_named_temp_files_for_testing = named; }

Status write_file_atomically(const std::string& path, std::string_view bytes) {
  KILN_ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::open(path));
  KILN_RETURN_IF_ERROR(writer.append(bytes));
  return writer.commit();
}

StatusOr<AtomicFileWriter> AtomicFileWriter::open(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(OutputTarget target, resolve_output_path(path));
  AtomicFileWriter writer;
  writer.path_ = path;
  writer.target_ = target.path;
  switch (target.kind) {
    case OutputKind::kStdout:
      writer.fd_ = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
      if (writer.fd_ < 0) {
        return invalid_argument("cannot write to the standard output: {}", errno_text(errno));
      }
      writer.streaming_ = true;
      return writer;
    case OutputKind::kStream:
      // A FIFO's open waits for its reader, as a shell redirection does.
      writer.fd_ = open_retrying(target.path.c_str(), O_WRONLY | O_CLOEXEC);
      if (writer.fd_ < 0) return open_error(path, errno);
      writer.streaming_ = true;
      return writer;
    case OutputKind::kReplaceFile: break;
  }
  const std::string dir = parent_directory(target.path);
  if (!g_named_temp_files_for_testing) {
    int fd = open_retrying(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    if (fd >= 0) {
      writer.fd_ = fd;
      writer.anonymous_ = true;
      return writer;
    }
    // Other errors (no O_TMPFILE in this file system) fall back to a named file.
    if (errno == EACCES || errno == EROFS || errno == ENOSPC || errno == EDQUOT) {
      return invalid_argument("cannot create a temporary file next to '{}': {}", path,
                              errno_text(errno));
    }
  }
  // O_EXCL with a random suffix: two writers of the same path never share a temporary file.
  for (int attempt = 0; attempt < 16; ++attempt) {
    std::string temp =
        fmt::format("{}.tmp.{}.{:016x}", target.path, static_cast<long>(::getpid()), random_u64());
    int fd = open_retrying(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      writer.fd_ = fd;
      writer.temp_ticket_ = register_temp_file(temp);
      writer.temp_path_ = std::move(temp);
      return writer;
    }
    int err = errno;
    if (err == EEXIST) continue;
    return invalid_argument("cannot create a temporary file next to '{}': {}", path,
                            errno_text(err));
  }
  return internal_error("cannot create a unique temporary file next to '{}'", path);
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      target_(std::move(other.target_)),
      temp_path_(std::exchange(other.temp_path_, std::string())),
      temp_ticket_(std::exchange(other.temp_ticket_, -1)),
      fd_(std::exchange(other.fd_, -1)),
      anonymous_(other.anonymous_),
      streaming_(other.streaming_),
      bytes_written_(other.bytes_written_),
      committed_(other.committed_) {}

AtomicFileWriter& AtomicFileWriter::operator=(AtomicFileWriter&& other) noexcept {
  if (this != &other) {
    abandon();
    path_ = std::move(other.path_);
    target_ = std::move(other.target_);
    temp_path_ = std::exchange(other.temp_path_, std::string());
    temp_ticket_ = std::exchange(other.temp_ticket_, -1);
    fd_ = std::exchange(other.fd_, -1);
    anonymous_ = other.anonymous_;
    streaming_ = other.streaming_;
    bytes_written_ = other.bytes_written_;
    committed_ = other.committed_;
  }
  return *this;
}

AtomicFileWriter::~AtomicFileWriter() { abandon(); }

void AtomicFileWriter::abandon() {
  close_quietly(fd_);
  fd_ = -1;
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  unregister_temp_file(std::exchange(temp_ticket_, -1));
  temp_path_.clear();
}

Status AtomicFileWriter::fail(Status status) {
  abandon();
  return status;
}

Status AtomicFileWriter::write_failed(int err) {
  if (streaming_) return fail(data_loss("error writing '{}': {}", path_, errno_text(err)));
  const std::string via = temp_path_.empty() ? std::string("a temporary file") : temp_path_;
  return fail(data_loss("error writing '{}' (via '{}'): {}", path_, via, errno_text(err)));
}

Status AtomicFileWriter::write_fully(std::string_view bytes, std::optional<uint64_t> at) {
  const char* next = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t wrote =
        at ? ::pwrite(fd_, next, left, static_cast<off_t>(*at)) : ::write(fd_, next, left);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return write_failed(wrote < 0 ? errno : EIO);
    next += wrote;
    left -= static_cast<size_t>(wrote);
    if (at) {
      *at += static_cast<uint64_t>(wrote);
    } else {
      bytes_written_ += static_cast<uint64_t>(wrote);
    }
  }
  return ok_status();
}

Status AtomicFileWriter::append(std::string_view bytes) {
  if (fd_ < 0) {
    return failed_precondition("writing '{}': the file is already {}", path_,
                               committed_ ? "committed" : "abandoned after an error");
  }
  return write_fully(bytes, std::nullopt);
}

Status AtomicFileWriter::overwrite(uint64_t offset, std::string_view bytes) {
  if (fd_ < 0 || streaming_) {
    return failed_precondition("cannot rewrite part of '{}': {}", path_,
                               streaming_   ? "it is a stream"
                               : committed_ ? "the file is already committed"
                                            : "the file was abandoned after an error");
  }
  if (offset > bytes_written_ || bytes.size() > bytes_written_ - offset) {
    return out_of_range("cannot rewrite bytes [{}, {}) of '{}': only {} were written", offset,
                        offset + bytes.size(), path_, bytes_written_);
  }
  return write_fully(bytes, offset);
}

Status AtomicFileWriter::name_anonymous_file() {
  const std::string proc_path = fmt::format("/proc/self/fd/{}", fd_);
  for (int attempt = 0; attempt < 16; ++attempt) {
    std::string temp =
        fmt::format("{}.tmp.{}.{:016x}", target_, static_cast<long>(::getpid()), random_u64());
    temp_ticket_ = register_temp_file(temp);
    if (::linkat(AT_FDCWD, proc_path.c_str(), AT_FDCWD, temp.c_str(), AT_SYMLINK_FOLLOW) == 0) {
      temp_path_ = std::move(temp);
      return ok_status();
    }
    const int err = errno;
    unregister_temp_file(std::exchange(temp_ticket_, -1));
    if (err == EEXIST) continue;
    return data_loss("cannot give the new '{}' a name: {}", path_, errno_text(err));
  }
  return internal_error("cannot create a unique temporary name next to '{}'", path_);
}

Status AtomicFileWriter::commit() {
  if (fd_ < 0) {
    return failed_precondition("committing '{}': the file is already {}", path_,
                               committed_ ? "committed" : "abandoned after an error");
  }
  if (streaming_) {
    int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) return data_loss("error closing '{}': {}", path_, errno_text(errno));
    committed_ = true;
    return ok_status();
  }
  if (::fsync(fd_) != 0) {
    return fail(data_loss("error flushing '{}': {}", path_, errno_text(errno)));
  }
  if (anonymous_) {
    Status named = name_anonymous_file();
    if (!named.ok()) return fail(std::move(named));
  }
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return fail(data_loss("error closing '{}': {}", path_, errno_text(errno)));
  if (::rename(temp_path_.c_str(), target_.c_str()) != 0) {
    int err = errno;
    abandon();
    if (err == EISDIR) return invalid_argument("cannot write '{}': it is a directory", path_);
    return invalid_argument("cannot rename a temporary file to '{}': {}", path_, errno_text(err));
  }
  unregister_temp_file(std::exchange(temp_ticket_, -1));
  temp_path_.clear();
  committed_ = true;
  // Makes the rename itself durable. The new file is already in place, so a failure here cannot
  // be undone and is not reported.
  int dir = open_retrying(parent_directory(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    close_quietly(dir);
  }
  return ok_status();
}

}  // namespace kiln
