// Ops whose output is their first input's bytes unchanged (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity, Dropout at inference): one device copy, any dtype. A Dropout whose training_mode is
// true or computed at run time runs on the CPU, whose kernel draws the dropout mask.
#include <fmt/format.h>

#include "kiln/hal/vulkan/kernel_builder.h"
#include "kiln/hal/vulkan/op_table.h"

namespace kiln::hal::vulkan {

Status build_reshape_copy(KernelBuilder& b) {
  if (b.output_count() > 1) {
    return unimplemented("{} with its mask output runs on the CPU", b.dispatch().op_type);
  }
  // Dropout is a copy at inference only; a training_mode that is not a constant false runs on the
  // CPU fallback.
  if (b.dispatch().op_type == "Dropout" && b.has_input(2)) {
    const ValueSpec& mode = b.input(2);
    if (mode.role != ValueRole::kConstant || mode.constant == nullptr ||
        mode.constant->element_count() != 1 || element_as_int64(*mode.constant, 0) != 0) {
      return unimplemented("Dropout with training_mode that is not a constant false");
    }
  }
  const ValueSpec& x = b.input(0);
  const size_t bytes = plain_bytes(b.output(0));
  if (x.dtype != b.output(0).dtype || plain_bytes(x) != bytes) {
    return internal_error("{}: input '{}' and output '{}' differ in bytes", b.dispatch().op_type,
                          x.name, b.output(0).name);
  }
  KILN_ASSIGN_OR_RETURN(Operand src, b.input_operand(0));
  b.describe(fmt::format("vulkan copy ({} bytes)", bytes));
  if (bytes > 0) b.copy(src, b.output_operand(0), bytes);
  return ok_status();
}

}  // namespace kiln::hal::vulkan
