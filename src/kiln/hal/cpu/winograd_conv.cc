#include "kiln/hal/cpu/winograd_conv.h"

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

size_t transformed_weight_count(const Conv3x3& s) {
  return static_cast<size_t>(16 * s.out_channels * s.channels);
}

void transform_weights(const Conv3x3& s, const float* oihw, float* u) {
  static constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  const int64_t c_count = s.channels, m_count = s.out_channels;
  const int64_t panels = m_count / kPanel;
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
          u[((xi * panels + m / kPanel) * c_count + c) * kPanel + m % kPanel] =
              static_cast<float>(value);
        }
      }
    }
  }
}

size_t workspace_bytes(const Conv3x3& s, int64_t batch, Isa isa) {
  const Geometry g(s, batch, kernels_for(isa).blocking);
  return round_up_64(g.v_floats * sizeof(float)) + round_up_64(g.m_floats * sizeof(float));
}

void run(const Conv3x3& s, int64_t batch, const float* src, const float* u, const Epilogue& e,
         float* dst, std::byte* workspace, Isa isa) {
  const Kernels& k = kernels_for(isa);
  const Geometry g(s, batch, k.blocking);
  const int64_t per_block = k.blocking.tiles_per_block, outs = k.blocking.out_per_block;
  float* v = reinterpret_cast<float*>(workspace);
  float* m = reinterpret_cast<float*>(workspace + round_up_64(g.v_floats * sizeof(float)));
  const int64_t panel_stride = s.channels * kPanel;

#pragma omp parallel
  for (int64_t first = 0; first < g.blocks; first += g.chunk_blocks) {
    const int64_t blocks = std::min(g.chunk_blocks, g.blocks - first);
#pragma omp for collapse(2) schedule(static)
    for (int64_t slot = 0; slot < blocks; ++slot) {
      for (int64_t cb = 0; cb < g.cb; ++cb) k.transform_input(s, g, src, v, first + slot, slot, cb);
    }
    // Each (xi, output block) pair keeps its C x outs weights in cache over the chunk's blocks.
#pragma omp for collapse(2) schedule(static)
    for (int64_t xi = 0; xi < 16; ++xi) {
      for (int64_t ob = 0; ob < g.ob; ++ob) {
        const int64_t out0 = ob * outs;
        const float* u_block = u + (xi * s.out_channels + out0) * s.channels;
        for (int64_t slot = 0; slot < blocks; ++slot) {
          k.multiply(v + (xi * g.chunk_blocks + slot) * g.cb * per_block * k.blocking.vec, u_block,
                     panel_stride, g.cb, std::min(outs, s.out_channels - out0),
                     m + (xi * g.chunk_tiles + slot * per_block) * s.out_channels + out0,
                     s.out_channels);
        }
      }
    }
    const int64_t first_tile = first * per_block;
    const int64_t tiles = std::min(blocks * per_block, g.tiles - first_tile);
#pragma omp for collapse(2) schedule(static)
    for (int64_t ov = 0; ov < g.ov; ++ov) {
      for (int64_t slot = 0; slot < tiles; ++slot) {
        k.transform_output(s, g, m, e, dst, ov, first_tile + slot, slot);
      }
    }
  }
}

}  // namespace kiln::hal::cpu::winograd
