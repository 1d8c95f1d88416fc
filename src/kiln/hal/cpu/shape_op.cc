// Flatten and Reshape (the output shape comes concretely from the spec; the data is the input's
// plain bytes, so a blocked input is reordered straight into the output, and a plain input read
// by nothing later gives the output its storage: no copy), Identity and Dropout
// (inference: a copy, plus an all-true mask). Any dtype passes through.
#include <fmt/format.h>

#include "kiln/base/checked_math.h"
#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/program_builder.h"

namespace kiln::hal::cpu {
namespace {

size_t byte_size(const ValueSpec& v) {
  return static_cast<size_t>(checked_product(v.shape).value_or(0)) * dtype_size(v.dtype);
}

// Copies x into y. A value with a layout (f32, f16, bf16) keeps x's layout unless y must be
// plain (or `plain` is set).
Status copy_value(ProgramBuilder& b, int32_t x, int32_t y, bool plain) {
  const ValueSpec& xv = b.value(x);
  if (!stored_data_type(xv.dtype)) {
    b.add(std::make_unique<CopyStep>(b.label("copy"), BufferRef::of_value(x), b.plain_output(y),
                                     byte_size(xv)));
    return ok_status();
  }
  const dnnl_desc have = b.layout(x);
  if (plain || b.requires_plain(y)) {
    KILN_ASSIGN_OR_RETURN(BufferRef dst,
                          b.output(y, plain_desc(b.value(y).shape, have.data_type())));
    b.add_reorder(BufferRef::of_value(x), have, dst, plain_desc(xv.shape, have.data_type()));
    return ok_status();
  }
  KILN_ASSIGN_OR_RETURN(BufferRef dst, b.output(y, have));
  b.add_reorder(BufferRef::of_value(x), have, dst, have);
  return ok_status();
}

}  // namespace

// Reshape, Flatten and Identity are copies, which this path runs for any dtype; the definitions
// have checked the shapes (select_path).
Status check_reshape(const OpReader&) { return ok_status(); }

Status build_reshape(ProgramBuilder& b) {
  const int32_t x = b.op().input_index(0), y = b.op().output_index(0);
  // A plain input that nothing reads later lends its bytes: no copy at all.
  if (b.can_reshape_over(x, y)) return b.reshape_over(y, x).status();
  return copy_value(b, x, y, /*plain=*/true);
}

// Dropout runs here (a copy) only in inference, which a training_mode input must say as a
// constant; otherwise the definition's kernel runs it (training mode draws a mask).
Status check_identity(const OpReader& op) {
  if (op.dispatch().op_type == "Identity" || !op.has_input(2)) return ok_status();
  const ValueSpec& mode = op.input(2);
  if (mode.role != ValueRole::kConstant || mode.constant == nullptr ||
      mode.constant->element_count() != 1) {
    return unimplemented("input 2 'training_mode' must be a constant scalar");
  }
  if (element_as_int64(*mode.constant, 0) != 0) {
    return unimplemented("training_mode=true draws a mask (the portable kernel runs it)");
  }
  return ok_status();
}

Status build_identity(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_RETURN_IF_ERROR(copy_value(b, op.input_index(0), op.output_index(0), /*plain=*/false));
  if (op.output_count() == 2) {
    const int32_t mask = op.output_index(1);
    b.add(std::make_unique<FillStep>(b.label("fill mask"), b.plain_output(mask),
                                     byte_size(b.value(mask)), std::byte{1}));
  }
  return ok_status();
}

}  // namespace kiln::hal::cpu
