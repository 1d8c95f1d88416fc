#include "kiln/hal/vulkan/op_table.h"

#include <algorithm>
#include <iterator>

#include "kiln/hal/vulkan/kernel_builder.h"

namespace kiln::hal::vulkan {
namespace {

struct Entry {
  std::string_view op_type;
  BuildKernel build;
};

// Sorted by op type.
constexpr Entry kKernels[] = {
    {"Abs", build_unary},
    {"Add", build_binary},
    {"And", build_compare},
    {"AveragePool", build_pool},
    {"BatchNormalization", build_batch_norm},
    {"Cast", build_cast},
    {"Ceil", build_unary},
    {"Clip", build_unary},
    {"Concat", build_concat},
    {"ConstantOfShape", build_constant_of_shape},
    {"Conv", build_conv},
    {"Div", build_binary},
    {"Dropout", build_reshape_copy},
    {"Elu", build_unary},
    {"Equal", build_compare},
    {"Erf", build_unary},
    {"Exp", build_unary},
    {"Expand", build_expand},
    {"Flatten", build_reshape_copy},
    {"Floor", build_unary},
    {"Gather", build_gather},
    {"Gelu", build_unary},
    {"Gemm", build_gemm},
    {"GlobalAveragePool", build_pool},
    {"GlobalMaxPool", build_pool},
    {"Greater", build_compare},
    {"GreaterOrEqual", build_compare},
    {"HardSigmoid", build_unary},
    {"HardSwish", build_unary},
    {"Identity", build_reshape_copy},
    {"LayerNormalization", build_layer_norm},
    {"LeakyRelu", build_unary},
    {"Less", build_compare},
    {"LessOrEqual", build_compare},
    {"Log", build_unary},
    {"LogSoftmax", build_softmax},
    {"MatMul", build_matmul},
    {"Max", build_binary},
    {"MaxPool", build_pool},
    {"Min", build_binary},
    {"Mish", build_unary},
    {"Mul", build_binary},
    {"Neg", build_unary},
    {"Not", build_compare},
    {"Or", build_compare},
    {"Pow", build_binary},
    {"Range", build_range},
    {"Reciprocal", build_unary},
    {"ReduceMax", build_reduce},
    {"ReduceMean", build_reduce},
    {"ReduceMin", build_reduce},
    {"ReduceSum", build_reduce},
    {"Relu", build_unary},
    {"Reshape", build_reshape_copy},
    {"Resize", build_resize},
    {"Round", build_unary},
    {"Shape", build_known_values},
    {"Sigmoid", build_unary},
    {"Size", build_known_values},
    {"Slice", build_slice},
    {"Softmax", build_softmax},
    {"Softplus", build_unary},
    {"Softsign", build_unary},
    {"Split", build_split},
    {"Sqrt", build_unary},
    {"Squeeze", build_reshape_copy},
    {"Sub", build_binary},
    {"Tanh", build_unary},
    {"Transpose", build_transpose},
    {"Trilu", build_trilu},
    {"Unsqueeze", build_reshape_copy},
    {"Where", build_where},
    {"Xor", build_compare},
};

}  // namespace

BuildKernel find_vulkan_kernel(std::string_view op_type) {
  auto it = std::lower_bound(std::begin(kKernels), std::end(kKernels), op_type,
                             [](const Entry& e, std::string_view t) { return e.op_type < t; });
  return it != std::end(kKernels) && it->op_type == op_type ? it->build : nullptr;
}

std::vector<std::string> vulkan_op_types() {
  std::vector<std::string> names;
  for (const Entry& e : kKernels) names.emplace_back(e.op_type);
  return names;
}

}  // namespace kiln::hal::vulkan
