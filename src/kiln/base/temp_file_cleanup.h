// Named temporary files that an interrupted command must not leave behind.
//
// kiln writes outputs aside and renames them into place (kiln/base/file_util.h). Where the file
// system offers anonymous files (O_TMPFILE), nothing is named until the rename, and a killed
// process leaves nothing. Elsewhere the temporary file has a name ("<path>.tmp.<pid>.<random>")
// while it is written: its writer registers it here, and a program that called
// install_temp_file_cleanup() removes every registered file when SIGINT, SIGTERM or SIGHUP
// arrives, then dies of that signal as it would have. (SIGKILL cannot be caught: a named
// temporary file from a killed process keeps its ".tmp." name, never the final one.)
#pragma once

#include <string>

namespace kiln {

// Installs the handlers (once; later calls do nothing). The kiln CLI calls it at start; a
// library embedding kiln decides for itself.
void install_temp_file_cleanup();

// Registers `path` for removal on those signals; returns a ticket for unregister, or -1 when
// the table (64 files) is full, in which case the file is not removed on a signal.
int register_temp_file(const std::string& path);
// Forgets a registered file (after it was renamed into place or removed). -1 is ignored.
void unregister_temp_file(int ticket);

}  // namespace kiln
