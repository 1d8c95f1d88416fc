// Whole-file IO for kiln's inputs and outputs: bounded reads, atomic writes (a reader never sees a
// half-written file, and a failed write leaves the previous file untouched), and read-only
// memory mapping for module files. Every error message names the path. POSIX only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/base/status.h"

namespace kiln {

// Reads the whole file at `path`. Errors: kNotFound when it does not exist, kInvalidArgument when
// it is a directory or cannot be opened, kOutOfRange when it holds more than `max_bytes` bytes,
// kDataLoss on a read error. Works on pipes and other non-regular files (read until EOF).
StatusOr<std::string> read_file(const std::string& path, uint64_t max_bytes);

// Writes `bytes` to "<path>.tmp.<pid>.<random>" in the same directory, fsyncs it and renames it
// over `path`. On any error the temporary file is removed and a previous file at `path` is left
// as it was. A symlink at `path` is replaced, not followed; the new file gets mode 0666 & ~umask.
Status write_file_atomically(const std::string& path, std::string_view bytes);

// The streaming form of write_file_atomically, for outputs too large to assemble in memory:
//   KILN_ASSIGN_OR_RETURN(AtomicFileWriter out, AtomicFileWriter::open(path));
//   KILN_RETURN_IF_ERROR(out.append(chunk));  // any number of times
//   KILN_RETURN_IF_ERROR(out.commit());
// Destroying a writer that was not committed removes its temporary file. After an error from
// append() or commit() the temporary file is already removed and every later call fails.
// Move-only; not thread-safe.
class AtomicFileWriter {
 public:
  static StatusOr<AtomicFileWriter> open(const std::string& path);

  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  Status append(std::string_view bytes);
  Status append(const void* data, size_t size) {
    return append(std::string_view(static_cast<const char*>(data), size));
  }
  // Flushes to disk and renames the temporary file over the destination. Error if already
  // committed or after a failure.
  Status commit();

  const std::string& path() const { return path_; }
  // The temporary file being written; empty once committed or abandoned.
  const std::string& temp_path() const { return temp_path_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  AtomicFileWriter() = default;
  // Closes and unlinks the temporary file (if any); the writer is unusable afterwards.
  void abandon();

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  uint64_t bytes_written_ = 0;
  bool committed_ = false;
};

// Drops the whole pages inside [data, data + bytes) from this process's resident memory. Only for
// bytes of a MappedFile (a read-only private file mapping): touched again, they are read back from
// the file, usually from the page cache. A hint: failures are ignored.
void release_mapped_pages(const std::byte* data, size_t bytes);

// A read-only private mapping of a whole file, unmapped on destruction. The file must not be
// truncated or rewritten in place while mapped (kiln replaces files by rename, which is safe).
// An empty file is valid: size() is 0 and data() is nullptr. Move-only.
class MappedFile {
 public:
  // Errors: kNotFound when the file does not exist, kInvalidArgument when it is a directory or
  // not a regular file or cannot be opened or mapped.
  static StatusOr<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void reset();

  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kiln
