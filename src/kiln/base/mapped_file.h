// Read-only memory mapping of module and model files, safe against the file changing underneath.
//
// A MappedFile maps a whole file privately and read-only. Pages kiln no longer needs can be
// dropped from resident memory (release_mapped_pages) and are read back from the file when
// touched again. The file may be truncated or rewritten in place by another program while it is
// mapped (`truncate`, `cp other.kmod loaded.kmod`); kiln never crashes on that and never uses
// the changed bytes silently:
//   - touching a page past the file's new end would raise SIGBUS; a process-wide handler
//     (installed with the first mapping, chaining to any handler installed before it) maps a
//     page of zeros there instead and marks the mapping as changed;
//   - check_unchanged() compares the open file's size and modification time with what they were
//     when it was mapped, and reports a changed file (or a zero-filled fault) as an error
//     naming the path.
// Callers that read a mapping in an operation (the runtime's run) call check_unchanged() before
// and after it and discard the operation's results when it fails. Replacing the file by rename
// (as kiln's own writers do) is not a change: the mapping keeps the old file.
// POSIX (Linux) only. Move-only.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kiln/base/status.h"

namespace kiln {

// Drops the whole pages inside [data, data + bytes) from this process's resident memory. Only for
// bytes of a MappedFile: touched again, they are read back from the file, usually from the page
// cache. A hint: failures are ignored.
void release_mapped_pages(const std::byte* data, size_t bytes);

class MappedFile {
 public:
  // Errors: kNotFound when the file does not exist, kInvalidArgument when it is a directory or
  // not a regular file or cannot be opened or mapped. An empty file is valid: size() is 0 and
  // data() is nullptr.
  static StatusOr<MappedFile> open(const std::string& path);

  MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // OK while the file holds what was mapped; kFailedPrecondition naming the path and what
  // changed (its size, or its contents) once another program truncated or rewrote it. Cheap
  // (one fstat); callable from any thread.
  Status check_unchanged() const;

 private:
  struct Watch;  // the open descriptor, its state when mapped, and the fault flag
  void reset();

  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<Watch> watch_;
};

}  // namespace kiln
