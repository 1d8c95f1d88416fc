// Where an output path really leads, decided before anything is written, so that no kiln command
// replaces what it should write into:
//   - a regular file (or a path that does not exist yet) is replaced atomically: written aside in
//     its directory and renamed over it;
//   - a symlink is followed: its final target is what gets written (atomically, in the target's
//     directory); a dangling link creates its target;
//   - a character device (/dev/null, a terminal) or a FIFO is written directly as a stream, as a
//     shell redirection would; "-" is the standard output;
//   - anything else (a directory, a socket, a block device, a path through a non-directory, a
//     missing or unwritable directory) is refused with an error naming the path and why.
// check_output_path runs the same checks, so commands refuse a bad output before their work.
#pragma once

#include <string>

#include "kiln/base/status.h"

namespace kiln {

enum class OutputKind {
  kReplaceFile,  // a regular file, new or existing: write aside, then rename over it
  kStream,       // a character device or a FIFO: open and write in place
  kStdout,       // "-": the process's standard output
};

struct OutputTarget {
  OutputKind kind = OutputKind::kReplaceFile;
  // The path to write: the final target of any symlinks; "-" for kStdout.
  std::string path;
};

// Resolves `path` as described above. Errors are kInvalidArgument (kNotFound for a missing
// directory) and name `path`.
StatusOr<OutputTarget> resolve_output_path(const std::string& path);

// resolve_output_path without the result: what commands call on every output path they were
// given, before they start working.
Status check_output_path(const std::string& path);

// The directory part of `path`: "." for a bare name, "/" for a file in the root.
std::string parent_directory(const std::string& path);

}  // namespace kiln
