// Constant, which the importer folds away; registered so that unsupported_ops does not list it.
// Flatten, Reshape, Identity and Dropout are portable kernels (kiln/kernels/movement.cc).
#include <cstring>

#include "kiln/ops/families.h"
#include "kiln/ops/op_util.h"

namespace kiln::ops {
namespace {

Status copy_kernel(const ir::Node&, std::span<const Tensor> in, std::span<Tensor> out) {
  if (out[0].byte_size() > 0) std::memcpy(out[0].mutable_data(), in[0].data(), out[0].byte_size());
  return ok_status();
}

Status infer_constant(InferContext&) {
  return failed_precondition(
      "Constant nodes must be turned into constant values by the importer; this one reached op "
      "inference");
}

}  // namespace

void register_shape_ops(Registry& registry) {
  registry.add(make_op("Constant", infer_constant, copy_kernel));
}

}  // namespace kiln::ops
