// The ops the Vulkan backend runs on the GPU, one build function per op type (a kernel family's
// file each). A build function reads the dispatch through its KernelBuilder and either adds the
// commands that run it or returns Unimplemented naming what it cannot run (a dtype, a rank, an
// attribute value): the dispatch then runs on the CPU fallback. Any other error is a real one.
// The dispatch has passed its op definition's checks (kernels::check_concrete) before a build
// function sees it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"

namespace kiln::hal::vulkan {

class KernelBuilder;

using BuildKernel = Status (*)(KernelBuilder& builder);

// The build function of `op_type`, or null when the Vulkan backend never runs it.
BuildKernel find_vulkan_kernel(std::string_view op_type);
// Every op type with a Vulkan kernel, sorted.
std::vector<std::string> vulkan_op_types();

// Per family.
Status build_unary(KernelBuilder& b);         // elementwise_ops.cc
Status build_binary(KernelBuilder& b);        // elementwise_ops.cc
Status build_reshape_copy(KernelBuilder& b);  // copy_ops.cc
Status build_conv(KernelBuilder& b);          // conv_ops.cc
Status build_pool(KernelBuilder& b);          // pool_ops.cc
Status build_batch_norm(KernelBuilder& b);    // batch_norm_ops.cc
Status build_matmul(KernelBuilder& b);        // matmul_ops.cc
Status build_gemm(KernelBuilder& b);          // matmul_ops.cc
Status build_softmax(KernelBuilder& b);       // normalize_ops.cc (Softmax, LogSoftmax)
Status build_layer_norm(KernelBuilder& b);    // normalize_ops.cc
Status build_reduce(KernelBuilder& b);        // normalize_ops.cc (ReduceSum/Mean/Max/Min)
Status build_transpose(KernelBuilder& b);     // movement_ops.cc
Status build_concat(KernelBuilder& b);        // movement_ops.cc
Status build_slice(KernelBuilder& b);         // movement_ops.cc
Status build_split(KernelBuilder& b);         // movement_ops.cc
Status build_expand(KernelBuilder& b);        // movement_ops.cc
Status build_gather(KernelBuilder& b);        // movement_ops.cc
Status build_compare(KernelBuilder& b);       // logic_ops.cc (Equal, Less, ..., Not, And, Or, Xor)
Status build_where(KernelBuilder& b);         // logic_ops.cc
Status build_cast(KernelBuilder& b);          // logic_ops.cc
Status build_range(KernelBuilder& b);         // fill_ops.cc
Status build_constant_of_shape(KernelBuilder& b);  // fill_ops.cc
Status build_resize(KernelBuilder& b);             // resize_ops.cc
Status build_trilu(KernelBuilder& b);              // trilu_ops.cc
// Outputs known when prepared (Shape, Size; any op whose outputs the shape program knows).
Status build_known_values(KernelBuilder& b);  // known_value_ops.cc

// The i32 or i64 elements of the dispatch's input `i` when prepare knows them (a constant, or a
// value the shape program knows: ValueSpec::known_value); nullopt otherwise.
std::optional<std::vector<int64_t>> known_input_ints(const KernelBuilder& b, size_t i);

// Which shader MatMul and Gemm use: the tiled one (the default) or the naive one, for the
// benchmark (bench/vulkan_matmul.cc) and tests comparing the two. Read when a dispatch is
// prepared; process-wide.
enum class MatmulShader { kTiled, kNaive };
void set_matmul_shader_for_testing(MatmulShader shader);

}  // namespace kiln::hal::vulkan
