#include "kiln/hal/cpu/op_params.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "kiln/kernels/conv_geometry.h"

namespace kiln::hal::cpu {
namespace {

const Attributes& empty_attributes() {
  static const Attributes empty;
  return empty;
}

std::string name_of(const ValueSpec& v) { return v.name; }

}  // namespace

Status OpReader::check_indices() const {
  const auto n = static_cast<int32_t>(values_.size());
  for (size_t i = 0; i < dispatch_.inputs.size(); ++i) {
    const int32_t v = dispatch_.inputs[i];
    if (v < -1 || v >= n) {
      return invalid_argument("input {} refers to value {}, but the program has {} values", i, v,
                              n);
    }
  }
  for (size_t i = 0; i < dispatch_.outputs.size(); ++i) {
    const int32_t v = dispatch_.outputs[i];
    if (v < 0 || v >= n) {
      return invalid_argument("output {} refers to value {}, but the program has {} values", i, v,
                              n);
    }
  }
  return ok_status();
}

size_t OpReader::input_count() const {
  size_t count = dispatch_.inputs.size();
  while (count > 0 && dispatch_.inputs[count - 1] < 0) --count;
  return count;
}

bool OpReader::has_input(size_t i) const {
  return i < dispatch_.inputs.size() && dispatch_.inputs[i] >= 0;
}

Status OpReader::expect_inputs(size_t min, size_t max) const {
  const size_t count = input_count();
  if (count < min || count > max) {
    if (min == max) return invalid_argument("expects {} inputs, got {}", min, count);
    return invalid_argument("expects {} to {} inputs, got {}", min, max, count);
  }
  for (size_t i = 0; i < min; ++i) {
    if (!has_input(i)) return invalid_argument("required input {} is absent", i);
  }
  return ok_status();
}

Status OpReader::expect_outputs(size_t min, size_t max) const {
  const size_t count = dispatch_.outputs.size();
  if (count < min || count > max) {
    if (min == max) return invalid_argument("expects {} outputs, got {}", min, count);
    return invalid_argument("expects {} to {} outputs, got {}", min, max, count);
  }
  return ok_status();
}

Status OpReader::expect_attributes(std::initializer_list<std::string_view> known) const {
  if (dispatch_.attributes == nullptr) return ok_status();
  for (const auto& [name, value] : dispatch_.attributes->all()) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return unimplemented("attribute '{}' is not supported", name);
    }
  }
  return ok_status();
}

Status OpReader::expect_input_dtype(size_t i, DType dtype) const {
  const ValueSpec& v = input(i);
  if (v.dtype != dtype) {
    return unimplemented("input {} '{}' must be {}, got {}", i, name_of(v), dtype_name(dtype),
                         dtype_name(v.dtype));
  }
  return ok_status();
}

Status OpReader::expect_output_dtype(size_t i, DType dtype) const {
  const ValueSpec& v = output(i);
  if (v.dtype != dtype) {
    return unimplemented("output {} '{}' must be {}, got {}", i, name_of(v), dtype_name(dtype),
                         dtype_name(v.dtype));
  }
  return ok_status();
}

Status OpReader::expect_input_rank(size_t i, size_t min, size_t max) const {
  const size_t rank = input(i).shape.size();
  if (rank < min || rank > max) {
    if (min == max) {
      return invalid_argument("input {} '{}' must have rank {}, got {}", i, input(i).name, min,
                              rank);
    }
    return unimplemented("input {} '{}' must have rank {} to {}, got {}", i, input(i).name, min,
                         max, rank);
  }
  return ok_status();
}

StatusOr<int64_t> OpReader::get_int(const std::string& name, int64_t fallback) const {
  const Attributes& a = dispatch_.attributes ? *dispatch_.attributes : empty_attributes();
  return a.get_int(name, fallback);
}
StatusOr<double> OpReader::get_float(const std::string& name, double fallback) const {
  const Attributes& a = dispatch_.attributes ? *dispatch_.attributes : empty_attributes();
  return a.get_float(name, fallback);
}
StatusOr<std::string> OpReader::get_string(const std::string& name, std::string fallback) const {
  const Attributes& a = dispatch_.attributes ? *dispatch_.attributes : empty_attributes();
  return a.get_string(name, std::move(fallback));
}
StatusOr<std::vector<int64_t>> OpReader::get_ints(const std::string& name,
                                                  std::vector<int64_t> fallback) const {
  const Attributes& a = dispatch_.attributes ? *dispatch_.attributes : empty_attributes();
  return a.get_ints(name, std::move(fallback));
}

const Attributes& OpReader::attributes() const {
  return dispatch_.attributes ? *dispatch_.attributes : empty_attributes();
}

StatusOr<kernels::FusedActivation> OpReader::fused_activation() const {
  return kernels::read_fused_activation(dispatch_.attributes ? *dispatch_.attributes
                                                             : empty_attributes());
}

StatusOr<bool> OpReader::relu_activation() const {
  return kernels::read_fused_relu(dispatch_.attributes ? *dispatch_.attributes
                                                       : empty_attributes());
}

StatusOr<Window> read_window(const OpReader& op, std::span<const int64_t> input_spatial,
                             std::span<const int64_t> kernel_from_weights, bool allow_dilations) {
  const size_t r = input_spatial.size();
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, op.get_string("auto_pad", "NOTSET"));
  std::optional<std::vector<int64_t>> resolved_pads;
  if (auto_pad != "NOTSET") {
    kernels::WindowOptions options;
    if (!kernel_from_weights.empty()) {
      options.kernel_from_weights =
          std::vector<int64_t>(kernel_from_weights.begin(), kernel_from_weights.end());
    }
    options.allow_ceil_mode = true;
    KILN_ASSIGN_OR_RETURN(kernels::WindowGeometry g,
                          kernels::parse_window_geometry(op.attributes(), r, options));
    const Shape spatial =
        shape_from_concrete(ConcreteShape(input_spatial.begin(), input_spatial.end()));
    KILN_ASSIGN_OR_RETURN(resolved_pads, kernels::explicit_pads(g, spatial));
  }
  Window w;
  std::vector<int64_t> from_weights(kernel_from_weights.begin(), kernel_from_weights.end());
  KILN_ASSIGN_OR_RETURN(w.kernel, op.get_ints("kernel_shape", from_weights));
  if (w.kernel.size() != r) {
    if (w.kernel.empty()) return invalid_argument("attribute 'kernel_shape' is required");
    return invalid_argument("attribute 'kernel_shape' must have {} values, got {}", r,
                            w.kernel.size());
  }
  if (!from_weights.empty() && w.kernel != from_weights) {
    return invalid_argument("attribute 'kernel_shape' [{}] disagrees with the weights' [{}]",
                            fmt::join(w.kernel, ","), fmt::join(from_weights, ","));
  }
  KILN_ASSIGN_OR_RETURN(w.strides, op.get_ints("strides", std::vector<int64_t>(r, 1)));
  KILN_ASSIGN_OR_RETURN(w.dilations, op.get_ints("dilations", std::vector<int64_t>(r, 1)));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                        op.get_ints("pads", std::vector<int64_t>(2 * r, 0)));
  if (resolved_pads) pads = std::move(*resolved_pads);
  if (w.strides.size() != r) {
    return invalid_argument("attribute 'strides' must have {} values, got {}", r, w.strides.size());
  }
  if (w.dilations.size() != r) {
    return invalid_argument("attribute 'dilations' must have {} values, got {}", r,
                            w.dilations.size());
  }
  if (pads.size() != 2 * r) {
    return invalid_argument("attribute 'pads' must have {} values, got {}", 2 * r, pads.size());
  }
  for (size_t i = 0; i < r; ++i) {
    if (w.kernel[i] < 1)
      return invalid_argument("kernel dim {} is {}, must be >= 1", i, w.kernel[i]);
    if (w.strides[i] < 1) return invalid_argument("stride {} is {}, must be >= 1", i, w.strides[i]);
    if (w.dilations[i] < 1) {
      return invalid_argument("dilation {} is {}, must be >= 1", i, w.dilations[i]);
    }
    if (!allow_dilations && w.dilations[i] != 1) {
      return unimplemented("dilations other than 1 are not supported for this op");
    }
    if (pads[i] < 0 || pads[r + i] < 0) {
      return unimplemented("negative pads are not supported");
    }
  }
  // Bounded so that output-size arithmetic on any real dim cannot overflow.
  constexpr int64_t kLimit = kernels::kMaxWindowAttribute;
  for (const auto& [name, values] :
       {std::pair<const char*, const std::vector<int64_t>&>{"kernel_shape", w.kernel},
        {"strides", w.strides},
        {"dilations", w.dilations},
        {"pads", pads}}) {
    for (int64_t v : values) {
      if (v > kLimit) {
        return invalid_argument("attribute '{}' value {} is over the limit of {}", name, v, kLimit);
      }
    }
  }
  w.pads_begin.assign(pads.begin(), pads.begin() + static_cast<ptrdiff_t>(r));
  w.pads_end.assign(pads.begin() + static_cast<ptrdiff_t>(r), pads.end());
  return w;
}

int64_t window_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                           int64_t pad_begin, int64_t pad_end, bool ceil_mode) {
  const int64_t span = in + pad_begin + pad_end - (dilation * (kernel - 1) + 1);
  if (span < 0) return 0;
  if (!ceil_mode) return span / stride + 1;
  const int64_t out = (span + stride - 1) / stride + 1;
  // A last window that would start in the end padding is dropped (ONNX, ONNX Runtime, PyTorch;
  // kernels/conv_geometry.h infers the same).
  return (out - 1) * stride >= in + pad_begin ? out - 1 : out;
}

}  // namespace kiln::hal::cpu
