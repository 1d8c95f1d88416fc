// Transpose of f32 data as one oneDNN reorder: the input, where it is stored (plain, or
// channels-last as a convolution left it), read through a strided view with the output's dims
// (output dim i walks input dim perm[i]) into the plain output. An f32 reorder copies elements,
// so the result is the input's bits (NaN payloads and -0 included) whatever the shape or thread
// count. Other dtypes take the portable kernel: oneDNN 2.6's f16 reorder turns -0 into +0
// (tests/python/test_dtypes.py caught it).
//
// When that view is itself plain or channels-last (acdb), the transpose only relabels the stored
// bytes: a tf2onnx-style NHWC graph's Transpose to NHWC after a convolution that wrote
// channels-last, or its Transpose to NCHW of NHWC data, which a convolution then reads as
// channels-last. The output then takes that layout: over the input's bytes
// (ProgramBuilder::alias_over), with nothing copied, where nothing else reads the input; else as
// a straight copy of them. Where every reader is a MatMul that reads the view in place (kiln's
// kernel packs B from any strides, and reads A's rows through a row stride where the last axis
// stays last) or a Shape or Size (dims only), the output is that strided view over the input's
// bytes: K^T in attention (a "cab" view of K), the head split of Q (a "acbd" view) and a
// sequence-first model's [N,T,k] -> [T,N,k] before its input projection (a "bac" view, whose
// size arithmetic reads its Shape) cost no copy. A MatMul whose only reader is
// such a transpose (the head merge after attention's A·V) writes its matrices in the layout that
// makes this view plain (matmul_op.cc), so the transpose only relabels the bytes.
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
  const int32_t x = op.input_index(0), y = op.output_index(0);
  const ConcreteShape& in = op.input(0).shape;
  const ConcreteShape& out = op.output(0).shape;
  const dnnl::memory::data_type type = *stored_data_type(op.input(0).dtype);
  const dnnl_desc plain_in = plain_desc(in, type);
  // The input as it is stored when that is one strided view of it, else plain.
  dnnl_desc src_layout = plain_in;
  if (b.constant(x) == nullptr) {
    if (dense_strides(b.layout(x))) src_layout = b.layout(x);
  }
  const dnnl_dims in_strides = *dense_strides(src_layout);
  dnnl_dims view_strides(out.size());
  for (size_t i = 0; i < out.size(); ++i) view_strides[i] = in_strides[perm[i]];
  const dnnl_desc view = strided_desc(to_dnnl_dims(out), view_strides, type);
  const dnnl_desc dst_desc = plain_desc(out, type);
  const bool relabels =
      view == dst_desc || (out.size() == 4 && view == dnnl_desc(to_dnnl_dims(out), type,
                                                                dnnl::memory::format_tag::acdb));
  if (relabels && b.can_alias_over(x, y, view)) return b.alias_over(y, x, view).status();
  // Readers that take the strided view in place (kiln's MatMul: B in any, A where the last
  // axis stays last; Shape and Size, which readers_accept lets through) get the view itself.
  if (b.can_alias_over(x, y, view) &&
      b.readers_accept(y, [&view_strides](const OpReader& reader, const OpPath& path, size_t slot) {
        return path.op_type == "MatMul" && matmul_reads_in_place(reader, slot, view_strides);
      })) {
    return b.alias_over(y, x, view).status();
  }
  // Where the input's bytes cannot be lent (a graph input, or read again later), a relabelling
  // transpose copies them as they are, into an output in that layout.
  const dnnl_desc& produced = relabels ? view : dst_desc;
  KILN_ASSIGN_OR_RETURN(BufferRef src, b.input_as(x, src_layout));
  KILN_ASSIGN_OR_RETURN(BufferRef dst, b.output(y, produced));
  if (checked_product(out).value_or(0) == 0) return ok_status();
  b.add_reorder(src, view, dst, produced);
  return ok_status();
}

}  // namespace kiln::hal::cpu
