#include "kiln/hal/cpu/op_table.h"

#include <algorithm>
#include <array>

#include "kiln/kernels/kernel.h"

namespace kiln::hal::cpu {
namespace {

constexpr std::array kOps = {
    OpImpl{"Add", check_binary, build_binary},
    OpImpl{"AveragePool", check_pool, build_pool},
    OpImpl{"BatchNormalization", check_batch_norm, build_batch_norm},
    OpImpl{"Conv", check_conv, build_conv},
    OpImpl{"Div", check_binary, build_binary},
    OpImpl{"Dropout", check_identity, build_identity},
    OpImpl{"Flatten", check_reshape, build_reshape},
    OpImpl{"Gemm", check_gemm, build_gemm},
    OpImpl{"Gelu", check_eltwise, build_eltwise},
    OpImpl{"GlobalAveragePool", check_pool, build_pool},
    OpImpl{"GlobalMaxPool", check_pool, build_pool},
    OpImpl{"Identity", check_identity, build_identity},
    OpImpl{"MatMul", check_matmul, build_matmul},
    OpImpl{"MaxPool", check_pool, build_pool},
    OpImpl{"Mul", check_binary, build_binary},
    OpImpl{"Relu", check_eltwise, build_eltwise},
    OpImpl{"Reshape", check_reshape, build_reshape},
    OpImpl{"Softmax", check_softmax, build_softmax},
    OpImpl{"Sub", check_binary, build_binary},
    OpImpl{"Sum", check_sum, build_sum},
};

}  // namespace

const OpImpl* find_op(std::string_view op_type) {
  for (const OpImpl& op : kOps) {
    if (op.op_type == op_type) return &op;
  }
  return nullptr;
}

StatusOr<const OpImpl*> select_op(const OpReader& op) {
  static constexpr OpImpl kPortable{"", check_portable, build_portable};
  const OpImpl* specialized = find_op(op.dispatch().op_type);
  if (specialized != nullptr) {
    Status status = specialized->check(op);
    if (status.ok()) return specialized;
    if (kernels::find_op_kernel(op.dispatch().op_type) == nullptr || !check_portable(op).ok()) {
      return status;
    }
    return &kPortable;
  }
  KILN_RETURN_IF_ERROR(check_portable(op));
  return &kPortable;
}

std::vector<std::string> supported_op_types() {
  std::vector<std::string> out;
  for (const OpImpl& op : kOps) out.emplace_back(op.op_type);
  for (const kernels::OpKernel& k : kernels::all_op_kernels()) {
    if (find_op(k.op_type) == nullptr) out.emplace_back(k.op_type);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kiln::hal::cpu
