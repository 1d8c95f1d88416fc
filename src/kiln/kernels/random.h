// kiln's random numbers for the kernels that draw them (Dropout in training mode): a
// counter-based generator, so element i of a run gets the same number whatever the thread split,
// the dtype (the float64 reference draws what the CPU draws) or the backend. A seed gives the
// same numbers on every run and every machine; fresh_seed() gives a new seed per call for ops
// whose seed attribute is absent. The stream is kiln's own (SplitMix64 over seed and index), not
// NumPy's or ONNX Runtime's, so results drawn with the same seed differ from theirs.
#pragma once

#include <cstdint>

namespace kiln::kernels {

class CounterRandom {
 public:
  explicit CounterRandom(uint64_t seed) : key_(mix(seed ^ 0x6a09e667f3bcc909ULL)) {}

  // The index-th 64 random bits of this seed's stream.
  uint64_t bits(uint64_t index) const { return mix(key_ ^ mix(index + 0x9e3779b97f4a7c15ULL)); }
  // The index-th number of the stream, uniform in [0, 1) with 53 random bits.
  double uniform(uint64_t index) const {
    return static_cast<double>(bits(index) >> 11) * 0x1.0p-53;
  }

 private:
  // SplitMix64's finalizer: a bijection of 64-bit words with full avalanche.
  static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t key_;
};

// A new seed on every call (thread-safe): a per-process random start, then a counter.
uint64_t fresh_seed();

}  // namespace kiln::kernels
