// A check for tests of kiln's f32 vector kernels of one input (vector_map_kernels.h): the same
// bits on both ISAs at any length and offset, in place or not.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "kiln/hal/cpu/cpu_isa.h"

namespace kiln::hal::cpu {

// A kernel y[i] = f(x[i]) for i < n with `isa`'s code.
using VectorKernel = std::function<void(const float* x, float* y, int64_t n, Isa isa)>;

// Runs `kernel` over all of `x` (at least 133 floats) on AVX2, then over slices of it from
// several offsets and of several lengths on each ISA this CPU runs, each in place in a buffer of
// its own with a guard float after it: every slice must give the whole run's bits, and the guard
// must stay.
inline void expect_same_bits_at_any_length_and_offset(const VectorKernel& kernel,
                                                      const std::vector<float>& x) {
  std::vector<float> whole(x.size());
  kernel(x.data(), whole.data(), static_cast<int64_t>(x.size()), Isa::kAvx2);
  for (Isa isa : runnable_isas()) {
    for (int64_t first : {0, 1, 7, 16, 33}) {
      for (int64_t n : {0, 1, 5, 15, 16, 17, 31, 48, 100}) {
        std::vector<float> y(x.begin() + first, x.begin() + first + n);
        y.push_back(-1.0f);
        kernel(y.data(), y.data(), n, isa);
        EXPECT_EQ(0, std::memcmp(y.data(), whole.data() + first, n * sizeof(float)))
            << fmt::format("{} floats from {} on {}", n, first, isa_name(isa));
        EXPECT_EQ(y.back(), -1.0f) << fmt::format("{} floats on {}", n, isa_name(isa));
      }
    }
  }
}

}  // namespace kiln::hal::cpu
