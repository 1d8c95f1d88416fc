#include "kiln/hal/cpu/winograd_conv.h"

#include <omp.h>

#include <algorithm>

#include "kiln/hal/cpu/winograd_conv_kernels.h"

namespace kiln::hal::cpu::winograd {
namespace {

using detail::Geometry;
using detail::Kernels;

constexpr int64_t kPanel = 16;  // output channels per panel of U

const Kernels& kernels_for(Isa isa) {
  return isa == Isa::kAvx512 ? detail::avx512_kernels() : detail::avx2_kernels();
}

size_t round_up_64(size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace

int64_t vector_width(Isa isa) { return kernels_for(isa).blocking.vec; }

const char* unsupported_reason(const Conv3x3& s, Isa isa) {
  if (s.tile != 2 && s.tile != 4) return "tile edge not 2 or 4";
  if (s.channels < vector_width(isa) || s.channels % vector_width(isa) != 0) {
    return isa == Isa::kAvx512 ? "input channels not a multiple of 16"
                               : "input channels not a multiple of 8";
  }
  if (s.out_channels < kPanel || s.out_channels % kPanel != 0) {
    return "output channels not a multiple of 16";
  }
  if (s.pad_top < 0 || s.pad_top > 2 || s.pad_left < 0 || s.pad_left > 2) return "pads not 0..2";
  if (s.in_h < 1 || s.in_w < 1 || s.out_h < 1 || s.out_w < 1) return "empty image";
  if (s.out_h > s.in_h + s.pad_top + 2 - 2 || s.out_w > s.in_w + s.pad_left + 2 - 2) {
    return "output larger than the padded input allows";
  }
  return nullptr;
}

int64_t preferred_tile(const Conv3x3& s) {
  constexpr int64_t kMaxF4x4WeightBytes = int64_t{10} << 20;
  const int64_t f4x4_weight_bytes =
      plane_count(4) * s.out_channels * s.channels * int64_t{sizeof(float)};
  if (f4x4_weight_bytes > kMaxF4x4WeightBytes) return 2;
  auto products = [&s](int64_t tile) {  // per image and channel pair
    return ((s.out_h + tile - 1) / tile) * ((s.out_w + tile - 1) / tile) * plane_count(tile);
  };
  return products(4) < products(2) ? 4 : 2;
}

size_t transformed_weight_count(const Conv3x3& s) {
  return static_cast<size_t>(plane_count(s.tile) * s.out_channels * s.channels);
}

namespace {

// G of each tile edge (winograd_transforms.h has B^T and A^T), rows of 3.
constexpr double kG2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
constexpr double kG4[6][3] = {{1.0 / 4, 0, 0},
                              {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                              {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                              {1.0 / 24, 1.0 / 12, 1.0 / 6},
                              {1.0 / 24, -1.0 / 12, 1.0 / 6},
                              {0, 0, 1}};

template <int kAlpha>
void transform_weights_with(const Conv3x3& s, const double (&kG)[kAlpha][3], const float* oihw,
                            float* u) {
  const int64_t c_count = s.channels, m_count = s.out_channels;
  const int64_t panels = m_count / kPanel;
#pragma omp parallel for schedule(static)
  for (int64_t m = 0; m < m_count; ++m) {
    for (int64_t c = 0; c < c_count; ++c) {
      const float* g = oihw + (m * c_count + c) * 9;
      double gg[kAlpha][3];  // G g
      for (int i = 0; i < kAlpha; ++i) {
        for (int k = 0; k < 3; ++k) {
          gg[i][k] = kG[i][0] * g[0 * 3 + k] + kG[i][1] * g[1 * 3 + k] + kG[i][2] * g[2 * 3 + k];
        }
      }
      for (int i = 0; i < kAlpha; ++i) {
        for (int k = 0; k < kAlpha; ++k) {  // (G g) G^T
          const double value = gg[i][0] * kG[k][0] + gg[i][1] * kG[k][1] + gg[i][2] * kG[k][2];
          const int64_t xi = i * kAlpha + k;
          u[((xi * panels + m / kPanel) * c_count + c) * kPanel + m % kPanel] =
              static_cast<float>(value);
        }
      }
    }
  }
}

}  // namespace

void transform_weights(const Conv3x3& s, const float* oihw, float* u) {
  if (s.tile == 4) {
    transform_weights_with<6>(s, kG4, oihw, u);
  } else {
    transform_weights_with<4>(s, kG2, oihw, u);
  }
}

namespace {

// One run's fixed parts.
struct Work {
  const Conv3x3& s;
  const Kernels& k;
  const detail::Transforms& transforms;
  const Geometry& g;
  const float* src;
  const float* u;
  const Epilogue& e;
  float* dst;

  // Chunk [first, first + blocks) of register blocks, into one chunk's workspace v, m.
  void input(float* v, int64_t first, int64_t slot, int64_t cb) const {
    transforms.input(s, g, src, v, first + slot, slot, cb);
  }
  // The products of plane xi, output block ob, for the chunk's blocks (from block `first`). The
  // first block's call prefetches the weights that follow: the next output block's, or the next
  // plane's first, which a thread's next (xi, ob) pair reads (both loops below hand each thread
  // consecutive pairs). (Measured on Zen 5, ResNet-50 v1 at batch 1, caches flushed: the 28x28
  // and 14x14 convs 3-10% faster than with the in-kernel prefetch alone.)
  void products(const float* v, float* m, int64_t first, int64_t blocks, int64_t xi,
                int64_t ob) const {
    const int64_t per_block = k.blocking.tiles_per_block, outs = k.blocking.out_per_block;
    const int64_t out0 = ob * outs;
    const float* u_block = u + (xi * s.out_channels + out0) * s.channels;
    const int64_t width = std::min(outs, s.out_channels - out0);
    for (int64_t slot = 0; slot < blocks; ++slot) {
      const int64_t live = std::min(per_block, g.tiles - (first + slot) * per_block);
      k.multiply(v + xi * g.v_plane + slot * g.cb * per_block * k.blocking.vec, u_block,
                 s.channels * kPanel, g.cb, width, live,
                 m + xi * g.m_plane + slot * per_block * s.out_channels + out0, s.out_channels,
                 slot == 0 ? u_block + width * s.channels : nullptr);
    }
  }
  void output(const float* m, int64_t first, int64_t ov, int64_t slot) const {
    transforms.output(s, g, m, e, dst, ov, first * k.blocking.tiles_per_block + slot, slot);
  }
  // Tiles of the chunk from block `first` with `blocks` blocks.
  int64_t chunk_tiles(int64_t first, int64_t blocks) const {
    const int64_t per_block = k.blocking.tiles_per_block;
    return std::min(blocks * per_block, g.tiles - first * per_block);
  }
};

size_t chunk_workspace_bytes(const Geometry& g) {
  return round_up_64(g.v_floats * sizeof(float)) + round_up_64(g.m_floats * sizeof(float));
}

int64_t chunk_count(const Geometry& g) { return (g.blocks + g.chunk_blocks - 1) / g.chunk_blocks; }

// Whether each thread runs whole chunks of its own (no barrier between the transforms and the
// products, every chunk's data in its own core's cache), rather than the team sharing each chunk
// (three barriers per chunk, its transformed input and products passed between cores): where
// there are at least two chunks per thread. (Measured on Zen 5 at 2 threads, ResNet-50's 3x3
// shapes: 25-40% faster than sharing, big weights included, which each thread then reads whole.
// With a block a thread also in its 14x14 and 7x7 stages, 2 blocks of tiles each at batch 1,
// ResNet-50 v1 took 1.08 times as long: each thread then streamed all their weights from memory.)
bool private_chunks(const Geometry& g, int threads) {
  return threads > 1 && chunk_count(g) >= 2 * threads;
}

// Register blocks [begin, end).
struct BlockRange {
  int64_t begin = 0, end = 0;
};

// Thread t's register blocks in a team of `team` running private chunks: a contiguous range, the
// ranges' counts of tiles as nearly equal as whole blocks allow. Chunks handed out one at a time
// left one core the last, short chunk while the other ran a full one: ResNet-50's 28x28 stage at
// batch 1 (49 tiles, chunks of 16, 16, 16 and 1) went 32 tiles to one core and 17 to the other.
// (Zen 5, 2 threads, interleaved servers: ResNet-50 v1 0.973 of the time at batch 1 and 0.977 at
// batch 8, v2 0.987 at batch 1; on the AVX2 kernels, whose blocks of 6 tiles already split that
// stage 25 to 24, v1 1.006 at batch 1 and 1.000 at batch 8.)
BlockRange thread_blocks(const Geometry& g, int t, int team) {
  auto boundary = [&](int64_t i) {
    if (i >= team) return g.blocks;
    const int64_t tiles = g.tiles * i / team;  // the ideal boundary, rounded to the nearest block
    return std::min(g.blocks, (tiles + g.k.tiles_per_block / 2) / g.k.tiles_per_block);
  };
  return {boundary(t), boundary(t + 1)};
}

}  // namespace

size_t workspace_bytes(const Conv3x3& s, int64_t batch, Isa isa, int threads) {
  const Geometry g(s, batch, kernels_for(isa).blocking);
  return chunk_workspace_bytes(g) * (private_chunks(g, threads) ? threads : 1);
}

void run(const Conv3x3& s, int64_t batch, const float* src, const float* u, const Epilogue& e,
         float* dst, std::byte* workspace, Isa isa, int threads) {
  const Kernels& k = kernels_for(isa);
  const Geometry g(s, batch, k.blocking);
  const Work w{s, k, k.transforms(s.tile), g, src, u, e, dst};
  const size_t chunk_bytes = chunk_workspace_bytes(g);
  // The way of splitting follows `threads`, as the workspace's size did; the team may be smaller.
  const int team = std::max(1, std::min(threads, omp_get_max_threads()));

  if (private_chunks(g, threads)) {
#pragma omp parallel num_threads(team)
    {
      const int t = omp_get_thread_num();
      std::byte* mine = workspace + chunk_bytes * static_cast<size_t>(t);
      float* v = reinterpret_cast<float*>(mine);
      float* m = reinterpret_cast<float*>(mine + round_up_64(g.v_floats * sizeof(float)));
      // The thread's range in chunks of nearly equal sizes, each at most g.chunk_blocks.
      const BlockRange range = thread_blocks(g, t, omp_get_num_threads());
      const int64_t count = range.end - range.begin;
      const int64_t pieces = (count + g.chunk_blocks - 1) / g.chunk_blocks;
      for (int64_t piece = 0; piece < pieces; ++piece) {
        const int64_t first = range.begin + count * piece / pieces;
        const int64_t blocks = range.begin + count * (piece + 1) / pieces - first;
        for (int64_t slot = 0; slot < blocks; ++slot) {
          for (int64_t cb = 0; cb < g.cb; ++cb) w.input(v, first, slot, cb);
        }
        for (int64_t xi = 0; xi < g.planes; ++xi) {
          for (int64_t ob = 0; ob < g.ob; ++ob) w.products(v, m, first, blocks, xi, ob);
        }
        const int64_t tiles = w.chunk_tiles(first, blocks);
        for (int64_t slot = 0; slot < tiles; ++slot) {
          for (int64_t ov = 0; ov < g.ov; ++ov) w.output(m, first, ov, slot);
        }
      }
    }
    return;
  }

  float* v = reinterpret_cast<float*>(workspace);
  float* m = reinterpret_cast<float*>(workspace + round_up_64(g.v_floats * sizeof(float)));
#pragma omp parallel num_threads(team)
  for (int64_t first = 0; first < g.blocks; first += g.chunk_blocks) {
    const int64_t blocks = std::min(g.chunk_blocks, g.blocks - first);
#pragma omp for collapse(2) schedule(static)
    for (int64_t slot = 0; slot < blocks; ++slot) {
      for (int64_t cb = 0; cb < g.cb; ++cb) w.input(v, first, slot, cb);
    }
    // Each (xi, output block) pair keeps its C x outs weights in cache over the chunk's blocks.
#pragma omp for collapse(2) schedule(static)
    for (int64_t xi = 0; xi < g.planes; ++xi) {
      for (int64_t ob = 0; ob < g.ob; ++ob) w.products(v, m, first, blocks, xi, ob);
    }
    const int64_t tiles = w.chunk_tiles(first, blocks);
#pragma omp for collapse(2) schedule(static)
    for (int64_t slot = 0; slot < tiles; ++slot) {
      for (int64_t ov = 0; ov < g.ov; ++ov) w.output(m, first, ov, slot);
    }
  }
}

}  // namespace kiln::hal::cpu::winograd
