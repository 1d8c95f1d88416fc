// parallel_pieces: the pieces cover [0, n) once, in order, one a thread of the team at most, each
// but the last starting at a multiple of the alignment, of sizes that differ by less than twice
// the alignment; a pass over fewer than twice the minimum runs as one piece.
#include "kiln/hal/cpu/parallel_pieces.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

#include "kiln/hal/cpu/device_state.h"

namespace kiln::hal::cpu {
namespace {

// The pieces parallel_pieces hands out for n elements on `threads` threads, sorted.
std::vector<std::pair<int64_t, int64_t>> pieces(int64_t n, int threads) {
  const CallerThreads restore;
  use_threads(threads);
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> out;
  parallel_pieces(n, [&](int64_t begin, int64_t count) {
    std::lock_guard<std::mutex> lock(mutex);
    out.emplace_back(begin, count);
  });
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ParallelPiecesTest, CoverEveryElementOnceInEqualAlignedPieces) {
  for (int threads : {1, 2, 3, 4}) {
    for (int64_t n : {int64_t{16384}, int64_t{16385}, int64_t{200704}, int64_t{1000003}}) {
      SCOPED_TRACE(::testing::Message() << n << " elements, " << threads << " threads");
      const auto got = pieces(n, threads);
      ASSERT_FALSE(got.empty());
      EXPECT_EQ(got.size(), static_cast<size_t>(std::min<int64_t>(threads, n / 8192)));
      int64_t next = 0, smallest = n, largest = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].first, next);
        if (i > 0) {
          EXPECT_EQ(got[i].first % 16, 0);
        }
        EXPECT_GT(got[i].second, 0);
        next = got[i].first + got[i].second;
        smallest = std::min(smallest, got[i].second);
        largest = std::max(largest, got[i].second);
      }
      EXPECT_EQ(next, n);
      EXPECT_LT(largest - smallest, 2 * 16);
    }
  }
}

TEST(ParallelPiecesTest, ASmallPassIsOnePiece) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{8191}, int64_t{16383}}) {
    const auto got = pieces(n, 4);
    ASSERT_EQ(got.size(), 1u) << n;
    EXPECT_EQ(got[0], std::make_pair(int64_t{0}, n)) << n;
  }
}

}  // namespace
}  // namespace kiln::hal::cpu
