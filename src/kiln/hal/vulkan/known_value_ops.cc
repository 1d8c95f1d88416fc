// Dispatches whose outputs are all known when the program is prepared (ValueSpec::known_value:
// Shape and Size always, shape arithmetic the module's shape program evaluates): their bytes are
// uploaded once with the plan and copied into place on each run, so shape computations never
// leave the GPU. Any op without a kernel of its own takes this path when its outputs are known.
#include <fmt/format.h>

#include "kiln/hal/vulkan/kernel_builder.h"
#include "kiln/hal/vulkan/op_table.h"

namespace kiln::hal::vulkan {

Status build_known_values(KernelBuilder& b) {
  for (size_t i = 0; i < b.output_count(); ++i) {
    const ValueSpec& out = b.output(i);
    if (!out.known_value || out.known_value->dtype() != out.dtype ||
        out.known_value->shape() != out.shape) {
      return unimplemented("'{}' is not known before the run", out.name);
    }
  }
  for (size_t i = 0; i < b.output_count(); ++i) {
    const Tensor& known = *b.output(i).known_value;
    if (known.byte_size() == 0) continue;
    KILN_ASSIGN_OR_RETURN(Operand values,
                          b.owned_constant(std::span(known.data(), known.byte_size())));
    b.copy(values, b.output_operand(i), known.byte_size());
  }
  b.describe(
      fmt::format("vulkan known values ({} output(s) computed when prepared)", b.output_count()));
  return ok_status();
}

}  // namespace kiln::hal::vulkan
