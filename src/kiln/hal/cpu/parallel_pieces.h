// Splitting a pass over n elements across the calling thread's OpenMP team: one contiguous piece
// a thread, of equal sizes. kiln's element-wise CPU steps (activations, the finite guards' scans,
// dtype conversions, the per-channel kernels of channel_runs.h) split their work this way.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace kiln::hal::cpu {

// Elements a piece holds at least: a pass over fewer than twice this runs as one piece on the
// calling thread.
inline constexpr int64_t kMinPieceElements = 8192;
// Each piece but the last starts at a multiple of this many elements (a 64-byte line of floats).
inline constexpr int64_t kPieceAlign = 16;

// Calls body(begin, count) once for each piece of [0, n): one piece a thread of the team
// (omp_get_max_threads), fewer where n holds fewer than kMinPieceElements elements a thread. For
// passes whose result for an element does not depend on the others, or whose reduction does not
// depend on the order (or-ing flags): the split then changes no result, whatever the team size.
// (Fixed jobs of 16384 floats handed out statically gave a 14x14x1024 value 7 jobs on one core
// and 6 on the other: ResNet-50 v2's BatchNormalizations ran 7% faster in equal halves, Zen 5,
// 2 threads.)
template <typename Body>
void parallel_pieces(int64_t n, Body&& body) {
  const int64_t pieces = std::clamp<int64_t>(n / kMinPieceElements, 1, omp_get_max_threads());
  auto start = [&](int64_t j) {
    return j == pieces ? n : n * j / pieces / kPieceAlign * kPieceAlign;
  };
#pragma omp parallel for schedule(static) if (pieces > 1)
  for (int64_t j = 0; j < pieces; ++j) body(start(j), start(j + 1) - start(j));
}

}  // namespace kiln::hal::cpu
