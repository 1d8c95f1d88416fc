// The C API's comparator (include/kiln/kiln.h): kiln's one strict comparator
// (kiln/tooling/comparator.h) over caller tensors.
#include <cstdlib>
#include <cstring>

#include "kiln/capi/handles.h"
#include "kiln/tooling/comparator.h"

extern "C" {

kiln_status* kiln_compare(const kiln_tensor* actual, const kiln_tensor* expected, double atol,
                          double rtol, int nan_equal, kiln_compare_result* out_result,
                          char** out_report) {
  return kiln::capi::guarded([&]() -> kiln::Status {
    if (actual == nullptr || expected == nullptr || out_result == nullptr) {
      return kiln::invalid_argument("kiln_compare: actual, expected and out_result must be set");
    }
    KILN_ASSIGN_OR_RETURN(kiln::Tensor a, kiln::capi::tensor_from_c(*actual, "actual"));
    KILN_ASSIGN_OR_RETURN(kiln::Tensor e, kiln::capi::tensor_from_c(*expected, "expected"));
    // compare_tensors refuses a tensor with no storage; an empty one compares as equal.
    if (a.element_count() == 0 && e.element_count() == 0 && a.dtype() == e.dtype() &&
        a.shape() == e.shape()) {
      KILN_ASSIGN_OR_RETURN(a, kiln::Tensor::create(a.dtype(), a.shape()));
      KILN_ASSIGN_OR_RETURN(e, kiln::Tensor::create(e.dtype(), e.shape()));
    }
    kiln::Tolerance tolerance{atol, rtol, nan_equal != 0};
    KILN_ASSIGN_OR_RETURN(kiln::CompareResult result, kiln::compare_tensors(a, e, tolerance));
    if (out_report != nullptr) {
      const std::string report = kiln::format_compare_result(result, tolerance);
      char* copy = static_cast<char*>(std::malloc(report.size() + 1));
      if (copy == nullptr) return kiln::out_of_range("out of memory for the report");
      std::memcpy(copy, report.c_str(), report.size() + 1);
      *out_report = copy;
    }
    *out_result = kiln_compare_result{result.count,
                                      result.mismatches,
                                      result.nan_mismatches,
                                      result.inf_mismatches,
                                      result.max_abs_error,
                                      result.max_rel_error,
                                      result.first_mismatch.value_or(-1)};
    return kiln::ok_status();
  });
}

}  // extern "C"
