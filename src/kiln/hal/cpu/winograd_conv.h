// 3x3 convolution with stride 1 by Winograd's minimal filtering F(2x2, 3x3) or F(4x4, 3x3), for
// f32 activations in a blocked layout (nChw8c on AVX2, nChw16c on AVX-512: [C/V][H][W][V] per
// sample, V the ISA's vector width) or channels last (NHWC: [H][W][C] per sample), on AVX2 + FMA
// or AVX-512.
//
// Each t x t output tile (t = 2 or 4, `Conv3x3::tile`) comes from an a x a input patch d (a =
// t + 2) as Y = A^T [U . V] A, with the weights transformed once (U = G g G^T, in double, then
// rounded) and the patch V = B^T d B on the fly: a^2 multiplies per tile and channel pair instead
// of 9 t^2 (F(2x2): 16 instead of 36; F(4x4): 36 instead of 144). The a^2 products U . V, summed
// over the input channels, are a^2 matrix products [tiles x C] x [C x M] run by one
// register-blocked kernel per ISA (AVX2: 6 tiles x 16 output channels; AVX-512: 8 tiles x 32
// output channels, and only the tiles that exist in a batch's last block: 49 tiles of a 14x14
// image leave 1 of 8 there).
//
// Numerics: not the direct convolution's sums. F(2x2)'s transforms have coefficients 0, +-1 and
// 1/2, so its error stays of the order of a direct f32 sum's. F(4x4)'s (Lavin and Gray's, points
// 0, +-1, +-2) reach 5 and 8 in B and A and 1/24 in G: up to about 3 times a direct sum's error
// relative to sum |x w| (kiln's tests bound it at 4e-6 of that against a float64 reference,
// winograd_conv_test.cc). And it mixes the whole 6x6 patch into each of the tile's 16 outputs, so
// one large input value leaves rounding errors in proportion to it in the tile's outputs whose
// window does not hold it (F(2x2)'s additions keep each value within the outputs that read it);
// winograd_conv_op.cc runs a sample with a value not finite or beyond an overflow bound by F(2x2).
// Every output element is computed by the same sequence of operations whatever the sample's
// position in a batch, the batch size, the thread count, the split of work over threads or the
// ISA: each tile's patch is transformed by the same operations, its products are summed over the
// channels in order by one fused multiply-add each, in a register lane of their own, and its
// outputs are transformed by the same operations (docs/architecture.md invariant 4). Both ISAs
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
  int64_t tile = 2;                   // output tile edge: 2 for F(2x2, 3x3), 4 for F(4x4, 3x3)
};

// The tile edge kiln runs a convolution of `shape` (its tile ignored) with: the one with fewer
// products per image (ceil(out_h / t) ceil(out_w / t) (t + 2)^2: 4 from 3 x 3 outputs on, except
// 5 x 5 and 6 x 6, a tie), but 2 where F(4x4)'s transformed weights (36 M C floats) exceed 10 MiB.
// In a model each convolution's weights come from memory, and F(4x4) reads 2.25 times F(2x2)'s
// bytes. Measured on Zen 5 (AVX-512, 2 threads), each model against itself with a 4 MiB limit,
// alternating in one process (`kiln bench --against`, paired medians): ResNet-50 v1's 256-channel
// 14x14 stage (9 MiB) by F(4x4) made the whole model 0.7-1.2% faster at batch 1 and 0.8% at batch
// 8, v2 0.3-0.7% and 0.7-1.8%, the YOLO-style detector of bench/ 1.4-2.5% at batch 1; on the
// AVX2 kernels (DNNL_MAX_CPU_ISA=AVX2, same machine, under load) ResNet-50 v1 1-5% at batch 1. The
// 512-channel 7x7 stage (36 MiB) ran 1.3-1.4 times slower by F(4x4) even with hot caches; the
// 64- and 128-channel stages (0.6 and 2.4 MiB) run 25-30% faster by it. Depends on the sample's
// shape only, never on the batch, so an image gets the same bits at every batch size.
int64_t preferred_tile(const Conv3x3& shape);

// What is done to each output after the sum: + bias[m] (when not null), + the value already in
// the destination (when `accumulate`: kiln's residual), then the activation; with
// `accumulate_after_activation`, the destination's value is added after the activation instead.
struct Epilogue {
  const float* bias = nullptr;
  bool accumulate = false;
  kernels::FusedActivation activation;
  bool accumulate_after_activation = false;
};

// Planes of a tile edge's transformed weights, input and products: (tile + 2)^2, 16 or 36.
constexpr int64_t plane_count(int64_t tile) { return (tile + 2) * (tile + 2); }

// Floats per vector of `isa`: the channel block of its blocked layout (8 or 16).
int64_t vector_width(Isa isa);

// Whether `shape` is one `isa`'s kernel takes: a tile of 2 or 4, channel counts as above, pads
// 0..2, and output sizes consistent with them. Says why not when not.
const char* unsupported_reason(const Conv3x3& shape, Isa isa);

// Floats of the transformed weights: (tile + 2)^2 * M * C (the same for both ISAs).
size_t transformed_weight_count(const Conv3x3& shape);
// U from OIHW weights [M][C][3][3]; `u` holds transformed_weight_count floats.
void transform_weights(const Conv3x3& shape, const float* oihw, float* u);

// Bytes of scratch `batch` samples need on `isa` with up to `threads` threads (a chunk's
// transformed input and (tile + 2)^2 products, at most about max(512 KiB, a quarter of the
// transformed weights), per thread where each thread runs chunks of its own), 64-aligned.
size_t workspace_bytes(const Conv3x3& shape, int64_t batch, Isa isa, int threads);

// `batch` samples: `src` [N][C/V][in_h][in_w][V] or [N][in_h][in_w][C], `dst` likewise with M and
// out_h x out_w; `workspace` 64-byte aligned, of workspace_bytes(shape, batch, isa, threads). The
// CPU must have `isa` (cpu_has) and the shape must be one it takes. Runs on up to `threads`
// OpenMP threads (fewer where the calling thread's team is smaller); the bits do not depend on
// how many.
void run(const Conv3x3& shape, int64_t batch, const float* src, const float* u,
         const Epilogue& epilogue, float* dst, std::byte* workspace, Isa isa, int threads);

}  // namespace kiln::hal::cpu::winograd
