// The ops the CPU backend implements: for each op type, a check (attributes, counts, dtypes,
// shapes; shared by supports() and prepare()) and a builder that appends the dispatch's steps.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/hal/cpu/op_params.h"

namespace kiln::hal::cpu {

class ProgramBuilder;

struct OpImpl {
  std::string_view op_type;
  Status (*check)(const OpReader& op);
  Status (*build)(ProgramBuilder& builder);
};

// The specialized (oneDNN) implementation of an op type; nullptr when there is none.
const OpImpl* find_op(std::string_view op_type);
// The implementation that runs this dispatch: the specialized one when its check passes, else
// the portable kernel (kiln::kernels) when that accepts the dispatch. The choice depends on the
// concrete dispatch only. The error is the specialized check's when there is one, else the
// portable one's (naming the unsupported detail).
StatusOr<const OpImpl*> select_op(const OpReader& op);
// Every op type the backend runs (specialized or portable), sorted.
std::vector<std::string> supported_op_types();

// Per family (conv_op.cc, pool_op.cc, ...).
Status check_conv(const OpReader& op);
Status build_conv(ProgramBuilder& b);
Status check_pool(const OpReader& op);
Status build_pool(ProgramBuilder& b);
Status check_batch_norm(const OpReader& op);
Status build_batch_norm(ProgramBuilder& b);
Status check_eltwise(const OpReader& op);
Status build_eltwise(ProgramBuilder& b);
Status check_binary(const OpReader& op);
Status build_binary(ProgramBuilder& b);
Status check_sum(const OpReader& op);
Status build_sum(ProgramBuilder& b);
Status check_gemm(const OpReader& op);
Status build_gemm(ProgramBuilder& b);
Status check_matmul(const OpReader& op);
Status build_matmul(ProgramBuilder& b);
Status check_softmax(const OpReader& op);
Status build_softmax(ProgramBuilder& b);
Status check_reshape(const OpReader& op);  // Reshape and Flatten
Status build_reshape(ProgramBuilder& b);
Status check_identity(const OpReader& op);  // Identity and Dropout
Status build_identity(ProgramBuilder& b);
Status check_portable(const OpReader& op);  // any op of kiln::kernels (portable_op.cc)
Status build_portable(ProgramBuilder& b);

}  // namespace kiln::hal::cpu
