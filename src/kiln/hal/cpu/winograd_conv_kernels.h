// Internals of the Winograd convolution (winograd_conv.h) shared by its driver (winograd_conv.cc)
// and its per-ISA kernels (winograd_conv_avx2.cc, winograd_conv_avx512.cc): the geometry of the
// work and the three kernels each ISA provides. Not for other callers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kiln/hal/cpu/winograd_conv.h"

namespace kiln::hal::cpu::winograd::detail {

// One ISA's blocking.
struct Blocking {
  int64_t vec;              // floats per vector = channels per block of the blocked layout
  int64_t tiles_per_block;  // tiles per register block of the product kernel
  int64_t out_per_block;    // output channels per register block (a multiple of 16)
};

// Where the vector of channel block `cb` of pixel (y, x) of image n lies in an activation:
// n * image + (y * w + x) * pixel + cb * block floats from its start.
struct Strides {
  int64_t image, pixel, block;
};

// Tiles are processed in chunks of whole register blocks whose transformed input and products
// together take at most max(kChunkBytes, a quarter of the transformed weights), so they are still
// in cache when read back; each chunk reads all the weights once, hence bigger chunks for big
// weights.
inline constexpr int64_t kChunkBytes = int64_t{1} << 19;

struct Geometry {
  static constexpr int64_t kFloat = sizeof(float);
  Blocking k;
  int64_t tile;               // output tile edge (2 or 4)
  int64_t planes;             // plane_count(tile): of the transformed input and of the products
  int64_t cb, ob, ov;         // C/vec, ceil(M / out_per_block), M/vec
  int64_t tiles_h, tiles_w;   // output tiles per column and row of one image
  int64_t image_tiles;        // tiles of one image
  int64_t tiles, blocks;      // all images' tiles, image after image; register blocks of them
  int64_t chunk_blocks;       // blocks per chunk
  int64_t chunk_tiles;        // tiles per chunk (a multiple of tiles_per_block)
  int64_t v_plane, m_plane;   // floats from one plane of V (and of M) to the next
  size_t v_floats, m_floats;  // one chunk's transformed input and products
  Strides in, out;

  Geometry(const Conv3x3& s, int64_t batch, const Blocking& blocking)
      : k(blocking),
        tile(s.tile),
        planes(plane_count(s.tile)),
        cb(s.channels / k.vec),
        ob((s.out_channels + k.out_per_block - 1) / k.out_per_block),
        ov(s.out_channels / k.vec),
        tiles_h((s.out_h + tile - 1) / tile),
        tiles_w((s.out_w + tile - 1) / tile),
        image_tiles(tiles_h * tiles_w),
        tiles(batch * image_tiles),
        blocks((tiles + k.tiles_per_block - 1) / k.tiles_per_block),
        chunk_blocks(std::clamp<int64_t>(
            std::max(kChunkBytes, planes * s.channels * s.out_channels * kFloat / 4) /
                (planes * k.tiles_per_block * (s.channels + s.out_channels) * kFloat),
            1, blocks)),
        chunk_tiles(chunk_blocks * k.tiles_per_block),
        v_plane(plane_stride(chunk_tiles * s.channels)),
        m_plane(plane_stride(chunk_tiles * s.out_channels)),
        v_floats(static_cast<size_t>(planes * v_plane)),
        m_floats(static_cast<size_t>(planes * m_plane)),
        in(strides(s.channels, s.in_h * s.in_w, s.channels_last, k.vec)),
        out(strides(s.out_channels, s.out_h * s.out_w, s.channels_last, k.vec)) {}

  // The transforms read or write one vector in each plane in turn: planes an odd number of cache
  // lines apart put those vectors in different cache sets (a stride of a multiple of 4 KiB would
  // put them all in one set, more than its ways).
  static int64_t plane_stride(int64_t floats) {
    const int64_t lines = (floats + 15) / 16;
    return (lines | 1) * 16;
  }

  static Strides strides(int64_t channels, int64_t pixels, bool channels_last, int64_t vec) {
    return channels_last ? Strides{channels * pixels, channels, vec}
                         : Strides{channels * pixels, vec, pixels * vec};
  }
};

// The kernels of one ISA. In the chunk whose first register block is `first`, `slot` counts the
// blocks (or tiles) from the chunk's first; `block` and `t` count over the whole batch.
//
// V, per chunk: `planes` planes v_plane floats apart, each
// [chunk blocks][C/vec][tiles_per_block][vec], so the product kernel broadcasts a block's tiles'
// values of one channel from consecutive floats. The products M, per chunk: `planes` planes
// m_plane floats apart, each [chunk tiles][M]. U: [planes][M/16][C][16] (transform_weights).
//
// The transforms of one tile edge.
struct Transforms {
  // V of channel block `cb` of register block `block` (zeros for tiles past the batch's last).
  void (*input)(const Conv3x3& s, const Geometry& g, const float* src, float* v, int64_t block,
                int64_t slot, int64_t cb);
  // Y = A^T M A of one tile for output channel block `ov` (of vec channels), then the epilogue.
  void (*output)(const Conv3x3& s, const Geometry& g, const float* m, const Epilogue& e, float* dst,
                 int64_t ov, int64_t t, int64_t slot);
};

struct Kernels {
  Blocking blocking;
  Transforms f2x2, f4x4;  // F(2x2, 3x3) and F(4x4, 3x3)
  // The products of one register block: m[t * ldm + j] = sum over c of v[c][t] * u[c][j] for the
  // block's first `tiles` tiles t (1 to tiles_per_block: fewer in the batch's last block, whose
  // other tiles are padding; a kernel may compute those too) and its `outs` output channels j (a
  // multiple of 16, at most out_per_block); v at the block's [C/vec][tiles_per_block][vec], u at
  // the first 16-column panel [C][16], the next panels `panel_stride` floats apart. `next`, if not
  // null, is the u of the call after this one (laid out as u), which a kernel may prefetch; it
  // never reads it.
  void (*multiply)(const float* v, const float* u, int64_t panel_stride, int64_t channel_blocks,
                   int64_t outs, int64_t tiles, float* m, int64_t ldm, const float* next);

  const Transforms& transforms(int64_t tile) const { return tile == 4 ? f4x4 : f2x2; }
};

const Kernels& avx2_kernels();
const Kernels& avx512_kernels();

}  // namespace kiln::hal::cpu::winograd::detail
