#include "kiln/kernels/random.h"

#include <atomic>
#include <random>

namespace kiln::kernels {

uint64_t fresh_seed() {
  static const uint64_t start = [] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }();
  static std::atomic<uint64_t> counter{0};
  return CounterRandom(start).bits(counter.fetch_add(1, std::memory_order_relaxed));
}

}  // namespace kiln::kernels
