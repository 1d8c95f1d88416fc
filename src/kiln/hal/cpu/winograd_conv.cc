#include "kiln/hal/cpu/winograd_conv.h"

#include <immintrin.h>

#include <algorithm>

namespace kiln::hal::cpu::winograd {
namespace {

// The vector code is compiled for AVX2 + FMA function by function, so that this file adds no
// such instruction anywhere else; OpenMP loops call these helpers per iteration.
#define KILN_AVX2 __attribute__((target("avx2,fma")))

constexpr int64_t kTilesPerBlock = 6;  // tiles per register block of the product kernel
constexpr int64_t kOutPerBlock = 16;   // output channels per register block
constexpr int64_t kVec = 8;            // floats per AVX2 vector = nChw8c block

// Tiles are processed in chunks of whole blocks whose transformed input and products together
// take at most max(kChunkBytes, a quarter of the transformed weights), so they are still in
// cache when read back; each chunk reads all the weights once, hence bigger chunks for big
// weights.
constexpr int64_t kChunkBytes = int64_t{1} << 19;

int64_t transformed_weight_bytes(const Conv3x3& s) {
  return 16 * s.channels * s.out_channels * static_cast<int64_t>(sizeof(float));
}
// One block's transformed input and products.
int64_t block_scratch_bytes(const Conv3x3& s) {
  return 16 * kTilesPerBlock * (s.channels + s.out_channels) * static_cast<int64_t>(sizeof(float));
}

struct Geometry {
  int64_t cb, ob, ob8;        // C/8, M/16, M/8
  int64_t tiles_h, tiles_w;   // 2x2 output tiles per column and row of one image
  int64_t image_tiles;        // tiles of one image
  int64_t tiles, blocks;      // all images' tiles, image after image; blocks of kTilesPerBlock
  int64_t chunk_blocks;       // blocks per chunk
  int64_t chunk_tiles;        // tiles per chunk (a multiple of kTilesPerBlock)
  size_t v_floats, m_floats;  // one chunk's transformed input and 16 products

  Geometry(const Conv3x3& s, int64_t batch)
      : cb(s.channels / kVec),
        ob(s.out_channels / kOutPerBlock),
        ob8(s.out_channels / kVec),
        tiles_h((s.out_h + 1) / 2),
        tiles_w((s.out_w + 1) / 2),
        image_tiles(tiles_h * tiles_w),
        tiles(batch * image_tiles),
        blocks((tiles + kTilesPerBlock - 1) / kTilesPerBlock),
        chunk_blocks(std::clamp<int64_t>(
            std::max(kChunkBytes, transformed_weight_bytes(s) / 4) / block_scratch_bytes(s), 1,
            blocks)),
        chunk_tiles(chunk_blocks * kTilesPerBlock),
        v_floats(static_cast<size_t>(16 * chunk_tiles * s.channels)),
        m_floats(static_cast<size_t>(16 * chunk_tiles * s.out_channels)) {}
};

size_t round_up_64(size_t bytes) { return (bytes + 63) / 64 * 64; }

// --- input transform: V = B^T d B for 6 tiles of one 8-channel block -------------------------
// V layout, per chunk: [16][chunk blocks][C/8][6 tiles][8 channels], so the product kernel
// broadcasts the 6 tiles' values of one channel from 24 consecutive bytes. `block` counts over
// the batch's tiles, `slot` from the chunk's first.
KILN_AVX2 void transform_input_block(const Conv3x3& s, const Geometry& g, const float* src,
                                     float* v, int64_t block, int64_t slot, int64_t cb) {
  const size_t xi_stride = static_cast<size_t>(g.chunk_blocks * g.cb * kTilesPerBlock * kVec);
  float* out = v + (slot * g.cb + cb) * kTilesPerBlock * kVec;
  for (int64_t j = 0; j < kTilesPerBlock; ++j) {
    const int64_t t = block * kTilesPerBlock + j;
    __m256 d[4][4];
    if (t >= g.tiles) {
      for (auto& row : d)
        for (auto& x : row) x = _mm256_setzero_ps();
    } else {
      const int64_t image = t / g.image_tiles, tile = t % g.image_tiles;
      const float* plane = src + (image * s.channels + cb * kVec) * s.in_h * s.in_w;
      const int64_t y0 = (tile / g.tiles_w) * 2 - s.pad_top;
      const int64_t x0 = (tile % g.tiles_w) * 2 - s.pad_left;
      if (y0 >= 0 && y0 + 4 <= s.in_h && x0 >= 0 && x0 + 4 <= s.in_w) {  // inside: no checks
        const float* row = plane + (y0 * s.in_w + x0) * kVec;
        for (int64_t i = 0; i < 4; ++i, row += s.in_w * kVec) {
          for (int64_t k = 0; k < 4; ++k) d[i][k] = _mm256_loadu_ps(row + k * kVec);
        }
      } else {
        for (int64_t i = 0; i < 4; ++i) {
          const int64_t y = y0 + i;
          for (int64_t k = 0; k < 4; ++k) {
            const int64_t x = x0 + k;
            d[i][k] = (y < 0 || y >= s.in_h || x < 0 || x >= s.in_w)
                          ? _mm256_setzero_ps()
                          : _mm256_loadu_ps(plane + (y * s.in_w + x) * kVec);
          }
        }
      }
    }
    __m256 r[4][4];  // B^T d
    for (int k = 0; k < 4; ++k) {
      r[0][k] = _mm256_sub_ps(d[0][k], d[2][k]);
      r[1][k] = _mm256_add_ps(d[1][k], d[2][k]);
      r[2][k] = _mm256_sub_ps(d[2][k], d[1][k]);
      r[3][k] = _mm256_sub_ps(d[1][k], d[3][k]);
    }
    float* o = out + j * kVec;
    for (int i = 0; i < 4; ++i) {  // (B^T d) B
      _mm256_storeu_ps(o + (i * 4 + 0) * xi_stride, _mm256_sub_ps(r[i][0], r[i][2]));
      _mm256_storeu_ps(o + (i * 4 + 1) * xi_stride, _mm256_add_ps(r[i][1], r[i][2]));
      _mm256_storeu_ps(o + (i * 4 + 2) * xi_stride, _mm256_sub_ps(r[i][2], r[i][1]));
      _mm256_storeu_ps(o + (i * 4 + 3) * xi_stride, _mm256_sub_ps(r[i][1], r[i][3]));
    }
  }
}

// --- the 16 products: M[xi] = V[xi] (tiles x C) times U[xi] (C x M) --------------------------
// One register block: 6 tiles x 16 output channels in 12 accumulators, summing the channels in
// order, 8 per step. Written in assembly so that the accumulators stay in registers (compilers
// spill some of them here): per channel, 2 weight loads, 6 broadcasts and 12 FMAs.
#define KILN_WINOGRAD_CHANNEL(ci)           \
  "vmovups " #ci                            \
  "*64(%[u]), %%ymm12\n\t"                  \
  "vmovups " #ci                            \
  "*64+32(%[u]), %%ymm13\n\t"               \
  "vbroadcastss (0*8+" #ci                  \
  ")*4(%[v]), %%ymm14\n\t"                  \
  "vfmadd231ps %%ymm12, %%ymm14, %[a0]\n\t" \
  "vfmadd231ps %%ymm13, %%ymm14, %[b0]\n\t" \
  "vbroadcastss (1*8+" #ci                  \
  ")*4(%[v]), %%ymm15\n\t"                  \
  "vfmadd231ps %%ymm12, %%ymm15, %[a1]\n\t" \
  "vfmadd231ps %%ymm13, %%ymm15, %[b1]\n\t" \
  "vbroadcastss (2*8+" #ci                  \
  ")*4(%[v]), %%ymm14\n\t"                  \
  "vfmadd231ps %%ymm12, %%ymm14, %[a2]\n\t" \
  "vfmadd231ps %%ymm13, %%ymm14, %[b2]\n\t" \
  "vbroadcastss (3*8+" #ci                  \
  ")*4(%[v]), %%ymm15\n\t"                  \
  "vfmadd231ps %%ymm12, %%ymm15, %[a3]\n\t" \
  "vfmadd231ps %%ymm13, %%ymm15, %[b3]\n\t" \
  "vbroadcastss (4*8+" #ci                  \
  ")*4(%[v]), %%ymm14\n\t"                  \
  "vfmadd231ps %%ymm12, %%ymm14, %[a4]\n\t" \
  "vfmadd231ps %%ymm13, %%ymm14, %[b4]\n\t" \
  "vbroadcastss (5*8+" #ci                  \
  ")*4(%[v]), %%ymm15\n\t"                  \
  "vfmadd231ps %%ymm12, %%ymm15, %[a5]\n\t" \
  "vfmadd231ps %%ymm13, %%ymm15, %[b5]\n\t"

KILN_AVX2 void multiply_block(const float* v, const float* u, int64_t channel_blocks, float* m,
                              int64_t ldm) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
  __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;
  for (int64_t c = 0; c < channel_blocks; ++c) {
    asm(KILN_WINOGRAD_CHANNEL(0) KILN_WINOGRAD_CHANNEL(1) KILN_WINOGRAD_CHANNEL(2)
            KILN_WINOGRAD_CHANNEL(3) KILN_WINOGRAD_CHANNEL(4) KILN_WINOGRAD_CHANNEL(5)
                KILN_WINOGRAD_CHANNEL(6) KILN_WINOGRAD_CHANNEL(7)
        : [a0] "+x"(a0), [a1] "+x"(a1), [a2] "+x"(a2), [a3] "+x"(a3), [a4] "+x"(a4), [a5] "+x"(a5),
          [b0] "+x"(b0), [b1] "+x"(b1), [b2] "+x"(b2), [b3] "+x"(b3), [b4] "+x"(b4), [b5] "+x"(b5)
        : [v] "r"(v), [u] "r"(u), "m"(*reinterpret_cast<const float(*)[48]>(v)),
          "m"(*reinterpret_cast<const float(*)[128]>(u))
        : "xmm12", "xmm13", "xmm14", "xmm15");
    v += kTilesPerBlock * kVec;
    u += kVec * kOutPerBlock;
  }
  const __m256 lo[6] = {a0, a1, a2, a3, a4, a5}, hi[6] = {b0, b1, b2, b3, b4, b5};
  for (int j = 0; j < 6; ++j) {
    _mm256_storeu_ps(m + j * ldm, lo[j]);
    _mm256_storeu_ps(m + j * ldm + kVec, hi[j]);
  }
}
#undef KILN_WINOGRAD_CHANNEL

// --- output transform: Y = A^T M A, then the epilogue ----------------------------------------
KILN_AVX2 __m256 activate(__m256 y, const kernels::FusedActivation& a) {
  using Kind = kernels::FusedActivation::Kind;
  // max/min return their second operand when either is NaN: a NaN stays NaN.
  switch (a.kind) {
    case Kind::kNone:
    case Kind::kSilu:  // never: winograd_applies leaves SiLU to oneDNN's direct conv
      return y;
    case Kind::kRelu: return _mm256_max_ps(_mm256_setzero_ps(), y);
    case Kind::kClip:
      return _mm256_min_ps(_mm256_set1_ps(static_cast<float>(a.max)),
                           _mm256_max_ps(_mm256_set1_ps(static_cast<float>(a.min)), y));
    case Kind::kLeakyRelu:  // y < 0 is false for NaN and -0
      return _mm256_blendv_ps(y, _mm256_mul_ps(_mm256_set1_ps(static_cast<float>(a.alpha)), y),
                              _mm256_cmp_ps(y, _mm256_setzero_ps(), _CMP_LT_OQ));
  }
  return y;
}

// One tile (`t` counting over the batch, `slot` from the chunk's first) of one 8-channel output
// block.
KILN_AVX2 void transform_output_tile(const Conv3x3& s, const Geometry& g, const float* m,
                                     const Epilogue& e, float* dst, int64_t ob8, int64_t t,
                                     int64_t slot) {
  const size_t xi_stride = static_cast<size_t>(g.chunk_tiles * s.out_channels);
  const __m256 bias = e.bias ? _mm256_loadu_ps(e.bias + ob8 * kVec) : _mm256_setzero_ps();
  const int64_t image = t / g.image_tiles, tile = t % g.image_tiles;
  float* plane = dst + (image * s.out_channels + ob8 * kVec) * s.out_h * s.out_w;
  const int64_t ty = tile / g.tiles_w, tx = tile % g.tiles_w;
  const float* p = m + slot * s.out_channels + ob8 * kVec;
  __m256 r[2][4];  // A^T M
  for (int k = 0; k < 4; ++k) {
    const __m256 m0 = _mm256_loadu_ps(p + (0 * 4 + k) * xi_stride);
    const __m256 m1 = _mm256_loadu_ps(p + (1 * 4 + k) * xi_stride);
    const __m256 m2 = _mm256_loadu_ps(p + (2 * 4 + k) * xi_stride);
    const __m256 m3 = _mm256_loadu_ps(p + (3 * 4 + k) * xi_stride);
    r[0][k] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
    r[1][k] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
  }
  for (int i = 0; i < 2; ++i) {  // (A^T M) A
    const int64_t y = ty * 2 + i;
    if (y >= s.out_h) break;
    const __m256 out[2] = {_mm256_add_ps(_mm256_add_ps(r[i][0], r[i][1]), r[i][2]),
                           _mm256_sub_ps(_mm256_sub_ps(r[i][1], r[i][2]), r[i][3])};
    for (int k = 0; k < 2; ++k) {
      const int64_t x = tx * 2 + k;
      if (x >= s.out_w) break;
      float* o = plane + (y * s.out_w + x) * kVec;
      __m256 value = _mm256_add_ps(out[k], bias);
      if (e.accumulate) value = _mm256_add_ps(value, _mm256_loadu_ps(o));
      _mm256_storeu_ps(o, activate(value, e.activation));
    }
  }
}

}  // namespace

bool cpu_supported() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

const char* unsupported_reason(const Conv3x3& s) {
  if (s.channels < kVec || s.channels % kVec != 0) return "input channels not a multiple of 8";
  if (s.out_channels < kOutPerBlock || s.out_channels % kOutPerBlock != 0) {
    return "output channels not a multiple of 16";
  }
  if (s.pad_top < 0 || s.pad_top > 2 || s.pad_left < 0 || s.pad_left > 2) return "pads not 0..2";
  if (s.in_h < 1 || s.in_w < 1 || s.out_h < 1 || s.out_w < 1) return "empty image";
  if (s.out_h > s.in_h + s.pad_top + 2 - 2 || s.out_w > s.in_w + s.pad_left + 2 - 2) {
    return "output larger than the padded input allows";
  }
  return nullptr;
}

size_t transformed_weight_count(const Conv3x3& s) {
  return static_cast<size_t>(16 * s.out_channels * s.channels);
}

void transform_weights(const Conv3x3& s, const float* oihw, float* u) {
  static constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  const int64_t c_count = s.channels, m_count = s.out_channels;
  const int64_t blocks = m_count / kOutPerBlock;
#pragma omp parallel for schedule(static)
  for (int64_t m = 0; m < m_count; ++m) {
    for (int64_t c = 0; c < c_count; ++c) {
      const float* g = oihw + (m * c_count + c) * 9;
      double gg[4][3];  // G g
      for (int i = 0; i < 4; ++i) {
        for (int k = 0; k < 3; ++k) {
          gg[i][k] = kG[i][0] * g[0 * 3 + k] + kG[i][1] * g[1 * 3 + k] + kG[i][2] * g[2 * 3 + k];
        }
      }
      for (int i = 0; i < 4; ++i) {
        for (int k = 0; k < 4; ++k) {  // (G g) G^T
          const double value = gg[i][0] * kG[k][0] + gg[i][1] * kG[k][1] + gg[i][2] * kG[k][2];
          const int64_t xi = i * 4 + k;
          u[((xi * blocks + m / kOutPerBlock) * c_count + c) * kOutPerBlock + m % kOutPerBlock] =
              static_cast<float>(value);
        }
      }
    }
  }
}

size_t workspace_bytes(const Conv3x3& s, int64_t batch) {
  const Geometry g(s, batch);
  return round_up_64(g.v_floats * sizeof(float)) + round_up_64(g.m_floats * sizeof(float));
}

void run(const Conv3x3& s, int64_t batch, const float* src, const float* u, const Epilogue& e,
         float* dst, std::byte* workspace) {
  const Geometry g(s, batch);
  float* v = reinterpret_cast<float*>(workspace);
  float* m = reinterpret_cast<float*>(workspace + round_up_64(g.v_floats * sizeof(float)));

#pragma omp parallel
  for (int64_t first = 0; first < g.blocks; first += g.chunk_blocks) {
    const int64_t blocks = std::min(g.chunk_blocks, g.blocks - first);
#pragma omp for collapse(2) schedule(static)
    for (int64_t slot = 0; slot < blocks; ++slot) {
      for (int64_t cb = 0; cb < g.cb; ++cb) {
        transform_input_block(s, g, src, v, first + slot, slot, cb);
      }
    }
    // Each (xi, output block) pair keeps its C x 16 weights in cache over the chunk's blocks.
#pragma omp for collapse(2) schedule(static)
    for (int64_t xi = 0; xi < 16; ++xi) {
      for (int64_t ob = 0; ob < g.ob; ++ob) {
        const float* u_block = u + (xi * g.ob + ob) * s.channels * kOutPerBlock;
        for (int64_t slot = 0; slot < blocks; ++slot) {
          multiply_block(
              v + (xi * g.chunk_blocks + slot) * g.cb * kTilesPerBlock * kVec, u_block, g.cb,
              m + (xi * g.chunk_tiles + slot * kTilesPerBlock) * s.out_channels + ob * kOutPerBlock,
              s.out_channels);
        }
      }
    }
    const int64_t first_tile = first * kTilesPerBlock;
    const int64_t tiles = std::min(blocks * kTilesPerBlock, g.tiles - first_tile);
#pragma omp for collapse(2) schedule(static)
    for (int64_t ob8 = 0; ob8 < g.ob8; ++ob8) {
      for (int64_t slot = 0; slot < tiles; ++slot) {
        transform_output_tile(s, g, m, e, dst, ob8, first_tile + slot, slot);
      }
    }
  }
}

}  // namespace kiln::hal::cpu::winograd
