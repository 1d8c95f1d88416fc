#include "kiln/hal/cpu/op_table.h"

#include <array>

#include "kiln/kernels/kernel.h"

namespace kiln::hal::cpu {
namespace {

constexpr std::array kFastPaths = {
    OpPath{"Add", check_binary, build_binary, SampleInputs::every()},
    OpPath{"AveragePool", check_pool, build_pool, SampleInputs::at_slots(1)},
    OpPath{"BatchNormalization", check_batch_norm, build_batch_norm, SampleInputs::at_slots(1)},
    OpPath{"Concat", check_concat, build_concat},
    OpPath{"Conv", check_conv, build_conv, SampleInputs::at_slots(0b1001)},
    OpPath{"DequantizeLinear", check_dequantize_linear, build_dequantize_linear},
    OpPath{"Div", check_binary, build_binary, SampleInputs::every()},
    OpPath{"Dropout", check_identity, build_identity},
    OpPath{"Elu", check_eltwise, build_eltwise, SampleInputs::at_slots(1)},
    OpPath{"Exp", check_eltwise, build_eltwise, SampleInputs::at_slots(1)},
    OpPath{"Flatten", check_reshape, build_reshape},
    OpPath{"GRU", check_recurrent, build_recurrent},
    OpPath{"Gemm", check_gemm, build_gemm},
    OpPath{"Gelu", check_eltwise, build_eltwise, SampleInputs::at_slots(1)},
    OpPath{"GlobalAveragePool", check_pool, build_pool, SampleInputs::at_slots(1)},
    OpPath{"GlobalMaxPool", check_pool, build_pool, SampleInputs::at_slots(1)},
    OpPath{"Identity", check_identity, build_identity},
    OpPath{"LSTM", check_recurrent, build_recurrent},
    OpPath{"LayerNormalization", check_layer_norm, build_layer_norm},
    OpPath{"LeakyRelu", check_eltwise, build_eltwise, SampleInputs::at_slots(1)},
    OpPath{"MatMul", check_matmul, build_matmul},
    OpPath{"MaxPool", check_pool, build_pool, SampleInputs::at_slots(1)},
    OpPath{"Mish", check_eltwise, build_eltwise, SampleInputs::at_slots(1)},
    OpPath{"Mul", check_binary, build_binary, SampleInputs::every()},
    OpPath{"QLinearConv", check_qlinear_conv, build_qlinear_conv},
    OpPath{"QLinearMatMul", check_qlinear_matmul, build_qlinear_matmul},
    OpPath{"QuantizeLinear", check_quantize_linear, build_quantize_linear},
    OpPath{"RNN", check_recurrent, build_recurrent},
    OpPath{"ReduceMean", check_reduce_mean, build_reduce_mean, SampleInputs::at_slots(1)},
    OpPath{"Relu", check_eltwise, build_eltwise, SampleInputs::at_slots(1)},
    OpPath{"Reshape", check_reshape, build_reshape},
    OpPath{"Resize", check_resize, build_resize},
    OpPath{"Sigmoid", check_eltwise, build_eltwise, SampleInputs::at_slots(1)},
    OpPath{"Softmax", check_softmax, build_softmax},
    OpPath{"Softplus", check_eltwise, build_eltwise, SampleInputs::at_slots(1)},
    OpPath{"Sub", check_binary, build_binary, SampleInputs::every()},
    OpPath{"Sum", check_sum, build_sum, SampleInputs::every()},
    OpPath{"Tanh", check_eltwise, build_eltwise, SampleInputs::at_slots(1)},
    OpPath{"Transpose", check_transpose, build_transpose},
};

}  // namespace

const OpPath* find_fast_path(std::string_view op_type) {
  for (const OpPath& path : kFastPaths) {
    if (path.op_type == op_type) return &path;
  }
  return nullptr;
}

StatusOr<const OpPath*> select_path(const OpReader& op) {
  static constexpr OpPath kPortable{"", check_portable, build_portable};
  const OpPath* fast = find_fast_path(op.dispatch().op_type);
  if (fast == nullptr) {
    // Planning the portable kernel runs the definition's checks first.
    KILN_RETURN_IF_ERROR(check_portable(op));
    return &kPortable;
  }
  KILN_RETURN_IF_ERROR(check_definition(op));
  Status status = fast->check(op);
  if (status.ok()) return fast;
  if (!check_portable(op).ok()) return status;
  return &kPortable;
}

bool reads_dims_only(const OpReader& op) {
  const std::string& type = op.dispatch().op_type;
  return type == "Shape" || type == "Size";
}

std::vector<std::string> supported_op_types() {
  std::vector<std::string> out;
  for (const kernels::OpDef& def : kernels::all_op_defs()) {
    if (out.empty() || out.back() != def.op_type) out.emplace_back(def.op_type);
  }
  return out;
}

}  // namespace kiln::hal::cpu
