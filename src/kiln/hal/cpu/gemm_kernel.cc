#include "kiln/hal/cpu/gemm_kernel.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

namespace kiln::hal::cpu::gemm {
namespace {

// The vector code is compiled for AVX2 + FMA function by function (as in winograd_conv.cc), so
// that this file adds no such instruction anywhere else; OpenMP loops call these per item.
#define KILN_AVX2 __attribute__((target("avx2,fma")))

// k per block: one panel's block of B (256 x 16 floats, 16 KiB) stays in L1 while the rows of a
// chunk pass over it; the chunk's block of A (96 x 256 floats) stays in L2 across its panels.
constexpr int64_t kBlockK = 256;
constexpr int64_t kChunkRows = 16 * kBlockRows;
constexpr int64_t kGroupPanels = 4;

// Which of a panel's 16 columns exist.
struct Columns {
  __m256i lo, hi;
  bool full;
};

KILN_AVX2 inline __m256i lane_mask(int64_t count) {
  const int c = static_cast<int>(std::clamp<int64_t>(count, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

KILN_AVX2 inline Columns columns(int64_t count) {
  return Columns{lane_mask(count), lane_mask(count - 8), count >= kPanelColumns};
}

// One row's 16 accumulators.
struct Acc {
  __m256 lo, hi;
};

KILN_AVX2 inline Acc load_row(const float* y, const Columns& c) {
  if (c.full) return Acc{_mm256_loadu_ps(y), _mm256_loadu_ps(y + 8)};
  return Acc{_mm256_maskload_ps(y, c.lo), _mm256_maskload_ps(y + 8, c.hi)};
}

KILN_AVX2 inline void store_row(float* y, const Acc& v, const Columns& c) {
  if (c.full) {
    _mm256_storeu_ps(y, v.lo);
    _mm256_storeu_ps(y + 8, v.hi);
  } else {
    _mm256_maskstore_ps(y, c.lo, v.lo);
    _mm256_maskstore_ps(y + 8, c.hi, v.hi);
  }
}

KILN_AVX2 inline void fma_row(Acc& acc, const float* a, __m256 b0, __m256 b1) {
  const __m256 x = _mm256_broadcast_ss(a);
  acc.lo = _mm256_fmadd_ps(x, b0, acc.lo);
  acc.hi = _mm256_fmadd_ps(x, b1, acc.hi);
}

// The epilogue of the last k block, for one register block: `c` points at C's element for the
// block's first row and column.
struct Finish {
  bool scale;
  __m256 alpha;
  const float* c;
  __m256 beta;
  int64_t c_row_stride;
  bool c_row_vector;  // C has a value per column (else one per row)
};

KILN_AVX2 inline Acc finish_row(Acc v, const Finish& f, int64_t row, int64_t panel,
                                const Columns& cols) {
  if (f.scale) {
    v.lo = _mm256_mul_ps(v.lo, f.alpha);
    v.hi = _mm256_mul_ps(v.hi, f.alpha);
  }
  if (f.c != nullptr) {
    const float* c = f.c + row * f.c_row_stride + (f.c_row_vector ? panel * kPanelColumns : 0);
    const Acc cv =
        f.c_row_vector ? load_row(c, cols) : Acc{_mm256_broadcast_ss(c), _mm256_broadcast_ss(c)};
    v.lo = _mm256_fmadd_ps(cv.lo, f.beta, v.lo);
    v.hi = _mm256_fmadd_ps(cv.hi, f.beta, v.hi);
  }
  return v;
}

// R rows (1..6) x W panels over `kc` k: `a` at the block's first row and k, `bp` at the first
// panel's row k, the next panels `panel_stride` floats apart. Starts from the partial sums in Y
// when `accumulate`, applies `finish` when set. (Several panels for a block of few rows give the
// core independent sums to interleave; each element is still its own chain of FMAs.)
template <int R, int W>
KILN_AVX2 inline void tile(const float* a, int64_t lda, const float* bp, int64_t panel_stride,
                           int64_t kc, float* y, int64_t ldy, const Columns (&cols)[W],
                           bool accumulate, const Finish* finish) {
  Acc c[R][W];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) {
      c[r][w] = accumulate ? load_row(y + r * ldy + w * kPanelColumns, cols[w])
                           : Acc{_mm256_setzero_ps(), _mm256_setzero_ps()};
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) {
      const float* b = bp + w * panel_stride + k * kPanelColumns;
      const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) fma_row(c[r][w], a + r * lda + k, b0, b1);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) {
      const Acc v = finish != nullptr ? finish_row(c[r][w], *finish, r, w, cols[w]) : c[r][w];
      store_row(y + r * ldy + w * kPanelColumns, v, cols[w]);
    }
  }
}

// Panels per register block for a block of R rows: at least 8 accumulators where there is room.
constexpr int panels_for(int rows) { return rows == 1 ? 4 : rows <= 3 ? 2 : 1; }

// A block of R rows from `r`, panels [p0, p1), one k block.
template <int R>
KILN_AVX2 void rows_block(const Product& p, const float* a, const float* packed, float* y,
                          const Finish& base, bool last, int64_t k0, int64_t kc, int64_t r,
                          int64_t p0, int64_t p1) {
  constexpr int kWide = panels_for(R);
  const float* ar = a + r * p.lda + k0;
  const int64_t panel_stride = p.k * kPanelColumns;
  for (int64_t panel = p0; panel < p1;) {
    const int64_t col0 = panel * kPanelColumns;
    const float* bp = packed + panel * panel_stride + k0 * kPanelColumns;
    float* yr = y + r * p.ldy + col0;
    Finish finish = base;
    if (finish.c != nullptr) finish.c += r * p.c_row_stride + col0 * p.c_col_stride;
    const Finish* f = last ? &finish : nullptr;
    if (kWide > 1 && panel + kWide <= p1) {
      Columns cols[kWide];
      for (int w = 0; w < kWide; ++w) cols[w] = columns(p.n - col0 - w * kPanelColumns);
      tile<R, kWide>(ar, p.lda, bp, panel_stride, kc, yr, p.ldy, cols, k0 > 0, f);
      panel += kWide;
    } else {
      const Columns cols[1] = {columns(p.n - col0)};
      tile<R, 1>(ar, p.lda, bp, panel_stride, kc, yr, p.ldy, cols, k0 > 0, f);
      ++panel;
    }
  }
}

// Rows [r0, r1) x panels [p0, p1) of one product, all of k.
KILN_AVX2 void run_block(const Product& p, const float* a, const float* packed, float* y,
                         int64_t r0, int64_t r1, int64_t p0, int64_t p1) {
  Finish base;
  base.scale = p.alpha != 1.0f;
  base.alpha = _mm256_set1_ps(p.alpha);
  base.c = p.c;
  base.beta = _mm256_set1_ps(p.beta);
  base.c_row_stride = p.c_row_stride;
  base.c_row_vector = p.c_col_stride != 0;
  // Blocks of k keep a panel's block of B in L1 for the next register blocks of rows; with one
  // register block there is nothing to keep, and B streams best in one piece.
  const int64_t block_k = r1 - r0 > kBlockRows ? kBlockK : std::max<int64_t>(p.k, 1);
  const int64_t full_end = r0 + (r1 - r0) / kBlockRows * kBlockRows;
  for (int64_t k0 = 0;; k0 += block_k) {
    const int64_t kc = std::min(block_k, p.k - k0);
    const bool last = k0 + kc >= p.k;
    for (int64_t panel = p0; panel < p1; ++panel) {
      for (int64_t r = r0; r < full_end; r += kBlockRows) {
        rows_block<6>(p, a, packed, y, base, last, k0, kc, r, panel, panel + 1);
      }
    }
    switch (r1 - full_end) {
      case 5: rows_block<5>(p, a, packed, y, base, last, k0, kc, full_end, p0, p1); break;
      case 4: rows_block<4>(p, a, packed, y, base, last, k0, kc, full_end, p0, p1); break;
      case 3: rows_block<3>(p, a, packed, y, base, last, k0, kc, full_end, p0, p1); break;
      case 2: rows_block<2>(p, a, packed, y, base, last, k0, kc, full_end, p0, p1); break;
      case 1: rows_block<1>(p, a, packed, y, base, last, k0, kc, full_end, p0, p1); break;
      default: break;
    }
    if (last) break;
  }
}

}  // namespace

bool cpu_supported() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

int64_t panel_count(int64_t n) { return (n + kPanelColumns - 1) / kPanelColumns; }

int64_t packed_floats(int64_t k, int64_t n) { return panel_count(n) * kPanelColumns * k; }

void pack(int64_t k, int64_t n, const float* src, std::span<const int64_t> offsets,
          int64_t row_stride, int64_t col_stride, float* packed) {
  if (k <= 0 || n <= 0) return;  // nothing to pack (and `src` may be null)
  const int64_t panels = panel_count(n);
  const int64_t per_matrix = packed_floats(k, n);
  const int64_t items = static_cast<int64_t>(offsets.size()) * panels;
#pragma omp parallel for schedule(static) if (items * k * kPanelColumns > (int64_t{1} << 15))
  for (int64_t item = 0; item < items; ++item) {
    const int64_t i = item / panels, panel = item % panels;
    const int64_t col0 = panel * kPanelColumns;
    const int64_t cols = std::min(kPanelColumns, n - col0);
    const float* s = src + offsets[i] + col0 * col_stride;
    float* out = packed + i * per_matrix + panel * k * kPanelColumns;
    for (int64_t r = 0; r < k; ++r, out += kPanelColumns) {
      const float* row = s + r * row_stride;
      if (col_stride == 1) {
        std::memcpy(out, row, static_cast<size_t>(cols) * sizeof(float));
      } else {
        for (int64_t c = 0; c < cols; ++c) out[c] = row[c * col_stride];
      }
      std::fill(out + cols, out + kPanelColumns, 0.0f);
    }
  }
}

void multiply(const Product& p, const float* a, std::span<const int64_t> a_offsets,
              const float* packed, std::span<const int64_t> b_offsets, float* y, int64_t y_stride) {
  const int64_t count = static_cast<int64_t>(a_offsets.size());
  if (count == 0 || p.m <= 0 || p.n <= 0) return;
  const int64_t panels = panel_count(p.n);
  // The split over threads changes no bits (see the header); it only balances the work.
  const int64_t threads = omp_get_max_threads();
  int64_t chunk_rows = kChunkRows, group = kGroupPanels;
  auto items = [&] {
    return count * ((p.m + chunk_rows - 1) / chunk_rows) * ((panels + group - 1) / group);
  };
  if (items() < 2 * threads) group = 1;
  if (items() < 2 * threads) chunk_rows = 4 * kBlockRows;
  const int64_t chunks = (p.m + chunk_rows - 1) / chunk_rows;
  const int64_t groups = (panels + group - 1) / group;
  const int64_t total = count * chunks * groups;
#pragma omp parallel for schedule(static) if (total > 1 && threads > 1)
  for (int64_t item = 0; item < total; ++item) {
    const int64_t i = item / (chunks * groups);
    const int64_t chunk = item / groups % chunks, g = item % groups;
    run_block(p, a + a_offsets[i], packed + b_offsets[i], y + i * y_stride, chunk * chunk_rows,
              std::min(p.m, (chunk + 1) * chunk_rows), g * group,
              std::min(panels, (g + 1) * group));
  }
}

}  // namespace kiln::hal::cpu::gemm
