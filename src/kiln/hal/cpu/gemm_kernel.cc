#include "kiln/hal/cpu/gemm_kernel.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "kiln/hal/cpu/gemm_activation.h"
#include "kiln/hal/cpu/softmax_kernel.h"

namespace kiln::hal::cpu::gemm {
namespace {

// The vector code is compiled for AVX2 + FMA, or AVX-512, function by function (as in
// winograd_conv.cc), so that this file adds no such instruction anywhere else; OpenMP loops call
// these per item.
#define KILN_AVX2 __attribute__((target("avx2,fma")))
#define KILN_AVX512 __attribute__((target("avx512f,avx2,fma")))

// The epilogue of the last k block, for one register block, as plain numbers: `c` points at C's
// element for the block's first row and column.
struct Epilogue {
  bool scale = false;
  float alpha = 1.0f;
  const float* c = nullptr;
  float beta = 0.0f;
  int64_t c_row_stride = 0;
  bool c_row_vector = false;        // C has a value per column (else one per row)
  const float* residual = nullptr;  // at the block's first element
  int64_t residual_row_stride = 0;
};

// Epilogue `base` moved to the register block at row `r`, column `col0`.
Epilogue at(const Epilogue& base, const Product& p, int64_t r, int64_t col0) {
  Epilogue e = base;
  if (e.c != nullptr) e.c += r * p.c_row_stride + col0 * p.c_col_stride;
  if (e.residual != nullptr) e.residual += r * p.residual_row_stride + col0;
  return e;
}

Epilogue epilogue_of(const Product& p) {
  Epilogue e;
  e.scale = p.alpha != 1.0f;
  e.alpha = p.alpha;
  e.c = p.c;
  e.beta = p.beta;
  e.c_row_stride = p.c_row_stride;
  e.c_row_vector = p.c_col_stride != 0;
  e.residual = p.residual;
  e.residual_row_stride = p.residual_row_stride;
  return e;
}

// The activation of a register block just finished (`rows` rows of `panels` panels from column
// `col0`, at `y`), while it is still in L1: the ISA's `activate` (gemm_activation.h).
using ActivateFn = void (*)(Activation, float*, int64_t, int64_t, int64_t);
inline void activate_block(const Product& p, float* y, int64_t rows, int64_t col0, int64_t panels,
                           ActivateFn activate) {
  if (p.activation == Activation::kNone) return;
  activate(p.activation, y, p.ldy, rows, std::min(panels * kPanelColumns, p.n - col0));
}

// Software prefetch of B. A constant B larger than the caches (a transformer's weights) comes from
// memory. Read only as the first register block of rows asks for it, a line per panel and k step,
// it stalls that block on memory: BERT-base's products at batch 1 ran at about 65% of the FMA
// peak. So while the register blocks of rows pass over one group of panels, they also fetch the
// group the loop reads next into L2 (each k step of a panel is one 64-byte line), at a pace memory
// keeps up with: each panel's lines are shared out over `every` register blocks, each fetching one
// line every `every` k steps (prefetch_every). A line a k step, all from the group's first blocks,
// kept the core's line fill buffers full of lines on their way from memory, and the block's own
// loads of B from L2 waited for them: spread over up to 8 blocks, BERT-base at batch 1 ran 8%
// faster, ViT-B/16 at batch 1 7-10%, both at batch 4 3-4% (Intel Xeon, AVX-512, 2 threads).
struct NextB {
  int64_t panel = 0, end = 0, k0 = 0;  // panels [panel, end) of the k block from k0
};

// What the panel loop of `run_block_*` reads after panels [.., end) of the k block from k0: the
// next `width` panels of that block, else the first of the next k block; nullopt after the last.
inline std::optional<NextB> next_b(int64_t end, int64_t width, int64_t p0, int64_t p1, int64_t k0,
                                   int64_t block_k, int64_t k) {
  NextB next{end, std::min(p1, end + width), k0};
  if (next.panel >= p1) next = NextB{p0, std::min(p1, p0 + width), k0 + block_k};
  if (next.panel >= p1 || next.k0 >= k) return std::nullopt;
  return next;
}

// k steps per line fetched, for `blocks` full register blocks of rows over groups of `wide`
// panels: the largest power of two up to kMaxPrefetchEvery for which `wide * every` blocks share
// out the group's panels.
constexpr int kMaxPrefetchEvery = 8;
inline int prefetch_every(int64_t blocks, int64_t wide) {
  int every = 1;
  while (every < kMaxPrefetchEvery && 2 * every * wide <= blocks) every *= 2;
  return every;
}

// A register block's share of the next group: from `line` on, one line every `every` k steps;
// none where `line` is null.
struct Prefetch {
  const float* line = nullptr;
  int every = 1;
};

// Register block `block`'s share, at the pace `every` (prefetch_every): 1/every of panel
// next.panel + block / every, part block % every; none past the group's panels.
inline Prefetch prefetch_for(const std::optional<NextB>& next, int64_t block, int every,
                             const float* packed, int64_t panel_stride, int64_t block_k,
                             int64_t k) {
  if (!next || next->panel + block / every >= next->end) return {};
  const int64_t lines = std::min(block_k, k - next->k0);  // k steps of the next k block
  const int64_t part = (lines + every - 1) / every;
  return {packed + (next->panel + block / every) * panel_stride +
              (next->k0 + block % every * part) * kPanelColumns,
          every};
}

inline void prefetch_line(const float* line) {
  _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
}

// Calls f.template operator()<E>() with E = `every` (prefetch_every: 1, 2, 4 or 8).
template <class F>
void with_prefetch_every(int every, F&& f) {
  switch (every) {
    case 8: return f.template operator()<8>();
    case 4: return f.template operator()<4>();
    case 2: return f.template operator()<2>();
    default: return f.template operator()<1>();
  }
}

// Calls f.template operator()<R>() with R = `rows`, the rows past the last full register block
// of kFull rows (1 to kFull - 1); nothing for 0.
template <int kFull, class F>
void with_tail_rows(int64_t rows, F&& f) {
  if constexpr (kFull > 1) {
    if (rows == kFull - 1) {
      f.template operator()<kFull - 1>();
    } else {
      with_tail_rows<kFull - 1>(rows, f);
    }
  }
}

// ---- AVX2 + FMA: 6 rows x 16 columns (two ymm per row) per register block ----

// k per block: one panel's block of B (768 x 16 floats, 48 KiB) stays in L1 or L2 while the rows
// of a chunk pass over it; the chunk's block of A (96 x 768 floats) stays in L2 across its panels.
// (Measured on Zen 5: blocks of 768 beat 256 by about 8%, fewer partial sums stored and loaded.)
constexpr int64_t kBlockK = 768;
constexpr int64_t kRows = 6;  // rows per register block
// Panels a tail of 1 to 3 rows waits for (run_block_avx2): a multiple of its blocks of 4 or 2
// panels; 384 KiB of B at most, in L2.
constexpr int64_t kTailSpan = 8;

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

KILN_AVX2 inline Acc finish_row(Acc v, const Epilogue& f, int64_t row, int64_t panel,
                                const Columns& cols) {
  if (f.scale) {
    const __m256 alpha = _mm256_set1_ps(f.alpha);
    v.lo = _mm256_mul_ps(v.lo, alpha);
    v.hi = _mm256_mul_ps(v.hi, alpha);
  }
  if (f.c != nullptr) {
    const float* c = f.c + row * f.c_row_stride + (f.c_row_vector ? panel * kPanelColumns : 0);
    const Acc cv =
        f.c_row_vector ? load_row(c, cols) : Acc{_mm256_broadcast_ss(c), _mm256_broadcast_ss(c)};
    const __m256 beta = _mm256_set1_ps(f.beta);
    v.lo = _mm256_fmadd_ps(cv.lo, beta, v.lo);
    v.hi = _mm256_fmadd_ps(cv.hi, beta, v.hi);
  }
  if (f.residual != nullptr) {
    const Acc r = load_row(f.residual + row * f.residual_row_stride + panel * kPanelColumns, cols);
    v.lo = _mm256_add_ps(v.lo, r.lo);
    v.hi = _mm256_add_ps(v.hi, r.hi);
  }
  return v;
}

// k step `k` of an R x W register block (tile below).
template <int R, int W>
KILN_AVX2 inline void fma_step(Acc (&c)[R][W], const float* a, int64_t lda, const float* bp,
                               int64_t panel_stride, int64_t k) {
#pragma GCC unroll 8
  for (int w = 0; w < W; ++w) {
    const float* b = bp + w * panel_stride + k * kPanelColumns;
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) fma_row(c[r][w], a + r * lda + k, b0, b1);
  }
}

// R rows (1..6) x W panels over `kc` k: `a` at the block's first row and k, `bp` at the first
// panel's row k, the next panels `panel_stride` floats apart. Starts from the partial sums in Y
// when `accumulate`, applies `finish` when set. (Several panels for a block of few rows give the
// core independent sums to interleave; each element is still its own chain of FMAs.) Fetches a
// line from `prefetch` every kEvery k steps when set (prefetch_for).
template <int R, int W, int kEvery = 1>
KILN_AVX2 inline void tile(const float* a, int64_t lda, const float* bp, int64_t panel_stride,
                           int64_t kc, float* y, int64_t ldy, const Columns (&cols)[W],
                           bool accumulate, const Epilogue* finish,
                           const float* prefetch = nullptr) {
  Acc c[R][W];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) {
      c[r][w] = accumulate ? load_row(y + r * ldy + w * kPanelColumns, cols[w])
                           : Acc{_mm256_setzero_ps(), _mm256_setzero_ps()};
    }
  }
  int64_t k = 0;
  if (prefetch != nullptr) {
    for (; k + kEvery <= kc; k += kEvery) {
      prefetch_line(prefetch + k / kEvery * kPanelColumns);
#pragma GCC unroll 8
      for (int e = 0; e < kEvery; ++e) fma_step(c, a, lda, bp, panel_stride, k + e);
    }
  }
  for (; k < kc; ++k) fma_step(c, a, lda, bp, panel_stride, k);
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
                          const Epilogue& base, bool last, int64_t k0, int64_t kc, int64_t r,
                          int64_t p0, int64_t p1, Prefetch prefetch = {}) {
  constexpr int kWide = panels_for(R);
  const float* ar = a + r * p.lda + k0;
  const int64_t panel_stride = p.k * kPanelColumns;
  for (int64_t panel = p0; panel < p1;) {
    const int64_t col0 = panel * kPanelColumns;
    const float* bp = packed + panel * panel_stride + k0 * kPanelColumns;
    float* yr = y + r * p.ldy + col0;
    const Epilogue finish = at(base, p, r, col0);
    const Epilogue* f = last ? &finish : nullptr;
    if (kWide > 1 && panel + kWide <= p1) {
      Columns cols[kWide];
      for (int w = 0; w < kWide; ++w) cols[w] = columns(p.n - col0 - w * kPanelColumns);
      tile<R, kWide>(ar, p.lda, bp, panel_stride, kc, yr, p.ldy, cols, k0 > 0, f);
      if (last) activate_block(p, yr, R, col0, kWide, detail::activate_avx2);
      panel += kWide;
    } else {
      const Columns cols[1] = {columns(p.n - col0)};
      if constexpr (R == kRows) {  // only the full rows fetch B ahead
        with_prefetch_every(prefetch.every, [&]<int kEvery>() {
          tile<R, 1, kEvery>(ar, p.lda, bp, panel_stride, kc, yr, p.ldy, cols, k0 > 0, f,
                             prefetch.line);
        });
      } else {
        tile<R, 1>(ar, p.lda, bp, panel_stride, kc, yr, p.ldy, cols, k0 > 0, f);
      }
      if (last) activate_block(p, yr, R, col0, 1, detail::activate_avx2);
      ++panel;
    }
  }
}

// Rows [r0, r1) x panels [p0, p1) of one product, all of k.
KILN_AVX2 void run_block_avx2(const Product& p, const float* a, const float* packed, float* y,
                              int64_t r0, int64_t r1, int64_t p0, int64_t p1) {
  const Epilogue base = epilogue_of(p);
  const int64_t panel_stride = p.k * kPanelColumns;
  // Blocks of k keep a panel's block of B in L1 for the next register blocks of rows; with one
  // register block there is nothing to keep, and B streams best in one piece.
  const int64_t block_k = r1 - r0 > kRows ? kBlockK : std::max<int64_t>(p.k, 1);
  const int64_t full_end = r0 + (r1 - r0) / kRows * kRows;
  const int64_t tail = r1 - full_end;
  // The rows after the last full register block follow the full rows over the same panels, while
  // their B is in cache (see run_block_avx512): a tail whose blocks are one panel wide, as the
  // full rows' are, after each panel; a tail of wider blocks (panels_for) every kTailSpan panels.
  const int64_t tail_span = panels_for(static_cast<int>(tail)) == 1 ? 1 : kTailSpan;
  const int every = prefetch_every((full_end - r0) / kRows, 1);
  for (int64_t k0 = 0;; k0 += block_k) {
    const int64_t kc = std::min(block_k, p.k - k0);
    const bool last = k0 + kc >= p.k;
    int64_t tail_from = p0;
    for (int64_t panel = p0; panel < p1; ++panel) {
      const std::optional<NextB> next = next_b(panel + 1, 1, p0, p1, k0, block_k, p.k);
      int64_t block = 0;
      for (int64_t r = r0; r < full_end; r += kRows, ++block) {
        rows_block<6>(p, a, packed, y, base, last, k0, kc, r, panel, panel + 1,
                      prefetch_for(next, block, every, packed, panel_stride, block_k, p.k));
      }
      if (panel + 1 - tail_from >= tail_span || panel + 1 == p1) {
        with_tail_rows<kRows>(tail, [&]<int R>() {
          rows_block<R>(p, a, packed, y, base, last, k0, kc, full_end, tail_from, panel + 1);
        });
        tail_from = panel + 1;
      }
    }
    if (last) break;
  }
}

// ---- AVX-512: 8 rows x 3 panels (one zmm per row and panel, 24 accumulators) per block ----

// k per block: the block of B of one register block's 3 panels (768 x 48 floats, 144 KiB) stays
// in L2 while the rows of a chunk pass over it. (Measured on Zen 5 at 1 thread: about 190
// GFLOP/s with blocks of 768, 160-180 with 128-512, whose partial sums cost more than L1 saves.)
constexpr int64_t kBlockK512 = 768;
constexpr int64_t kRows512 = 8;
constexpr int kWide512 = 3;
// Panels a tail of 1 or 2 rows waits for (run_block_avx512): a multiple of its blocks of 8 or 4
// panels and of the full rows' 3; at most 1.2 MB of B, in L2 or the last-level cache.
constexpr int64_t kTailSpan512 = 24;

KILN_AVX512 inline __mmask16 column_mask(int64_t count) {
  const int64_t c = std::clamp<int64_t>(count, 0, kPanelColumns);
  return static_cast<__mmask16>((1u << c) - 1u);
}

KILN_AVX512 inline __m512 finish_row512(__m512 v, const Epilogue& f, int64_t row, int64_t panel,
                                        __mmask16 cols) {
  if (f.scale) v = _mm512_mul_ps(v, _mm512_set1_ps(f.alpha));
  if (f.c != nullptr) {
    const float* c = f.c + row * f.c_row_stride + (f.c_row_vector ? panel * kPanelColumns : 0);
    const __m512 cv = f.c_row_vector ? _mm512_maskz_loadu_ps(cols, c) : _mm512_set1_ps(*c);
    v = _mm512_fmadd_ps(cv, _mm512_set1_ps(f.beta), v);
  }
  if (f.residual != nullptr) {
    v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(cols, f.residual + row * f.residual_row_stride +
                                                         panel * kPanelColumns));
  }
  return v;
}

// k step `k` of an R x W register block (tile512 below).
template <int R, int W>
KILN_AVX512 inline void fma_step512(__m512 (&c)[R][W], const float* a, int64_t lda, const float* bp,
                                    int64_t panel_stride, int64_t k) {
  __m512 b[W];
#pragma GCC unroll 8
  for (int w = 0; w < W; ++w) b[w] = _mm512_loadu_ps(bp + w * panel_stride + k * kPanelColumns);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const __m512 x = _mm512_set1_ps(a[r * lda + k]);
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) c[r][w] = _mm512_fmadd_ps(x, b[w], c[r][w]);
  }
}

// R rows x W panels over `kc` k, as `tile` above with one zmm per row and panel, fetching a line
// from `prefetch` every kEvery k steps when set.
template <int R, int W, int kEvery = 1>
KILN_AVX512 inline void tile512(const float* a, int64_t lda, const float* bp, int64_t panel_stride,
                                int64_t kc, float* y, int64_t ldy, const __mmask16 (&cols)[W],
                                bool accumulate, const Epilogue* finish,
                                const float* prefetch = nullptr) {
  __m512 c[R][W];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) {
      c[r][w] = accumulate ? _mm512_maskz_loadu_ps(cols[w], y + r * ldy + w * kPanelColumns)
                           : _mm512_setzero_ps();
    }
  }
  int64_t k = 0;
  if (prefetch != nullptr) {
    for (; k + kEvery <= kc; k += kEvery) {
      prefetch_line(prefetch + k / kEvery * kPanelColumns);
#pragma GCC unroll 8
      for (int e = 0; e < kEvery; ++e) fma_step512(c, a, lda, bp, panel_stride, k + e);
    }
  }
#pragma GCC unroll 2
  for (; k < kc; ++k) fma_step512(c, a, lda, bp, panel_stride, k);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) {
      const __m512 v = finish != nullptr ? finish_row512(c[r][w], *finish, r, w, cols[w]) : c[r][w];
      _mm512_mask_storeu_ps(y + r * ldy + w * kPanelColumns, cols[w], v);
    }
  }
}

// Panels per register block for a block of R rows: at least 8 accumulators where there is room.
constexpr int panels_for512(int rows) { return rows == 1 ? 8 : rows == 2 ? 4 : 3; }

// Panels of the next register block when `left` panels remain, for blocks of `wide` panels: a
// full block, except that 4 panels go as 2 + 2 rather than 3 + 1, and 2 panels as one block of 2
// (where `wide` is 3): one panel gives 8 accumulators, each FMA waiting on a load of its own (an
// attention product with 64 columns, 4 panels, ran 25% of its work that way).
constexpr int64_t panels_next512(int64_t left, int wide) {
  if (left >= wide && left != wide + 1) return wide;
  return wide == 3 && left >= 2 ? 2 : 1;
}

// R rows x W panels from `panel`, one k block, fetching `prefetch` (prefetch_for) when R is full.
template <int R, int W>
KILN_AVX512 inline void panels512(const Product& p, const float* ar, const float* packed, float* y,
                                  const Epilogue& base, bool last, int64_t k0, int64_t kc,
                                  int64_t r, int64_t panel, Prefetch prefetch) {
  const int64_t col0 = panel * kPanelColumns;
  const int64_t panel_stride = p.k * kPanelColumns;
  const float* bp = packed + panel * panel_stride + k0 * kPanelColumns;
  float* yr = y + r * p.ldy + col0;
  const Epilogue finish = at(base, p, r, col0);
  __mmask16 cols[W];
  for (int w = 0; w < W; ++w) cols[w] = column_mask(p.n - col0 - w * kPanelColumns);
  const Epilogue* f = last ? &finish : nullptr;
  if constexpr (R >= kRows512 - 1) {  // only the full rows (blocks of 8 or 7) fetch B ahead
    with_prefetch_every(prefetch.every, [&]<int kEvery>() {
      tile512<R, W, kEvery>(ar, p.lda, bp, panel_stride, kc, yr, p.ldy, cols, k0 > 0, f,
                            prefetch.line);
    });
  } else {
    tile512<R, W>(ar, p.lda, bp, panel_stride, kc, yr, p.ldy, cols, k0 > 0, f);
  }
  if (last) activate_block(p, yr, R, col0, W, detail::activate_avx512);
}

// A block of R rows from `r`, panels [p0, p1), one k block.
template <int R>
KILN_AVX512 void rows_block512(const Product& p, const float* a, const float* packed, float* y,
                               const Epilogue& base, bool last, int64_t k0, int64_t kc, int64_t r,
                               int64_t p0, int64_t p1, Prefetch prefetch = {}) {
  constexpr int kWide = panels_for512(R);
  const float* ar = a + r * p.lda + k0;
  for (int64_t panel = p0; panel < p1;) {
    const int64_t width = panels_next512(p1 - panel, kWide);
    if (width == kWide) {
      panels512<R, kWide>(p, ar, packed, y, base, last, k0, kc, r, panel, prefetch);
    } else if (width == 2) {
      panels512<R, 2>(p, ar, packed, y, base, last, k0, kc, r, panel, prefetch);
    } else {
      panels512<R, 1>(p, ar, packed, y, base, last, k0, kc, r, panel, {});
    }
    panel += width;
  }
}

// How rows [r0, r0 + rows) split into register blocks: `eights` blocks of 8 rows, then `sevens`
// of 7, then a tail of `tail` rows (0 to 7). A tail of 1 or 2 rows is slow: its blocks of 8 or 4
// panels load a panel of B for every 1 or 2 FMAs, and do not fetch B ahead. Where there are
// blocks enough, such rows go as blocks of 8 and 7 without a tail instead (49 rows, ResNet-50's
// 7x7 stage at batch 1: 7 x 7 rather than 6 x 8 + 1, its products 3-6% faster, Zen 5, 2 threads).
// Longer tails stay (197 rows as 22 x 8 + 3 x 7 ran as fast as 24 x 8 + 5). Which rows a block
// holds changes no bits.
struct RowBlocks {
  int64_t eights = 0, sevens = 0, tail = 0;
  int64_t full() const { return eights + sevens; }
};

inline RowBlocks row_blocks512(int64_t rows) {
  const int64_t blocks = (rows + kRows512 - 1) / kRows512;
  const int64_t tail = rows % kRows512;
  const int64_t short_by = kRows512 - tail;  // rows the last block lacks
  if (tail != 0 && tail <= 2 && short_by <= blocks) return {blocks - short_by, short_by, 0};
  return {rows / kRows512, 0, tail};
}

// Rows [r0, r1) x panels [p0, p1) of one product, all of k.
KILN_AVX512 void run_block_avx512(const Product& p, const float* a, const float* packed, float* y,
                                  int64_t r0, int64_t r1, int64_t p0, int64_t p1) {
  const Epilogue base = epilogue_of(p);
  const int64_t panel_stride = p.k * kPanelColumns;
  const int64_t block_k = r1 - r0 > kRows512 ? kBlockK512 : std::max<int64_t>(p.k, 1);
  const RowBlocks blocks = row_blocks512(r1 - r0);
  const int64_t sevens_from = r0 + blocks.eights * kRows512;
  const int64_t full_end = sevens_from + blocks.sevens * (kRows512 - 1);
  const int64_t tail = blocks.tail;
  // The rows after the last full register block follow the full rows over the same panels, while
  // their B is in L2. After all the groups, they found a B larger than L2 gone and read it from
  // memory unfetched: ViT-B/16's 197-row products (5 tail rows, 2.5% of their work) spent 5% of
  // the model's time in the tail. A tail whose blocks are as wide as the full rows' goes after
  // each group; one of wider blocks (panels_for512: 1 or 2 rows) every kTailSpan512 panels.
  const int64_t tail_span = panels_for512(static_cast<int>(tail)) == kWide512 ? 1 : kTailSpan512;
  const int every = prefetch_every(blocks.full(), kWide512);
  for (int64_t k0 = 0;; k0 += block_k) {
    const int64_t kc = std::min(block_k, p.k - k0);
    const bool last = k0 + kc >= p.k;
    int64_t tail_from = p0;
    for (int64_t panel = p0; panel < p1;) {
      const int64_t end = panel + panels_next512(p1 - panel, kWide512);
      const std::optional<NextB> next = next_b(end, kWide512, p0, p1, k0, block_k, p.k);
      int64_t block = 0;
      for (int64_t r = r0; r < sevens_from; r += kRows512, ++block) {
        rows_block512<8>(p, a, packed, y, base, last, k0, kc, r, panel, end,
                         prefetch_for(next, block, every, packed, panel_stride, block_k, p.k));
      }
      for (int64_t r = sevens_from; r < full_end; r += kRows512 - 1, ++block) {
        rows_block512<7>(p, a, packed, y, base, last, k0, kc, r, panel, end,
                         prefetch_for(next, block, every, packed, panel_stride, block_k, p.k));
      }
      if (end - tail_from >= tail_span || end == p1) {
        with_tail_rows<kRows512>(tail, [&]<int R>() {
          rows_block512<R>(p, a, packed, y, base, last, k0, kc, full_end, tail_from, end);
        });
        tail_from = end;
      }
      panel = end;
    }
    if (last) break;
  }
}

// Rows per register block and panels per register block of each ISA.
int64_t block_rows(Isa isa) { return isa == Isa::kAvx512 ? kRows512 : kRows; }
int64_t block_panels(Isa isa) { return isa == Isa::kAvx512 ? kWide512 : 1; }

// Rows [0, rows) (rows a multiple of 8) of one panel whose 16 columns are each contiguous along k
// (row stride 1, column c at s + c * col_stride): 8 x 8 blocks transposed in registers, a quarter
// of the instructions of the element-by-element copy. The transposed read of a K in attention
// (QKᵀ) packs this way.
KILN_AVX2 void pack_transposed_panel(const float* s, int64_t col_stride, int64_t rows, float* out) {
  for (int64_t r0 = 0; r0 < rows; r0 += 8) {
    for (int64_t half = 0; half < kPanelColumns; half += 8) {
      __m256 v[8];
      for (int64_t c = 0; c < 8; ++c) v[c] = _mm256_loadu_ps(s + (half + c) * col_stride + r0);
      const __m256 a0 = _mm256_unpacklo_ps(v[0], v[1]), a1 = _mm256_unpackhi_ps(v[0], v[1]);
      const __m256 a2 = _mm256_unpacklo_ps(v[2], v[3]), a3 = _mm256_unpackhi_ps(v[2], v[3]);
      const __m256 a4 = _mm256_unpacklo_ps(v[4], v[5]), a5 = _mm256_unpackhi_ps(v[4], v[5]);
      const __m256 a6 = _mm256_unpacklo_ps(v[6], v[7]), a7 = _mm256_unpackhi_ps(v[6], v[7]);
      const __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xEE);
      const __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xEE);
      const __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xEE);
      const __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xEE);
      // Row r0 + j of the block: element j of each of the 8 columns.
      const __m256 t[8] = {
          _mm256_permute2f128_ps(b0, b4, 0x20), _mm256_permute2f128_ps(b1, b5, 0x20),
          _mm256_permute2f128_ps(b2, b6, 0x20), _mm256_permute2f128_ps(b3, b7, 0x20),
          _mm256_permute2f128_ps(b0, b4, 0x31), _mm256_permute2f128_ps(b1, b5, 0x31),
          _mm256_permute2f128_ps(b2, b6, 0x31), _mm256_permute2f128_ps(b3, b7, 0x31)};
      for (int64_t j = 0; j < 8; ++j) {
        _mm256_storeu_ps(out + (r0 + j) * kPanelColumns + half, t[j]);
      }
    }
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
  const bool transposed = row_stride == 1 && col_stride != 1 && cpu_supported();
  // Static over matrix-major items: each thread packs a contiguous block of matrices, the block
  // of products multiply() then gives it (multiply_products), so a packed B stays in its core.
#pragma omp parallel for schedule(static) if (items * k * kPanelColumns > (int64_t{1} << 15))
  for (int64_t item = 0; item < items; ++item) {
    const int64_t i = item / panels, panel = item % panels;
    const int64_t col0 = panel * kPanelColumns;
    const int64_t cols = std::min(kPanelColumns, n - col0);
    const float* s = src + offsets[i] + col0 * col_stride;
    float* out = packed + i * per_matrix + panel * k * kPanelColumns;
    int64_t r = 0;
    if (transposed && cols == kPanelColumns) {
      r = k / 8 * 8;
      pack_transposed_panel(s, col_stride, r, out);
      out += r * kPanelColumns;
    }
    for (; r < k; ++r, out += kPanelColumns) {
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

namespace {

// Both multiply() forms: product i writes Y at y + y_offsets[i], or at y + i * y_stride (and then
// reads its residual at p.residual + i * y_stride, unless p.residual_offsets places it) where
// y_offsets is empty.
void multiply_products(const Product& p, const float* a, std::span<const int64_t> a_offsets,
                       const float* packed, std::span<const int64_t> b_offsets, float* y,
                       int64_t y_stride, std::span<const int64_t> y_offsets, Isa isa) {
  const int64_t count = static_cast<int64_t>(a_offsets.size());
  if (count == 0 || p.m <= 0 || p.n <= 0) return;
  if (isa == Isa::kAvx512 && !__builtin_cpu_supports("avx512f")) isa = Isa::kAvx2;
  const int64_t threads = omp_get_max_threads();
  const int64_t rows = block_rows(isa), wide = block_panels(isa);
  // A fused softmax wants whole rows in each work item (below), so that a row is normalized while
  // it is in the cache of the core that computed it. Where register blocks of whole rows give
  // fewer than 4 items a thread (a classifier's product of one row at batch 1 was one item, on one
  // thread: 1.9x the time of the product split over panels; of 16 rows, two items that each read
  // all of B: 1.2x), the product is split as one without the softmax, which then runs over the
  // finished rows: the same kernel on the same values, so the same bits. (Attention's products,
  // one per head, stay fused.)
  if (p.softmax && threads > 1 && count * ((p.m + rows - 1) / rows) < 4 * threads) {
    Product product = p;
    product.softmax = false;
    multiply_products(product, a, a_offsets, packed, b_offsets, y, y_stride, y_offsets, isa);
    for (int64_t i = 0; i < count; ++i) {
      float* yi = y + (y_offsets.empty() ? i * y_stride : y_offsets[static_cast<size_t>(i)]);
      softmax::rows(yi, yi, p.m, p.n, isa);
    }
    return;
  }
  const int64_t panels = panel_count(p.n);
  // The split over threads changes no bits (see the header); it only balances the work. Work
  // items are all rows or chunks of about 96 rows (below) x groups of panels, all of k, of nearly
  // equal sizes (whole register blocks), at least 4 per thread where the product allows (one per
  // thread for a single product whose items take all rows, below). They go in order of panel
  // group, then chunk: the threads' chunks of rows use a group's B at about the same time, so a B
  // larger than the caches comes from memory about once (BERT-base at batch 1: its products took
  // ~7% less time than in chunk-major order).
  auto round_up = [](int64_t v, int64_t to) { return (v + to - 1) / to * to; };
  auto split = [&](int64_t total, int64_t pieces, int64_t unit) {
    return round_up((total + pieces - 1) / pieces, unit);  // the size of each piece
  };
  // A product of few rows whose A is small gives each item all rows of its group of panels, so
  // that each group of B comes to one core, once (ViT-B/16's weight products at 197 rows, B from
  // memory: 2-4% faster than with chunks of rows sharing a group between the cores); otherwise
  // items take chunks of rows, whose A stays in L2. Small: at most 4 MiB, and at most 1 MiB (a
  // Zen 5 core's L2) in one block of k, which every group of panels reads again. (BERT-base's
  // products of 512 x 768 at batch 4 and ViT-B/16's of 788 x 768 ran 3-4% slower with all rows
  // per item, Zen 5, 2 threads: their A went through the caches once per group of panels. ViT's
  // MLP product of 197 x 3072 at batch 1, 2.4 MiB of A in blocks of 0.6, ran 2-4% faster with
  // all rows than in chunks: as fast as its first product, of 197 x 768.)
  constexpr int64_t kAllRowsMaxA = int64_t{1} << 20;       // floats: 4 MiB
  constexpr int64_t kAllRowsMaxABlock = int64_t{1} << 18;  // floats: 1 MiB
  const bool all_rows =
      p.m <= 1024 && p.m * p.k <= kAllRowsMaxA && p.m * std::min(p.k, kBlockK) <= kAllRowsMaxABlock;
  // One product whose items take all rows (a weight product at a small batch) gives each thread
  // one item, a contiguous range of panels: the block loop fetches the next group of panels' B
  // into L2 while it computes one (NextB), so only a range's first group comes from memory
  // unfetched. Four items a thread left that to half the groups of BERT-base's 768-column
  // products at batch 1 (in the model, Zen 5, 2 threads: those products 3.5-4.5% faster with one
  // range a thread, the ones with 3072 rows or columns 0.5-3.5%). The ranges are equal, so a core
  // that another process slows holds the other up (TeamChoice then tries the one-thread plan).
  const bool range_per_thread = all_rows && count == 1;
  // A softmax of the rows needs whole rows in each work item: one group of every panel.
  int64_t row_pieces = all_rows ? 1 : std::max<int64_t>(1, (p.m + 95) / 96);
  int64_t panel_pieces =
      p.softmax || range_per_thread ? 1 : std::max<int64_t>(1, panels / (4 * wide));
  const int64_t want = threads > 1 ? (range_per_thread ? 1 : 4) * threads : 1;
  int64_t chunk_rows = split(p.m, row_pieces, rows), group = split(panels, panel_pieces, wide);
  auto items = [&] {
    return count * ((p.m + chunk_rows - 1) / chunk_rows) * ((panels + group - 1) / group);
  };
  // Fewer than wanted: split the panels further, then the rows, down to one register block.
  while (items() < want && group > wide && !p.softmax) group = split(panels, ++panel_pieces, wide);
  while (items() < want && chunk_rows > rows) chunk_rows = split(p.m, ++row_pieces, rows);
  const int64_t chunks = (p.m + chunk_rows - 1) / chunk_rows;
  const int64_t groups = (panels + group - 1) / group;
  const int64_t total = count * chunks * groups;
  auto run = isa == Isa::kAvx512 ? run_block_avx512 : run_block_avx2;
  auto run_item = [&](int64_t item) {
    const int64_t i = item / (chunks * groups);
    const int64_t g = item / chunks % groups, chunk = item % chunks;
    Product q = p;
    if (q.residual != nullptr) {
      q.residual += p.residual_offsets != nullptr ? p.residual_offsets[i] : i * y_stride;
    }
    const int64_t r0 = chunk * chunk_rows, r1 = std::min(p.m, r0 + chunk_rows);
    float* yi = y + (y_offsets.empty() ? i * y_stride : y_offsets[static_cast<size_t>(i)]);
    run(q, a + a_offsets[i], packed + b_offsets[i], yi, r0, r1, g * group,
        std::min(panels, (g + 1) * group));
    if (p.softmax)
      softmax::rows_on_this_thread(yi + r0 * p.ldy, yi + r0 * p.ldy, r1 - r0, p.n, isa);
  };
  // Several products go to the threads in contiguous blocks of items (static), as pack() hands
  // out their matrices: each product then runs on the core that packed its B, and in attention
  // on the one that computed its heads' columns of Q, K and V where those projections took one
  // range of panels a thread, so its operands are in that core's caches. (In the model, Zen 5, 2
  // threads, against items handed out one at a time: attention's P·V products 12-23% faster,
  // its QKᵀ products 2-13%, BERT-base at batch 1 and 4 and ViT-B/16 at batch 1.) One range a
  // thread is static too. Otherwise items go one at a time to whichever thread is free, which
  // evens out cores that other processes slow.
  if (count > 1 || range_per_thread) {
#pragma omp parallel for schedule(static) if (total > 1 && threads > 1)
    for (int64_t item = 0; item < total; ++item) run_item(item);
  } else {
#pragma omp parallel for schedule(dynamic, 1) if (total > 1 && threads > 1)
    for (int64_t item = 0; item < total; ++item) run_item(item);
  }
}

// Rows of the scores a work item of attend() holds at most: at a sequence of 2048, 1 MiB (a Zen 5
// core's L2); ViT-B/16's 197 rows go as 104 and 93, BERT's 128 as one chunk. (Zen 5, AVX-512,
// 2 threads, attention's products alone: chunks of 32 to 256 rows within 4% of each other.)
constexpr int64_t kAttendRows = 128;

// The calling thread's buffer for attend()'s scores: at least `bytes`, 64-byte aligned (as the
// arena's values are), kept for the thread's next call, so that the hot path allocates only
// when a longer sequence comes.
float* thread_scores(size_t bytes) {
  struct Buffer {
    std::unique_ptr<float, decltype(&std::free)> data{nullptr, &std::free};
    size_t bytes = 0;
  };
  thread_local Buffer buffer;
  if (buffer.bytes < bytes) {
    const size_t rounded = std::max<size_t>((bytes + 63) / 64 * 64, 64);
    buffer.data.reset(static_cast<float*>(std::aligned_alloc(64, rounded)));
    buffer.bytes = buffer.data ? rounded : 0;
  }
  return buffer.data.get();
}

}  // namespace

void attend(const Product& p, const float* a, std::span<const int64_t> a_offsets,
            const float* packed, std::span<const int64_t> b_offsets, const Product& v,
            const float* packed_v, std::span<const int64_t> v_offsets, float* y, int64_t y_stride,
            std::span<const int64_t> y_offsets, Isa isa) {
  const int64_t count = static_cast<int64_t>(a_offsets.size());
  if (count == 0 || p.m <= 0 || v.n <= 0) return;
  if (isa == Isa::kAvx512 && !__builtin_cpu_supports("avx512f")) isa = Isa::kAvx2;
  const int64_t rows = block_rows(isa);
  // Chunks of nearly equal size in whole register blocks.
  const int64_t chunks = (p.m + kAttendRows - 1) / kAttendRows;
  const int64_t chunk_rows = ((p.m + chunks - 1) / chunks + rows - 1) / rows * rows;
  const int64_t total = count * ((p.m + chunk_rows - 1) / chunk_rows);
  const int64_t per_product = total / count;
  auto run = isa == Isa::kAvx512 ? run_block_avx512 : run_block_avx2;
  // Items in product order, handed out in contiguous blocks (static), as pack() hands out the
  // matrices of K and V: each product runs on the core that packed its operands.
  // Each thread's buffer of scores (thread_scores rounds it up and aligns it).
  const size_t scores_bytes = static_cast<size_t>(chunk_rows * p.n) * sizeof(float);
#pragma omp parallel if (total > 1 && omp_get_max_threads() > 1)
  {
    float* const scores = thread_scores(scores_bytes);
#pragma omp for schedule(static)
    for (int64_t item = 0; item < total; ++item) {
      const int64_t i = item / per_product, r0 = item % per_product * chunk_rows;
      const int64_t m = std::min(chunk_rows, p.m - r0);
      // The scores of rows [r0, r0 + m), rows p.n apart in the buffer.
      Product q = p;
      q.m = m;
      q.ldy = p.n;
      q.softmax = false;
      if (q.c != nullptr) q.c += r0 * p.c_row_stride;
      if (q.residual != nullptr) {
        q.residual += p.residual_offsets[i] + r0 * p.residual_row_stride;
      }
      q.residual_offsets = nullptr;
      run(q, a + a_offsets[i] + r0 * p.lda, packed + b_offsets[i], scores, 0, m, 0,
          panel_count(p.n));
      softmax::rows_on_this_thread(scores, scores, m, p.n, isa);
      // Those rows of the probabilities times V_i.
      Product w = v;
      w.m = m;
      w.k = p.n;
      w.lda = p.n;
      float* yi = y + (y_offsets.empty() ? i * y_stride : y_offsets[static_cast<size_t>(i)]);
      run(w, scores, packed_v + v_offsets[i], yi + r0 * v.ldy, 0, m, 0, panel_count(v.n));
    }
  }
}

void multiply(const Product& p, const float* a, std::span<const int64_t> a_offsets,
              const float* packed, std::span<const int64_t> b_offsets, float* y, int64_t y_stride,
              Isa isa) {
  multiply_products(p, a, a_offsets, packed, b_offsets, y, y_stride, {}, isa);
}

void multiply(const Product& p, const float* a, std::span<const int64_t> a_offsets,
              const float* packed, std::span<const int64_t> b_offsets, float* y,
              std::span<const int64_t> y_offsets, Isa isa) {
  multiply_products(p, a, a_offsets, packed, b_offsets, y, 0, y_offsets, isa);
}

}  // namespace kiln::hal::cpu::gemm
