// Whole-file IO for kiln's inputs and outputs: bounded reads and atomic writes (a reader never
// sees a half-written file, a failed write leaves the previous file untouched, and a device, a
// FIFO or a symlink is written into, never replaced). Memory mapping is kiln/base/mapped_file.h.
// Every error message names the path. POSIX (Linux) only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kiln/base/status.h"

namespace kiln {

// Reads the whole file at `path`. Errors: kNotFound when it does not exist, kInvalidArgument when
// it is a directory or cannot be opened, kOutOfRange when it holds more than `max_bytes` bytes,
// kDataLoss on a read error. Works on pipes and other non-regular files (read until EOF).
StatusOr<std::string> read_file(const std::string& path, uint64_t max_bytes);

// Writes `bytes` to `path` as described in kiln/base/output_path.h: a regular file (new or
// existing, or the final target of a symlink at `path`) is written aside in its directory,
// fsynced and renamed over it, so a reader never sees a half-written file and on any error the
// previous file is left as it was; a character device, a FIFO or "-" (standard output) is
// written directly; anything else is refused before anything is written. A new file gets mode
// 0666 & ~umask.
Status write_file_atomically(const std::string& path, std::string_view bytes);

// The streaming form of write_file_atomically, for outputs too large to assemble in memory:
//   KILN_ASSIGN_OR_RETURN(AtomicFileWriter out, AtomicFileWriter::open(path));
//   KILN_RETURN_IF_ERROR(out.append(chunk));  // any number of times
//   KILN_RETURN_IF_ERROR(out.commit());
// A regular file's bytes go to an anonymous file in the target's directory (O_TMPFILE), named
// only at commit, for the instant before the rename; where the file system has no anonymous
// files, to "<target>.tmp.<pid>.<random>", registered for removal on SIGINT/SIGTERM
// (kiln/base/temp_file_cleanup.h). Destroying a writer that was not committed removes its
// temporary file. After an error from append() or commit() the temporary file is already
// removed and every later call fails. A stream (device, FIFO, standard output) has no temporary
// file: what was appended before an error has been written. Move-only; not thread-safe.
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
  // Replaces bytes already appended, from `offset`, with `bytes` (a header whose checksum covers
  // what follows it, written last). Not for a stream (it cannot go back): kFailedPrecondition;
  // kOutOfRange where the range reaches past what was appended. An error writing removes the
  // temporary file, as append's does.
  Status overwrite(uint64_t offset, std::string_view bytes);
  // Flushes to disk and renames the temporary file over the destination (a stream: closes it).
  // Error if already committed or after a failure.
  Status commit();

  // The path as given.
  const std::string& path() const { return path_; }
  // The named temporary file being written; empty when the temporary file is anonymous, for a
  // stream, and once committed or abandoned.
  const std::string& temp_path() const { return temp_path_; }
  // Whether this writer streams into a device, a FIFO or standard output.
  bool streaming() const { return streaming_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  AtomicFileWriter() = default;
  // Closes and unlinks the temporary file (if any); the writer is unusable afterwards.
  void abandon();
  // Gives an anonymous temporary file a name next to the target, ready to be renamed.
  Status name_anonymous_file();
  Status fail(Status status);
  // fail() with the error `err` from writing the file.
  Status write_failed(int err);
  // Writes all of `bytes`, appended (counted in bytes_written_) or, with `at`, from that offset;
  // on an error, fail()s with it.
  Status write_fully(std::string_view bytes, std::optional<uint64_t> at);

  std::string path_;
  std::string target_;  // where the bytes go: the symlink's final target, the device, "-"
  std::string temp_path_;
  int temp_ticket_ = -1;
  int fd_ = -1;
  bool anonymous_ = false;
  bool streaming_ = false;
  uint64_t bytes_written_ = 0;
  bool committed_ = false;
};

// For tests of the named-temporary-file path on file systems that have anonymous files: when
// true, writers name their temporary files from the start.
void set_named_temp_files_for_testing(bool named);

}  // namespace kiln
