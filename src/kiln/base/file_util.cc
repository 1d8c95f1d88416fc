#include "kiln/base/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>

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

std::string directory_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

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

Status write_file_atomically(const std::string& path, std::string_view bytes) {
  KILN_ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::open(path));
  KILN_RETURN_IF_ERROR(writer.append(bytes));
  return writer.commit();
}

StatusOr<AtomicFileWriter> AtomicFileWriter::open(const std::string& path) {
  if (path.empty()) return invalid_argument("cannot write a file with an empty path");
  AtomicFileWriter writer;
  writer.path_ = path;
  // O_EXCL with a random suffix: two writers of the same path never share a temporary file.
  for (int attempt = 0; attempt < 16; ++attempt) {
    std::string temp =
        fmt::format("{}.tmp.{}.{:016x}", path, static_cast<long>(::getpid()), random_u64());
    int fd = open_retrying(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      writer.fd_ = fd;
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
      temp_path_(std::exchange(other.temp_path_, std::string())),
      fd_(std::exchange(other.fd_, -1)),
      bytes_written_(other.bytes_written_),
      committed_(other.committed_) {}

AtomicFileWriter& AtomicFileWriter::operator=(AtomicFileWriter&& other) noexcept {
  if (this != &other) {
    abandon();
    path_ = std::move(other.path_);
    temp_path_ = std::exchange(other.temp_path_, std::string());
    fd_ = std::exchange(other.fd_, -1);
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
  temp_path_.clear();
}

Status AtomicFileWriter::append(std::string_view bytes) {
  if (fd_ < 0) {
    return failed_precondition("writing '{}': the file is already {}", path_,
                               committed_ ? "committed" : "abandoned after an error");
  }
  const char* next = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t wrote = ::write(fd_, next, left);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      int err = wrote < 0 ? errno : EIO;
      std::string temp = temp_path_;
      abandon();
      return data_loss("error writing '{}' (via '{}'): {}", path_, temp, errno_text(err));
    }
    next += wrote;
    left -= static_cast<size_t>(wrote);
    bytes_written_ += static_cast<uint64_t>(wrote);
  }
  return ok_status();
}

Status AtomicFileWriter::commit() {
  if (fd_ < 0) {
    return failed_precondition("committing '{}': the file is already {}", path_,
                               committed_ ? "committed" : "abandoned after an error");
  }
  if (::fsync(fd_) != 0) {
    int err = errno;
    abandon();
    return data_loss("error flushing '{}': {}", path_, errno_text(err));
  }
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) {
    int err = errno;
    abandon();
    return data_loss("error closing '{}': {}", path_, errno_text(err));
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    abandon();
    if (err == EISDIR) return invalid_argument("cannot write '{}': it is a directory", path_);
    return invalid_argument("cannot rename a temporary file to '{}': {}", path_, errno_text(err));
  }
  temp_path_.clear();
  committed_ = true;
  // Makes the rename itself durable. The new file is already in place, so a failure here cannot
  // be undone and is not reported.
  int dir = open_retrying(directory_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    close_quietly(dir);
  }
  return ok_status();
}

void release_mapped_pages(const std::byte* data, size_t bytes) {
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (data == nullptr || page_size <= 0) return;
  const auto page = static_cast<uintptr_t>(page_size);
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t end = (begin + bytes) / page * page;
  if (end <= first) return;
  // MADV_DONTNEED on a clean private file mapping only unmaps: the next access faults the file's
  // bytes back in.
  ::madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED);
}

StatusOr<MappedFile> MappedFile::open(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(OpenedFile file, open_for_reading(path));
  const int fd = file.fd;
  const struct stat& st = file.st;
  if (!S_ISREG(st.st_mode)) {
    close_quietly(fd);
    return invalid_argument("'{}' is not a regular file and cannot be mapped", path);
  }
  MappedFile out;
  out.path_ = path;
  out.size_ = static_cast<size_t>(st.st_size);
  if (out.size_ > 0) {
    void* addr = ::mmap(nullptr, out.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      close_quietly(fd);
      return invalid_argument("cannot map '{}' ({} bytes): {}", path, out.size_, errno_text(err));
    }
    out.data_ = static_cast<const std::byte*>(addr);
  }
  // The mapping keeps its own reference to the file.
  close_quietly(fd);
  return out;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace kiln
