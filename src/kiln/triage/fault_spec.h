// Fault injection, for testing kiln's own debugging tools (`kiln triage`, the test suite): a
// FaultSpec, written as the environment variable takes it,
//   KILN_FAULT=dispatch:<index|node-name>:<kind>      kind: nan | inf | zero | perturb=<eps>
//   KILN_FAULT=op:<OpType>:<kind>
// says to corrupt every f32 output of the selected dispatch right after it runs: nan and inf set
// every element to NaN or +Inf, zero to 0, perturb=<eps> adds eps (a finite number) to every
// element. fault_device.h applies it to any device.
//
// Selection: `op:` selects every dispatch of that ONNX op type (a planted broken kernel, for
// testing that conformance runs catch one). Of `dispatch:`, an all-digit selector is the
// dispatch's index in the module
// (DispatchSpec::module_index, or its position in the program when that is -1); any other text
// matches a dispatch by its name or by any ONNX node name fused into it (DispatchSpec::origins).
// A selector that matches no dispatch of a program corrupts nothing (a program may hold one
// dispatch of a module, run alone).
//
// A malformed value is an error naming KILN_FAULT.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kiln/base/status.h"
#include "kiln/hal/program.h"

namespace kiln::triage {

inline constexpr const char* kFaultVariable = "KILN_FAULT";

struct FaultSpec {
  enum class Kind : uint8_t { kNan, kInf, kZero, kPerturb };
  std::optional<int32_t> index;  // set for an all-digit selector
  std::string node;              // otherwise: a dispatch or ONNX node name
  std::string op_type;           // set for `op:`; then index and node are unused
  Kind kind = Kind::kNan;
  double eps = 0;  // kPerturb

  // Whether this fault applies to `dispatch`, found at `position` in its program.
  bool matches(const hal::DispatchSpec& dispatch, int32_t position) const;
  // "nan", "perturb=0.01", ...
  std::string kind_text() const;
};

// Parses a KILN_FAULT value; an empty value means no fault (nullopt). Errors (invalid argument)
// quote the value and say what part is wrong.
StatusOr<std::optional<FaultSpec>> parse_fault(std::string_view text);
// The fault KILN_FAULT asks for in this process's environment, read now; nullopt when unset or
// empty. The tools read it once per command and pass it on (TriageOptions::fault,
// SessionOptions::decorate_device); the library never reads it behind a caller's back.
StatusOr<std::optional<FaultSpec>> fault_from_environment();

}  // namespace kiln::triage
