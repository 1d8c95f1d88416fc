#include "kiln/hal/program.h"

#include "kiln/base/checked_math.h"

namespace kiln::hal {

const char* value_role_name(ValueRole role) {
  switch (role) {
    case ValueRole::kInput: return "graph input";
    case ValueRole::kOutput: return "graph output";
    case ValueRole::kConstant: return "constant";
    case ValueRole::kIntermediate: return "intermediate";
  }
  return "value";
}

size_t plain_bytes(const ValueSpec& value) {
  auto count = checked_product(value.shape);
  if (!count) return 0;
  auto bytes = checked_mul(*count, static_cast<int64_t>(dtype_size(value.dtype)));
  return bytes ? static_cast<size_t>(*bytes) : 0;
}

}  // namespace kiln::hal
