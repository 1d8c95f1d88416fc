// Transpose of f32 data as one oneDNN reorder: the plain input read through a strided view with
// the output's dims (output dim i walks input dim perm[i]) into the plain output. An f32 reorder
// copies elements, so the result is the input's bits (NaN payloads and -0 included) whatever the
// shape or thread count. Other dtypes take the portable kernel: oneDNN 2.6's f16 reorder turns
// -0 into +0 (tests/python/test_dtypes.py caught it).
#include <fmt/format.h>

#include "kiln/base/checked_math.h"
#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/kernels/op_attributes.h"

namespace kiln::hal::cpu {
namespace {

StatusOr<std::vector<int64_t>> read_perm(const OpReader& op) {
  if (op.input(0).dtype != DType::kF32) {
    return unimplemented("{} data runs on the portable path", dtype_name(op.input(0).dtype));
  }
  const size_t rank = op.input(0).shape.size();
  if (rank == 0) return unimplemented("a rank-0 input is not supported");
  return kernels::read_transpose_perm(op.attributes(), rank);
}

}  // namespace

Status check_transpose(const OpReader& op) { return read_perm(op).status(); }

Status build_transpose(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, read_perm(op));
  const ConcreteShape& in = op.input(0).shape;
  const ConcreteShape& out = op.output(0).shape;
  const dnnl::memory::data_type type = *stored_data_type(op.input(0).dtype);
  KILN_ASSIGN_OR_RETURN(BufferRef src, b.input_as(op.input_index(0), plain_desc(in, type)));
  std::vector<int64_t> in_strides(in.size(), 1);
  for (size_t d = in.size() - 1; d > 0; --d) in_strides[d - 1] = in_strides[d] * in[d];
  dnnl_dims view_strides(out.size());
  for (size_t i = 0; i < out.size(); ++i) view_strides[i] = in_strides[perm[i]];
  const dnnl_desc dst_desc = plain_desc(out, type);
  KILN_ASSIGN_OR_RETURN(BufferRef dst, b.output(op.output_index(0), dst_desc));
  if (checked_product(out).value_or(0) == 0) return ok_status();
  b.add_reorder(src, strided_desc(to_dnnl_dims(out), view_strides, type), dst, dst_desc);
  return ok_status();
}

}  // namespace kiln::hal::cpu
