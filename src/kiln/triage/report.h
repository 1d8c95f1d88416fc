// What `kiln triage` tells its user: a text summary (stdout), a JSON document (--json) and an
// HTML page with an inline SVG chart of the error per layer on a log scale and the table behind
// it.
//
// JSON: {"verdict": "clean"|"diverged", "model", "reference", "bindings",
//        "first_divergence": null | {"dispatch", "dispatch_name", "op_type", "nodes", "value",
//            "at_fault", "max_abs_err", "nonfinite", "explanation", "isolated": [...],
//            "repro": {...}?},
//        "layers": [{"dispatch", "name", "op_type", "nodes", "value", "shape", "compared",
//            "passed", "max_abs_err", "max_rel_err", "mismatches", "count", "nan", "inf",
//            "atol", "rtol", "expected_max_abs", "elapsed_ms"}],
//        "timings_ms": {...}}
// max_abs_err is over elements where both sides are finite; NaN/Inf are counted in nonfinite.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "kiln/triage/repro.h"
#include "kiln/triage/triage.h"

namespace kiln::triage {

struct ReportContext {
  std::string model;
  const TriageResult* result = nullptr;
  const ReproFiles* repro = nullptr;         // when one was written
  std::map<std::string, double> timings_ms;  // "import", "compile", "reference", "kiln", ...
};

std::string text_report(const ReportContext& context);
nlohmann::json json_report(const ReportContext& context);
std::string html_report(const ReportContext& context);

}  // namespace kiln::triage
