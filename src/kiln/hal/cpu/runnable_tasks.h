// How many tasks (threads) the machine has runnable right now, the calling one included: the
// numerator of the fourth field of /proc/loadavg ("0.61 0.83 0.90 3/245 12345" -> 3). A single
// snapshot, for a quick hint of whether other processes want the cores (team_choice.h); nullopt
// where /proc/loadavg cannot be read or parsed.
#pragma once

#include <optional>
#include <string_view>

namespace kiln::hal::cpu {

std::optional<int> runnable_tasks();
// The parsing alone, of /proc/loadavg's text.
std::optional<int> runnable_tasks_of(std::string_view loadavg);

}  // namespace kiln::hal::cpu
