// The C API's status, dtype, version and string functions (include/kiln/kiln.h).
#include <cstdlib>

#include "kiln/base/dtype.h"
#include "kiln/capi/handles.h"

extern "C" {

const char* kiln_version(void) { return KILN_VERSION; }

kiln_status_code kiln_status_get_code(const kiln_status* status) {
  return status == nullptr ? KILN_OK : status->code;
}

const char* kiln_status_message(const kiln_status* status) {
  return status == nullptr ? "" : status->message.c_str();
}

const char* kiln_status_code_name(kiln_status_code code) {
  const int value = kiln::capi::raw_code(code);
  if (value < KILN_OK || value > KILN_INTERNAL) return "UNKNOWN";
  switch (code) {
    case KILN_OK: return "OK";
    case KILN_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case KILN_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case KILN_NOT_FOUND: return "NOT_FOUND";
    case KILN_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case KILN_DATA_LOSS: return "DATA_LOSS";
    case KILN_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case KILN_INTERNAL: return "INTERNAL";
  }
  return "UNKNOWN";
}

void kiln_status_release(kiln_status* status) { delete status; }

size_t kiln_dtype_size(kiln_dtype dtype) {
  if (!kiln::is_valid_dtype_code(kiln::capi::raw_code(dtype))) return 0;
  return kiln::dtype_size(static_cast<kiln::DType>(dtype));
}

const char* kiln_dtype_name(kiln_dtype dtype) {
  if (!kiln::is_valid_dtype_code(kiln::capi::raw_code(dtype))) return "?";
  // dtype_name's views point at string literals, which are null-terminated.
  return kiln::dtype_name(static_cast<kiln::DType>(dtype)).data();
}

void kiln_string_release(char* string) { std::free(string); }

}  // extern "C"
