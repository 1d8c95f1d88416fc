#include "kiln/base/output_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace kiln {
namespace {

// Linux's own limit on symlinks followed in one lookup.
constexpr int kMaxSymlinks = 40;

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file, a character device or a FIFO";
}

// The directory a new or replaced file will be written in must exist and take new entries.
Status check_directory_writable(const std::string& path, const std::string& asked) {
  const std::string dir = parent_directory(path);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      return not_found("cannot write '{}': directory '{}' does not exist", asked, dir);
    }
    if (err == ENOTDIR) {
      return invalid_argument("cannot write '{}': '{}' is not a directory", asked, dir);
    }
    return invalid_argument("cannot write '{}': {}: {}", asked, dir, std::strerror(err));
  }
  if (!S_ISDIR(st.st_mode)) {
    return invalid_argument("cannot write '{}': '{}' is not a directory", asked, dir);
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return invalid_argument("cannot write '{}': directory '{}' is not writable ({})", asked, dir,
                            std::strerror(errno));
  }
  return ok_status();
}

// Reads the symlink at `link`; a relative target is relative to the link's directory.
StatusOr<std::string> link_target(const std::string& link, const std::string& asked) {
  std::vector<char> buffer(256);
  while (true) {
    const ssize_t got = ::readlink(link.c_str(), buffer.data(), buffer.size());
    if (got < 0) {
      return invalid_argument("cannot write '{}': reading symlink '{}': {}", asked, link,
                              std::strerror(errno));
    }
    if (static_cast<size_t>(got) < buffer.size()) {
      std::string target(buffer.data(), static_cast<size_t>(got));
      if (target.empty()) {
        return invalid_argument("cannot write '{}': symlink '{}' is empty", asked, link);
      }
      if (target[0] == '/') return target;
      return parent_directory(link) + "/" + target;
    }
    if (buffer.size() >= 65536) {
      return invalid_argument("cannot write '{}': symlink '{}' is too long", asked, link);
    }
    buffer.resize(buffer.size() * 2);
  }
}

}  // namespace

StatusOr<OutputTarget> resolve_output_path(const std::string& path) {
  if (path.empty()) return invalid_argument("cannot write a file with an empty path");
  if (path == "-") return OutputTarget{OutputKind::kStdout, "-"};
  std::string current = path;
  for (int followed = 0;; ++followed) {
    struct stat st {};
    if (::lstat(current.c_str(), &st) != 0) {
      const int err = errno;
      if (err != ENOENT) {
        if (err == ENOTDIR) {
          return invalid_argument("cannot write '{}': a component of '{}' is not a directory", path,
                                  current);
        }
        return invalid_argument("cannot write '{}': {}: {}", path, current, std::strerror(err));
      }
      KILN_RETURN_IF_ERROR(check_directory_writable(current, path));
      return OutputTarget{OutputKind::kReplaceFile, current};
    }
    if (S_ISLNK(st.st_mode)) {
      if (followed == kMaxSymlinks) {
        return invalid_argument("cannot write '{}': more than {} symlinks to follow", path,
                                kMaxSymlinks);
      }
      KILN_ASSIGN_OR_RETURN(current, link_target(current, path));
      continue;
    }
    if (S_ISREG(st.st_mode)) {
      KILN_RETURN_IF_ERROR(check_directory_writable(current, path));
      return OutputTarget{OutputKind::kReplaceFile, current};
    }
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
      if (::access(current.c_str(), W_OK) != 0) {
        return invalid_argument("cannot write '{}': {}", path, std::strerror(errno));
      }
      return OutputTarget{OutputKind::kStream, current};
    }
    const std::string via = current == path ? "" : fmt::format(" (via symlink to '{}')", current);
    return invalid_argument(
        "cannot write '{}'{}: it is {}; kiln writes regular files, character devices and FIFOs",
        path, via, file_type_name(st.st_mode));
  }
}

std::string parent_directory(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status check_output_path(const std::string& path) { return resolve_output_path(path).status(); }

}  // namespace kiln
