// Conv on the Vulkan backend (conv_ops.cc): 1-D and 2-D NCHW f32 convs with kiln's fused bias,
// residual and activation, on one of two shaders chosen from the per-sample dims and the device's
// limits (never from the batch size N):
//   tiled   shaders/conv_gemm.comp, an implicit GEMM in 64x64 tiles, for convs with at least
//           kTiledMinChannels output channels per group and a reduction (Cin/group * KH * KW) of
//           at least kTiledMinReduction (a pipeline of its own for 1x1 stride-1 unpadded convs,
//           which read X without taps);
//   direct  shaders/conv_direct.comp, one invocation per output element: depthwise and
//           few-channels-per-group convs, and whatever the tiled one cannot launch.
// Both sum an output element's products in a fixed order, so sample i of a batch equals sample i
// run alone bit for bit. 3-D convs are Unimplemented (CPU fallback).
//
// For tests and the benchmark (bench/vulkan_conv_bench.cc) only, process-wide: force a variant,
// and lower the number of column tiles one tiled launch may have (the device's
// maxComputeWorkGroupCount[0] otherwise), to exercise the split into several launches.
#pragma once

#include <cstdint>

namespace kiln::hal::vulkan {

inline constexpr int64_t kTiledMinChannels = 16;
inline constexpr int64_t kTiledMinReduction = 16;

enum class ConvVariant { kAuto, kTiled, kDirect };
void set_conv_variant_for_testing(ConvVariant variant);
// 0: the device's limit.
void set_conv_column_tiles_per_launch_for_testing(uint32_t tiles);

}  // namespace kiln::hal::vulkan
