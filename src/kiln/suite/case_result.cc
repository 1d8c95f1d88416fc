#include "kiln/suite/case_result.h"

#include <algorithm>

namespace kiln::suite {

double CaseResult::max_abs_error() const {
  double out = 0;
  for (const OutputReport& o : outputs) {
    if (o.compare) out = std::max(out, o.compare->max_abs_error);
  }
  return out;
}

double CaseResult::max_rel_error() const {
  double out = 0;
  for (const OutputReport& o : outputs) {
    if (o.compare) out = std::max(out, o.compare->max_rel_error);
  }
  return out;
}

int64_t CaseResult::nan_count() const {
  int64_t out = 0;
  for (const OutputReport& o : outputs) {
    if (o.compare) out += o.compare->actual_nan;
  }
  return out;
}

int64_t CaseResult::inf_count() const {
  int64_t out = 0;
  for (const OutputReport& o : outputs) {
    if (o.compare) out += o.compare->actual_inf;
  }
  return out;
}

std::string case_name(const std::string& model, const std::string& data_set,
                      const std::string& variant, const std::string& sizes) {
  std::string name = model;
  for (const std::string* part : {&data_set, &variant, &sizes}) {
    if (!part->empty()) name += "/" + *part;
  }
  return name;
}

}  // namespace kiln::suite
