// What the C API's opaque handles (include/kiln/kiln.h) hold, and the conversions between kiln's
// C++ types and the C ones. Internal to src/kiln/capi.
#pragma once

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/kiln.h"
#include "kiln/module/module.h"
#include "kiln/runtime/session.h"

struct kiln_status {
  kiln_status_code code = KILN_OK;
  std::string message;  // the message, then its notes outward, one per line
};

namespace kiln::capi {

// A graph input or output's description, with the storage kiln_value_info points into.
struct ValueInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;  // -1 where symbolic
  std::vector<std::string> dim_names;
  std::vector<const char*> dim_name_pointers;
};

// A loaded module with its inputs' and outputs' descriptions; immutable, shared by the handles
// that refer to it.
struct LoadedModule {
  std::shared_ptr<const module::ModuleContents> contents;
  std::vector<ValueInfo> inputs, outputs;
};

// Builds the descriptions of `contents`'s inputs and outputs.
std::shared_ptr<const LoadedModule> describe_module(
    std::shared_ptr<const module::ModuleContents> contents);

// Fills a kiln_value_info that points into `info`.
void fill_value_info(const ValueInfo& info, kiln_value_info* out);

// The integer value of a C enum the caller passed (a kiln_dtype, a kiln_status_code), read
// without loading it as the enum type: the caller may pass any int, and a value outside the enum's
// range must be refused, not be undefined behaviour.
template <typename Enum>
int raw_code(const Enum& value) {
  std::underlying_type_t<Enum> code;
  std::memcpy(&code, &value, sizeof code);
  return static_cast<int>(code);
}

// Null for an ok status; else a new kiln_status the caller releases.
kiln_status* to_c_status(const Status& status);

// The C tensor as a kiln Tensor: borrowed in place when its data is aligned to the element
// size, else copied. Errors name `what` (e.g. "input 0 'data'"): an unknown dtype, a negative
// dim, a byte size that overflows, null data for a non-empty tensor.
StatusOr<Tensor> tensor_from_c(const kiln_tensor& tensor, const std::string& what);
// The C tensor as a writable kiln Tensor over the caller's bytes (no copy). Errors as above,
// and data not aligned to the element size.
StatusOr<Tensor> writable_tensor_from_c(const kiln_tensor& tensor, const std::string& what);

// Runs `function`, turning an escaping C++ exception (std::bad_alloc from a container) into an
// internal status: nothing may unwind across the C boundary.
template <typename F>
kiln_status* guarded(F&& function) {
  try {
    return to_c_status(function());
  } catch (const std::bad_alloc&) {
    return to_c_status(Status(StatusCode::kOutOfRange, "out of memory"));
  } catch (const std::exception& e) {
    return to_c_status(internal_error("unexpected exception: {}", e.what()));
  }
}

}  // namespace kiln::capi

struct kiln_module {
  std::shared_ptr<const kiln::capi::LoadedModule> loaded;
};
