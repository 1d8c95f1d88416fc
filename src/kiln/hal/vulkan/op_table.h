// The ops the Vulkan backend runs on the GPU, one build function per op type (a kernel family's
// file each). A build function reads the dispatch through its KernelBuilder and either adds the
// commands that run it or returns Unimplemented naming what it cannot run (a dtype, a rank, an
// attribute value): the dispatch then runs on the CPU fallback. Any other error is a real one.
// The dispatch has passed its op definition's checks (kernels::check_concrete) before a build
// function sees it.
#pragma once

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

}  // namespace kiln::hal::vulkan
