#include "kiln/base/temp_file_cleanup.h"

#include <limits.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>

namespace kiln {
namespace {

// A fixed table the signal handler reads without locks or allocation. A slot's state is
// kFree -> kFilling (its path is being copied) -> kRegistered -> kFree.
enum SlotState : int { kFree = 0, kFilling = 1, kRegistered = 2 };
struct TempSlot {
  std::atomic<int> state{kFree};
  char path[PATH_MAX];
};
constexpr size_t kMaxTempFiles = 64;
std::array<TempSlot, kMaxTempFiles> g_slots;

constexpr std::array<int, 3> kCleanupSignals = {SIGINT, SIGTERM, SIGHUP};

void remove_temp_files_and_die(int signal) {
  for (TempSlot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) == kRegistered) ::unlink(slot.path);
  }
  // Die of the same signal, so the parent sees what it would have seen without the handler.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  ::sigaction(signal, &default_action, nullptr);
  ::raise(signal);
}

}  // namespace

void install_temp_file_cleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int signal : kCleanupSignals) {
      struct sigaction previous {};
      ::sigaction(signal, nullptr, &previous);
      // A signal the parent made us ignore (nohup) stays ignored.
      if (previous.sa_handler == SIG_IGN) continue;
      struct sigaction action {};
      action.sa_handler = remove_temp_files_and_die;
      sigemptyset(&action.sa_mask);
      for (int blocked : kCleanupSignals) sigaddset(&action.sa_mask, blocked);
      ::sigaction(signal, &action, nullptr);
    }
  });
}

int register_temp_file(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  for (size_t i = 0; i < g_slots.size(); ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kFilling, std::memory_order_acq_rel)) {
      continue;
    }
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].state.store(kRegistered, std::memory_order_release);
    return static_cast<int>(i);
  }
  return -1;
}

void unregister_temp_file(int ticket) {
  if (ticket < 0 || static_cast<size_t>(ticket) >= g_slots.size()) return;
  g_slots[static_cast<size_t>(ticket)].state.store(kFree, std::memory_order_release);
}

}  // namespace kiln
