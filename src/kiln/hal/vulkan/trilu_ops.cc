// Trilu on the GPU (shaders/trilu.comp): 4- and 8-byte elements, k from a constant or a value the
// shape program knows (a k computed from data runs on the CPU). The causal masks of decoders.
#include <fmt/format.h>

#include <algorithm>

#include "kiln/hal/vulkan/kernel_builder.h"
#include "kiln/hal/vulkan/op_table.h"

namespace kiln::hal::vulkan {

Status build_trilu(KernelBuilder& b) {
  const ValueSpec& x = b.input(0);
  const size_t element = dtype_size(x.dtype);
  if (element != 4 && element != 8) {
    return unimplemented("Trilu of {} (the Vulkan kernel takes 4- and 8-byte elements)",
                         dtype_name(x.dtype));
  }
  KILN_ASSIGN_OR_RETURN(int64_t upper, b.attributes().get_int("upper", 1));
  int64_t k = 0;
  if (b.has_input(1)) {
    std::optional<std::vector<int64_t>> known = known_input_ints(b, 1);
    if (!known || known->size() != 1) {
      return unimplemented("Trilu's k '{}' is computed at run time", b.input(1).name);
    }
    k = known->front();
  }
  const int64_t rows = x.shape[x.shape.size() - 2];
  const int64_t cols = x.shape.back();
  const int64_t bound = rows + cols + 1;
  k = std::clamp(k, -bound, bound);
  const uint64_t n = plain_bytes(x) / element;
  if (n == 0) return ok_status();
  KILN_ASSIGN_OR_RETURN(Operand in, b.input_operand(0));
  b.describe(
      fmt::format("vulkan trilu ({}, k {}, {} elements)", upper != 0 ? "upper" : "lower", k, n));
  return b.launch("trilu", {upper != 0 ? 1u : 0u, element == 8 ? 1u : 0u}, n,
                  {in, b.output_operand(0)},
                  {static_cast<uint32_t>(n), static_cast<uint32_t>(rows),
                   static_cast<uint32_t>(cols), static_cast<uint32_t>(static_cast<int32_t>(k))});
}

}  // namespace kiln::hal::vulkan
