#include "kiln/hal/cpu/runnable_tasks.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>

namespace kiln::hal::cpu {

std::optional<int> runnable_tasks_of(std::string_view text) {
  // Skip three fields, then read the number before '/'.
  size_t pos = 0;
  for (int field = 0; field < 3; ++field) {
    pos = text.find(' ', pos);
    if (pos == std::string_view::npos) return std::nullopt;
    ++pos;
  }
  const size_t slash = text.find('/', pos);
  if (slash == std::string_view::npos) return std::nullopt;
  int n = 0;
  const auto [end, error] = std::from_chars(text.data() + pos, text.data() + slash, n);
  if (error != std::errc() || end != text.data() + slash || n < 0) return std::nullopt;
  return n;
}

std::optional<int> runnable_tasks() {
  const int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buffer[128];
  const ssize_t got = read(fd, buffer, sizeof(buffer));
  close(fd);
  if (got <= 0) return std::nullopt;
  return runnable_tasks_of(std::string_view(buffer, static_cast<size_t>(got)));
}

}  // namespace kiln::hal::cpu
