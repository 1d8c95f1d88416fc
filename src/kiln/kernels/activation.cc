#include "kiln/kernels/activation.h"

#include <fmt/format.h>

#include <cmath>

namespace kiln::kernels {
namespace {

// A finite float attribute, `absent` when it is not there.
StatusOr<double> read_bound(const Attributes& attributes, const char* name, double absent) {
  if (!attributes.has(name)) return absent;
  KILN_ASSIGN_OR_RETURN(double v, attributes.get_float(name, absent));
  if (!std::isfinite(v)) {
    return invalid_argument("attribute '{}' must be finite, got {}", name, v);
  }
  return v;
}

}  // namespace

StatusOr<FusedActivation> read_fused_activation(const Attributes& attributes) {
  KILN_ASSIGN_OR_RETURN(std::string name, attributes.get_string(kActivationAttribute, ""));
  FusedActivation a;
  if (name == "clip") {
    a.kind = FusedActivation::Kind::kClip;
    KILN_ASSIGN_OR_RETURN(a.min, read_bound(attributes, kActivationMinAttribute, a.min));
    KILN_ASSIGN_OR_RETURN(a.max, read_bound(attributes, kActivationMaxAttribute, a.max));
    if (a.min > a.max) {
      return invalid_argument("attributes '{}' = {} and '{}' = {}: the minimum exceeds the maximum",
                              kActivationMinAttribute, a.min, kActivationMaxAttribute, a.max);
    }
    return a;
  }
  for (const char* bound : {kActivationMinAttribute, kActivationMaxAttribute}) {
    if (attributes.has(bound)) {
      return invalid_argument("attribute '{}' is given but '{}' is \"{}\", not \"clip\"", bound,
                              kActivationAttribute, name);
    }
  }
  if (name == "leaky_relu") {
    a.kind = FusedActivation::Kind::kLeakyRelu;
    KILN_ASSIGN_OR_RETURN(a.alpha, read_bound(attributes, kActivationAlphaAttribute, a.alpha));
    return a;
  }
  if (attributes.has(kActivationAlphaAttribute)) {
    return invalid_argument("attribute '{}' is given but '{}' is \"{}\", not \"leaky_relu\"",
                            kActivationAlphaAttribute, kActivationAttribute, name);
  }
  if (name.empty()) return a;
  if (name == "relu") {
    a.kind = FusedActivation::Kind::kRelu;
    return a;
  }
  if (name == "silu") {
    a.kind = FusedActivation::Kind::kSilu;
    return a;
  }
  if (name == "mish") {
    a.kind = FusedActivation::Kind::kMish;
    return a;
  }
  if (name == "gelu") {
    a.kind = FusedActivation::Kind::kGelu;
    return a;
  }
  if (name == "gelu_tanh") {
    a.kind = FusedActivation::Kind::kGeluTanh;
    return a;
  }
  return invalid_argument(
      "attribute '{}' must be \"\", \"relu\", \"clip\", \"leaky_relu\", \"silu\", \"mish\", "
      "\"gelu\" or \"gelu_tanh\", got \"{}\"",
      kActivationAttribute, name);
}

void set_fused_activation(Attributes& attributes, const FusedActivation& activation) {
  attributes.erase(kActivationAttribute);
  attributes.erase(kActivationMinAttribute);
  attributes.erase(kActivationMaxAttribute);
  attributes.erase(kActivationAlphaAttribute);
  switch (activation.kind) {
    case FusedActivation::Kind::kNone: return;
    case FusedActivation::Kind::kRelu:
      attributes.set(kActivationAttribute, std::string("relu"));
      return;
    case FusedActivation::Kind::kClip:
      attributes.set(kActivationAttribute, std::string("clip"));
      if (std::isfinite(activation.min)) attributes.set(kActivationMinAttribute, activation.min);
      if (std::isfinite(activation.max)) attributes.set(kActivationMaxAttribute, activation.max);
      return;
    case FusedActivation::Kind::kLeakyRelu:
      attributes.set(kActivationAttribute, std::string("leaky_relu"));
      attributes.set(kActivationAlphaAttribute, activation.alpha);
      return;
    case FusedActivation::Kind::kSilu:
    case FusedActivation::Kind::kMish:
    case FusedActivation::Kind::kGelu:
    case FusedActivation::Kind::kGeluTanh:
      attributes.set(kActivationAttribute, describe(activation));
      return;
  }
}

std::string describe(const FusedActivation& activation) {
  switch (activation.kind) {
    case FusedActivation::Kind::kNone: return "";
    case FusedActivation::Kind::kRelu: return "relu";
    case FusedActivation::Kind::kClip:
      return fmt::format("clip({}, {})", activation.min, activation.max);
    case FusedActivation::Kind::kLeakyRelu: return fmt::format("leaky_relu({})", activation.alpha);
    case FusedActivation::Kind::kSilu: return "silu";
    case FusedActivation::Kind::kMish: return "mish";
    case FusedActivation::Kind::kGelu: return "gelu";
    case FusedActivation::Kind::kGeluTanh: return "gelu_tanh";
  }
  return "";
}

bool is_gelu(const FusedActivation& activation) {
  return activation.kind == FusedActivation::Kind::kGelu ||
         activation.kind == FusedActivation::Kind::kGeluTanh;
}

Status reject_gelu(const FusedActivation& activation) {
  if (!is_gelu(activation)) return ok_status();
  return unimplemented(
      "attribute '{}' = \"{}\" is not supported on this op (GELU fuses into MatMul only)",
      kActivationAttribute, describe(activation));
}

StatusOr<bool> read_fused_relu(const Attributes& attributes) {
  KILN_ASSIGN_OR_RETURN(FusedActivation a, read_fused_activation(attributes));
  if (a.kind != FusedActivation::Kind::kNone && a.kind != FusedActivation::Kind::kRelu) {
    KILN_ASSIGN_OR_RETURN(std::string name, attributes.get_string(kActivationAttribute, ""));
    return unimplemented("attribute '{}' = \"{}\" is not supported on this op (only \"relu\")",
                         kActivationAttribute, name);
  }
  return a.kind == FusedActivation::Kind::kRelu;
}

}  // namespace kiln::kernels
