// Flatten and Reshape (the output shape comes concretely from the spec; the data is the input's
// plain bytes, so a blocked input is reordered straight into the output), Identity and Dropout
// (inference: a copy, plus an all-true mask). Any dtype passes through.
#include <fmt/format.h>

#include "kiln/base/checked_math.h"
#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/program_builder.h"

namespace kiln::hal::cpu {
namespace {

Status expect_same_data(const OpReader& op, bool same_shape) {
  const ValueSpec& x = op.input(0);
  const ValueSpec& y = op.output(0);
  if (x.dtype != y.dtype) {
    return invalid_argument("output dtype {} differs from the input's {}", dtype_name(y.dtype),
                            dtype_name(x.dtype));
  }
  if (same_shape && x.shape != y.shape) {
    return invalid_argument("output shape [{}] differs from the input's [{}]",
                            fmt::join(y.shape, ","), fmt::join(x.shape, ","));
  }
  if (checked_product(x.shape) != checked_product(y.shape)) {
    return invalid_argument("output [{}] has a different element count than the input [{}]",
                            fmt::join(y.shape, ","), fmt::join(x.shape, ","));
  }
  return ok_status();
}

size_t byte_size(const ValueSpec& v) {
  return static_cast<size_t>(checked_product(v.shape).value_or(0)) * dtype_size(v.dtype);
}

// Copies x into y. f32 data keeps x's layout unless y must be plain (or `plain` is set).
Status copy_value(ProgramBuilder& b, int32_t x, int32_t y, bool plain) {
  const ValueSpec& xv = b.value(x);
  if (xv.dtype != DType::kF32) {
    b.add(std::make_unique<CopyStep>(b.label("copy"), BufferRef::of_value(x), b.plain_output(y),
                                     byte_size(xv)));
    return ok_status();
  }
  const dnnl_desc have = b.layout(x);
  if (plain || b.requires_plain(y)) {
    KILN_ASSIGN_OR_RETURN(BufferRef dst, b.output(y, plain_desc(b.value(y).shape)));
    b.add_reorder(BufferRef::of_value(x), have, dst, plain_desc(xv.shape));
    return ok_status();
  }
  KILN_ASSIGN_OR_RETURN(BufferRef dst, b.output(y, have));
  b.add_reorder(BufferRef::of_value(x), have, dst, have);
  return ok_status();
}

}  // namespace

Status check_reshape(const OpReader& op) {
  if (op.dispatch().op_type == "Flatten") {
    KILN_RETURN_IF_ERROR(op.expect_attributes({"axis"}));
    KILN_RETURN_IF_ERROR(op.expect_inputs(1, 1));
    if (op.output_count() == 1 && op.output(0).shape.size() != 2) {
      return invalid_argument("output must have rank 2, got {}", op.output(0).shape.size());
    }
  } else {
    KILN_RETURN_IF_ERROR(op.expect_attributes({"allowzero"}));
    KILN_RETURN_IF_ERROR(op.expect_inputs(2, 2));
  }
  KILN_RETURN_IF_ERROR(op.expect_outputs(1, 1));
  return expect_same_data(op, false);
}

Status build_reshape(ProgramBuilder& b) {
  return copy_value(b, b.op().input_index(0), b.op().output_index(0), /*plain=*/true);
}

Status check_identity(const OpReader& op) {
  if (op.dispatch().op_type == "Identity") {
    KILN_RETURN_IF_ERROR(op.expect_attributes({}));
    KILN_RETURN_IF_ERROR(op.expect_inputs(1, 1));
    KILN_RETURN_IF_ERROR(op.expect_outputs(1, 1));
    return expect_same_data(op, true);
  }
  KILN_RETURN_IF_ERROR(op.expect_attributes({"seed", "ratio", "is_test"}));
  KILN_RETURN_IF_ERROR(op.expect_inputs(1, 3));
  KILN_RETURN_IF_ERROR(op.expect_outputs(1, 2));
  KILN_ASSIGN_OR_RETURN(int64_t is_test, op.get_int("is_test", 1));
  if (is_test == 0) return unimplemented("training (is_test=0) is not supported");
  if (op.has_input(2)) {
    const ValueSpec& mode = op.input(2);
    if (mode.role != ValueRole::kConstant || mode.constant == nullptr ||
        mode.constant->element_count() != 1) {
      return unimplemented("input 2 'training_mode' must be a constant scalar");
    }
    if (element_as_int64(*mode.constant, 0) != 0) {
      return unimplemented("training_mode=true is not supported");
    }
  }
  if (op.output_count() == 2) {
    const ValueSpec& mask = op.output(1);
    if (mask.dtype != DType::kBool || mask.shape != op.input(0).shape) {
      return invalid_argument("output 1 'mask' must be bool [{}], got {} [{}]",
                              fmt::join(op.input(0).shape, ","), dtype_name(mask.dtype),
                              fmt::join(mask.shape, ","));
    }
  }
  return expect_same_data(op, true);
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
