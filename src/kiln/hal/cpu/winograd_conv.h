// 3x3 convolution with stride 1 by Winograd's minimal filtering F(2x2, 3x3), for f32 activations
// in a blocked layout (nChw8c on AVX2, nChw16c on AVX-512: [C/V][H][W][V] per sample, V the
// ISA's vector width) or channels last (NHWC: [H][W][C] per sample), on AVX2 + FMA or AVX-512.
//
// Each 2x2 output tile comes from a 4x4 input patch d as Y = A^T [U . V] A, with the weights
// transformed once (U = G g G^T, in double, then rounded) and the patch V = B^T d B on the fly:
// 16 multiplies per tile and channel pair instead of 36. The 16 products U . V, summed over the
// input channels, are 16 matrix products [tiles x C] x [C x M] run by one register-blocked kernel
// per ISA (AVX2: 6 tiles x 16 output channels; AVX-512: 8 tiles x 32 output channels, and only
// the tiles that exist in a batch's last block: 49 tiles of a 14x14 image leave 1 of 8 there).
//
// Numerics: not the direct convolution's sums. The transforms' coefficients are 0, +-1 and 1/2,
// so the error stays of the order of a direct f32 sum's (tested against a float64 reference).
// Every output element is computed by the same sequence of operations whatever the sample's
// position in a batch, the batch size, the thread count, the split of work over threads or the
// ISA: each tile's patch is transformed by the same additions, its products are summed over the
// channels in order by one fused multiply-add each, in a register lane of their own, and its
// outputs are transformed by the same additions (docs/architecture.md invariant 4). Both ISAs
// and both layouts therefore give the same bits. A batch's tiles are processed together, image
// after image, so big weights are read once per chunk of tiles rather than once per image.
//
// NaN: the fused relu/clip keep a NaN, like every activation of kiln (kernels/activation.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/hal/cpu/cpu_isa.h"
#include "kiln/kernels/activation.h"

namespace kiln::hal::cpu::winograd {

// The convolution of one sample. Input H x W with `pad_top`/`pad_left` zeros before it; the output
// is out_h x out_w (the caller derives it with the bottom/right pads: out = in + pads - 2).
struct Conv3x3 {
  int64_t channels = 0;      // C, a multiple of the ISA's vector width (8 or 16)
  int64_t out_channels = 0;  // M, a multiple of 16
  int64_t in_h = 0, in_w = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t pad_top = 0, pad_left = 0;  // 0..2
  bool channels_last = false;         // NHWC source and destination, else the blocked layout
};

// What is done to each output after the sum: + bias[m] (when not null), + the value already in
// the destination (when `accumulate`: kiln's residual), then the activation.
struct Epilogue {
  const float* bias = nullptr;
  bool accumulate = false;
  kernels::FusedActivation activation;
};

// Floats per vector of `isa`: the channel block of its blocked layout (8 or 16).
int64_t vector_width(Isa isa);

// Whether `shape` is one `isa`'s kernel takes: channel counts as above, pads 0..2, and output
// sizes consistent with them. Says why not when not.
const char* unsupported_reason(const Conv3x3& shape, Isa isa);

// Floats of the transformed weights: 16 * M * C (the same for both ISAs).
size_t transformed_weight_count(const Conv3x3& shape);
// U from OIHW weights [M][C][3][3]; `u` holds transformed_weight_count floats.
void transform_weights(const Conv3x3& shape, const float* oihw, float* u);

// Bytes of scratch `batch` samples need on `isa` with up to `threads` threads (a chunk's
// transformed input and 16 products, at most about max(512 KiB, a quarter of the transformed
// weights), per thread where each thread runs chunks of its own), 64-aligned.
size_t workspace_bytes(const Conv3x3& shape, int64_t batch, Isa isa, int threads);

// `batch` samples: `src` [N][C/V][in_h][in_w][V] or [N][in_h][in_w][C], `dst` likewise with M and
// out_h x out_w; `workspace` 64-byte aligned, of workspace_bytes(shape, batch, isa, threads). The
// CPU must have `isa` (cpu_has) and the shape must be one it takes. Runs on up to `threads`
// OpenMP threads (fewer where the calling thread's team is smaller); the bits do not depend on
// how many.
void run(const Conv3x3& shape, int64_t batch, const float* src, const float* u,
         const Epilogue& epilogue, float* dst, std::byte* workspace, Isa isa, int threads);

}  // namespace kiln::hal::cpu::winograd
