// Signal processing ops (opset 17): DFT, STFT and MelWeightMatrix.
//
// A signal's last dim holds one value per sample (real, size 1) or two (real and imaginary parts,
// size 2); DFT and STFT outputs are complex ([..., 2]). Transforms run in double through
// kernels/fft.h (O(n log n) for every length) and are rounded once to the output dtype. Lengths
// that decide output sizes (DFT's dft_length, STFT's frame_step and frame_length, MelWeightMatrix's
// num_mel_bins and dft_length) must be known at compile time (OpDef::compile_time_inputs); the
// kernels read them again from their buffers and report a Status if they differ from the sizes the
// kernel was made for. As in the ONNX reference implementation, `onesided` keeps the first
// floor(n / 2) + 1 bins of the full transform, for complex input too.
#include <cmath>
#include <complex>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "kiln/kernels/dtype_dispatch.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/fft.h"
#include "kiln/kernels/infer_util.h"

namespace kiln::kernels {
namespace {

using Complex = std::complex<double>;

// A 0/1 attribute.
StatusOr<bool> flag_attribute(const Attributes& a, const std::string& name, int64_t fallback) {
  KILN_ASSIGN_OR_RETURN(int64_t v, a.get_int(name, fallback));
  if (v != 0 && v != 1) return invalid_argument("attribute '{}' must be 0 or 1, got {}", name, v);
  return v == 1;
}

// The last dim of a signal: 1 (real) or 2 (complex).
Status check_components(const ValueType& x, size_t index, std::string_view name) {
  const std::string label = input_label(index, name);
  KILN_ASSIGN_OR_RETURN(int64_t c,
                        require_constant_dim(x.shape.back(), fmt::format("{} last dim", label)));
  if (c != 1 && c != 2) {
    return invalid_argument("{} last dim must be 1 (real) or 2 (complex), got {}", label, c);
  }
  return ok_status();
}

// A positive length given by integer scalar input `index` (i32 or i64) and known at compile
// time; nullopt when the input is absent.
StatusOr<std::optional<DimExpr>> length_input(const InferArgs& args, size_t index,
                                              std::string_view name) {
  const ValueType* type = optional_input(args, index);
  if (type == nullptr) return std::optional<DimExpr>();
  KILN_RETURN_IF_ERROR(check_dtype(*type, index, name, {DType::kI32, DType::kI64}));
  KILN_RETURN_IF_ERROR(check_scalar(*type, index, name));
  KILN_ASSIGN_OR_RETURN(auto values, input_dim_values(args, index, name));
  const std::string label = input_label(index, name);
  if (!values || values->size() != 1) return invalid_argument("{} must be a scalar", label);
  const DimExpr n = (*values)[0];
  if (auto c = n.constant_value(); c && *c <= 0) {
    return invalid_argument("{} = {} must be positive", label, *c);
  }
  KILN_RETURN_IF_ERROR(assume_nonnegative(n - DimExpr(1), fmt::format("{} - 1", label)));
  return std::optional<DimExpr>(n);
}

// A length that is the axis of a transform: n itself, or floor(n / 2) + 1 bins when onesided.
DimExpr bins_of(const DimExpr& n, bool onesided) {
  return onesided ? n.floor_div(2) + DimExpr(1) : n;
}
int64_t bins_of(int64_t n, bool onesided) { return onesided ? n / 2 + 1 : n; }

// The value of an integer scalar buffer (i32 or i64, as infer checked).
int64_t scalar_int(const ConstBuffer& b) {
  return b.dtype == DType::kI32 ? int64_t{b.as<int32_t>()[0]} : b.as<int64_t>()[0];
}

// The value of a floating-point scalar buffer.
double scalar_float(const ConstBuffer& b) {
  return visit_dtype(b.dtype, [&]<typename T>() -> double {
    if constexpr (is_float_storage_v<T>) {
      return static_cast<double>(load(b.as<T>(), 0));
    } else {
      return 0;  // infer accepts float dtypes only
    }
  });
}

// The longest transform a kernel plans (its twiddle tables take 16 bytes per point, Bluestein's
// about 64): beyond it make() refuses rather than allocate without bound.
constexpr int64_t kMaxTransformLength = int64_t{1} << 26;

Status check_transform_length(int64_t n, std::string_view what) {
  if (n <= 0) return invalid_argument("the {} must be positive, got {}", what, n);
  if (n > kMaxTransformLength) {
    return unimplemented("the {} {} is above kiln's limit of {} points", what, n,
                         kMaxTransformLength);
  }
  return ok_status();
}

// The plan for length n: `planned` when it has that length, else a new one kept in `local`.
StatusOr<const FftPlan*> plan_for(int64_t n, const FftPlan& planned,
                                  std::unique_ptr<FftPlan>& local) {
  if (planned.size() == n) return &planned;
  KILN_RETURN_IF_ERROR(check_transform_length(n, "transform length"));
  local = std::make_unique<FftPlan>(n);
  return local.get();
}

// Rough cost of `lines` transforms of length n, for the CPU thread policy.
double transform_cost(double lines, int64_t n) {
  return lines * static_cast<double>(n) * std::ceil(std::log2(static_cast<double>(n) + 1)) * 4;
}

// ---- DFT(input, dft_length?) ----

struct DftOptions {
  int64_t axis = 1;  // non-negative, below the last dim
  bool inverse = false;
  bool onesided = false;
};

// The attributes, with the axis made non-negative for an input of `rank` (the last dim holds the
// real and imaginary parts and is not an axis).
StatusOr<DftOptions> read_dft_options(const Attributes& a, int64_t rank) {
  KILN_RETURN_IF_ERROR(check_known_attributes(a, {"axis", "inverse", "onesided"}));
  DftOptions o;
  KILN_ASSIGN_OR_RETURN(int64_t axis, a.get_int("axis", 1));
  if (axis < -rank || axis > rank - 2 || axis == -1) {
    return invalid_argument(
        "attribute 'axis' = {} must be in [{}, -2] or [0, {}] for an input of rank {} (its last "
        "dim holds the real and imaginary parts)",
        axis, -rank, rank - 2, rank);
  }
  o.axis = axis < 0 ? axis + rank : axis;
  KILN_ASSIGN_OR_RETURN(o.inverse, flag_attribute(a, "inverse", 0));
  KILN_ASSIGN_OR_RETURN(o.onesided, flag_attribute(a, "onesided", 0));
  return o;
}

Status infer_dft(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "input"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "input", float_dtypes()));
  KILN_RETURN_IF_ERROR(check_rank_range(x, 0, "input", 2, 64));
  KILN_RETURN_IF_ERROR(check_components(x, 0, "input"));
  const auto rank = static_cast<int64_t>(x.shape.size());
  KILN_ASSIGN_OR_RETURN(DftOptions o, read_dft_options(args.attributes, rank));
  KILN_ASSIGN_OR_RETURN(std::optional<DimExpr> length, length_input(args, 1, "dft_length"));
  DimExpr n = length ? *length : x.shape[o.axis];
  if (!length) {
    const std::string what = fmt::format("input 0 'input' dim {} (the transformed axis)", o.axis);
    if (auto c = n.constant_value(); c && *c == 0) {
      return invalid_argument("{} must not be empty", what);
    }
    KILN_RETURN_IF_ERROR(assume_nonnegative(n - DimExpr(1), fmt::format("{} - 1", what)));
  }
  Shape out = x.shape;
  out[o.axis] = bins_of(n, o.onesided);
  out.back() = DimExpr(2);
  args.outputs = {ValueType{x.dtype, std::move(out)}};
  return ok_status();
}

// Transforms every line along the axis: input [outer, in_length, inner, components], output
// [outer, out_length, inner, 2]. The input line is truncated or zero-padded to the transform
// length n (dft_length, else in_length); the inverse is scaled by 1 / n.
class DftKernel : public Kernel {
 public:
  DftKernel(int64_t outer, int64_t in_length, int64_t inner, int64_t components, int64_t out_length,
            DftOptions options, int64_t planned_n)
      : outer_(outer),
        in_length_(in_length),
        inner_(inner),
        components_(components),
        out_length_(out_length),
        options_(options),
        plan_(planned_n) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    int64_t n = in_length_;
    if (in.size() > 1 && in[1].data != nullptr) {
      n = scalar_int(in[1]);
      if (n <= 0 || bins_of(n, options_.onesided) != out_length_) {
        return invalid_argument(
            "input 1 'dft_length' = {} does not give the {} output bins the kernel was made for", n,
            out_length_);
      }
    }
    std::unique_ptr<FftPlan> local;
    KILN_ASSIGN_OR_RETURN(const FftPlan* plan, plan_for(n, plan_, local));
    const double scale = options_.inverse ? 1.0 / static_cast<double>(n) : 1.0;
    const int64_t copied = std::min(n, in_length_);
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (is_float_storage_v<T>) {
        const T* x = in[0].as<T>();
        T* y = out[0].as<T>();
        parallel_rows(outer_ * inner_, n * 8, [&](int64_t line) {
          const int64_t o = line / inner_;
          const int64_t i = line % inner_;
          std::vector<Complex> signal(static_cast<size_t>(n), Complex(0, 0));
          std::vector<Complex> spectrum(static_cast<size_t>(n));
          for (int64_t j = 0; j < copied; ++j) {
            const int64_t at = ((o * in_length_ + j) * inner_ + i) * components_;
            const double re = static_cast<double>(load(x, at));
            const double im = components_ == 2 ? static_cast<double>(load(x, at + 1)) : 0.0;
            signal[j] = Complex(re, im);
          }
          plan->run(signal.data(), spectrum.data(), options_.inverse);
          for (int64_t k = 0; k < out_length_; ++k) {
            const int64_t at = ((o * out_length_ + k) * inner_ + i) * 2;
            store(y, at, static_cast<compute_t<T>>(spectrum[k].real() * scale));
            store(y, at + 1, static_cast<compute_t<T>>(spectrum[k].imag() * scale));
          }
        });
      }
      return ok_status();
    });
  }

 private:
  int64_t outer_, in_length_, inner_, components_, out_length_;
  DftOptions options_;
  FftPlan plan_;
};

StatusOr<std::unique_ptr<Kernel>> make_dft(const MakeArgs& args) {
  const ConcreteShape x = args.input_dims(0);
  const ConcreteShape y = args.output_dims(0);
  const auto rank = static_cast<int64_t>(x.size());
  KILN_ASSIGN_OR_RETURN(DftOptions o, read_dft_options(args.attributes, rank));
  const int64_t in_length = x[o.axis];
  const int64_t out_length = y[o.axis];
  // The transform length: dft_length when it is a constant here, else what the output implies
  // (run() checks the value it reads).
  int64_t n = o.onesided ? std::max<int64_t>(2 * (out_length - 1), 1) : out_length;
  const bool has_length = args.inputs.size() > 1 && args.inputs[1].has_value();
  if (!has_length) {
    n = in_length;
  } else if (args.constants.size() > 1 && args.constants[1] != nullptr) {
    n = element_as_int64(*args.constants[1], 0);
  }
  KILN_RETURN_IF_ERROR(check_transform_length(n, "DFT length"));
  return std::unique_ptr<Kernel>(std::make_unique<DftKernel>(
      product(std::span(x).first(o.axis)), in_length,
      product(std::span(x).subspan(o.axis + 1, rank - o.axis - 2)), x.back(), out_length, o, n));
}

double dft_multiply_adds(const Attributes& attributes, std::span<const ConcreteShape* const> inputs,
                         std::span<const ConcreteShape* const> outputs) {
  const ConcreteShape* x = dims_at(inputs, 0);
  const ConcreteShape* y = dims_at(outputs, 0);
  if (x == nullptr || y == nullptr || x->size() != y->size() || x->size() < 2) return 0;
  auto o = read_dft_options(attributes, static_cast<int64_t>(x->size()));
  if (!o.ok() || (*x)[o->axis] == 0) return 0;
  const double lines = product_as_double(*x) / static_cast<double>(x->back() * (*x)[o->axis]);
  return transform_cost(lines, std::max((*x)[o->axis], (*y)[o->axis]));
}

// ---- STFT(signal, frame_step, window?, frame_length?) ----

Status infer_stft(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"onesided"}));
  KILN_ASSIGN_OR_RETURN(bool onesided, flag_attribute(args.attributes, "onesided", 1));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 4));
  KILN_ASSIGN_OR_RETURN(ValueType signal, required_input(args, 0, "signal"));
  KILN_RETURN_IF_ERROR(check_dtype(signal, 0, "signal", float_dtypes()));
  KILN_RETURN_IF_ERROR(check_rank(signal, 0, "signal", 3));
  KILN_RETURN_IF_ERROR(check_components(signal, 0, "signal"));
  KILN_ASSIGN_OR_RETURN(ValueType step_type, required_input(args, 1, "frame_step"));
  KILN_ASSIGN_OR_RETURN(std::optional<DimExpr> step_value, length_input(args, 1, "frame_step"));
  KILN_ASSIGN_OR_RETURN(int64_t step, require_constant_dim(*step_value, "input 1 'frame_step'"));
  const ValueType* window = optional_input(args, 2);
  if (window != nullptr) {
    KILN_RETURN_IF_ERROR(check_same_dtype(*window, 2, "window", signal.dtype, "input 0 'signal'"));
    KILN_RETURN_IF_ERROR(check_rank(*window, 2, "window", 1));
  }
  if (const ValueType* t = optional_input(args, 3)) {
    KILN_RETURN_IF_ERROR(
        check_same_dtype(*t, 3, "frame_length", step_type.dtype, "input 1 'frame_step'"));
  }
  KILN_ASSIGN_OR_RETURN(std::optional<DimExpr> frame_length, length_input(args, 3, "frame_length"));
  const DimExpr& length = signal.shape[1];
  DimExpr n = length;
  if (frame_length) {
    n = *frame_length;
    if (window != nullptr) {
      KILN_RETURN_IF_ERROR(check_dims_equal(window->shape[0], n,
                                            "input 2 'window' length (input 3 'frame_length')"));
    }
  } else if (window != nullptr) {
    n = window->shape[0];
    if (auto c = n.constant_value(); c && *c == 0) {
      return invalid_argument("input 2 'window' must not be empty");
    }
  }
  const DimExpr rest = length - n;
  if (auto c = rest.constant_value(); c && *c < 0) {
    return invalid_argument("the frame length {} is longer than input 0 'signal' ({} samples)",
                            n.to_string(), length.to_string());
  }
  KILN_RETURN_IF_ERROR(assume_nonnegative(rest, "input 0 'signal' length minus the frame length"));
  args.outputs = {ValueType{signal.dtype, Shape{signal.shape[0], rest.floor_div(step) + DimExpr(1),
                                                bins_of(n, onesided), DimExpr(2)}}};
  return ok_status();
}

// out[b, f, k] = DFT_k(x[b, f * step + j] * window[j], j in [0, n)), k in [0, bins).
class StftKernel : public Kernel {
 public:
  StftKernel(int64_t batch, int64_t length, int64_t components, int64_t frames, int64_t bins,
             bool onesided, int64_t planned_n)
      : batch_(batch),
        length_(length),
        components_(components),
        frames_(frames),
        bins_(bins),
        onesided_(onesided),
        plan_(planned_n) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t step = scalar_int(in[1]);
    const bool has_window = in.size() > 2 && in[2].data != nullptr;
    int64_t n = length_;
    if (has_window) {
      n = in[2].dims[0];
    } else if (in.size() > 3 && in[3].data != nullptr) {
      n = scalar_int(in[3]);
    }
    if (step <= 0 || n <= 0 || n > length_ || (length_ - n) / step + 1 != frames_ ||
        bins_of(n, onesided_) != bins_) {
      return invalid_argument(
          "input 1 'frame_step' = {} and frame length {} do not give the {} frames of {} bins "
          "the kernel was made for",
          step, n, frames_, bins_);
    }
    std::unique_ptr<FftPlan> local;
    KILN_ASSIGN_OR_RETURN(const FftPlan* plan, plan_for(n, plan_, local));
    return visit_dtype(in[0].dtype, [&]<typename T>() -> Status {
      if constexpr (is_float_storage_v<T>) {
        const T* x = in[0].as<T>();
        const T* w = has_window ? in[2].as<T>() : nullptr;
        T* y = out[0].as<T>();
        parallel_rows(batch_ * frames_, n * 8, [&](int64_t job) {
          const int64_t b = job / frames_;
          const int64_t f = job % frames_;
          std::vector<Complex> frame(static_cast<size_t>(n));
          std::vector<Complex> spectrum(static_cast<size_t>(n));
          for (int64_t j = 0; j < n; ++j) {
            const int64_t at = (b * length_ + f * step + j) * components_;
            const double weight = w != nullptr ? static_cast<double>(load(w, j)) : 1.0;
            const double re = static_cast<double>(load(x, at));
            const double im = components_ == 2 ? static_cast<double>(load(x, at + 1)) : 0.0;
            frame[j] = Complex(re * weight, im * weight);
          }
          plan->run(frame.data(), spectrum.data(), false);
          T* row = y + job * bins_ * 2;
          for (int64_t k = 0; k < bins_; ++k) {
            store(row, 2 * k, static_cast<compute_t<T>>(spectrum[k].real()));
            store(row, 2 * k + 1, static_cast<compute_t<T>>(spectrum[k].imag()));
          }
        });
      }
      return ok_status();
    });
  }

 private:
  int64_t batch_, length_, components_, frames_, bins_;
  bool onesided_;
  FftPlan plan_;
};

StatusOr<std::unique_ptr<Kernel>> make_stft(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(bool onesided, flag_attribute(args.attributes, "onesided", 1));
  const ConcreteShape x = args.input_dims(0);
  const ConcreteShape y = args.output_dims(0);
  // The frame length: the window's, a constant frame_length, else the signal's (run() checks
  // what it reads).
  int64_t n = x[1];
  if (args.inputs.size() > 2 && args.inputs[2].has_value()) {
    n = args.input_dims(2)[0];
  } else if (args.constants.size() > 3 && args.constants[3] != nullptr) {
    n = element_as_int64(*args.constants[3], 0);
  } else if (args.inputs.size() > 3 && args.inputs[3].has_value() && !onesided) {
    n = y[2];
  }
  KILN_RETURN_IF_ERROR(check_transform_length(n, "STFT frame length"));
  return std::unique_ptr<Kernel>(
      std::make_unique<StftKernel>(x[0], x[1], x[2], y[1], y[2], onesided, n));
}

double stft_multiply_adds(const Attributes& attributes, std::span<const ConcreteShape* const>,
                          std::span<const ConcreteShape* const> outputs) {
  const ConcreteShape* y = dims_at(outputs, 0);
  if (y == nullptr || y->size() != 4) return 0;
  auto onesided = flag_attribute(attributes, "onesided", 1);
  const int64_t n = onesided.ok() && *onesided ? 2 * ((*y)[2] - 1) : (*y)[2];
  return transform_cost(static_cast<double>((*y)[0] * (*y)[1]), n);
}

// ---- MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
//                     upper_edge_hertz) ----
// As the ONNX reference defines it: num_mel_bins + 2 points equally spaced on the mel scale
// mel(f) = 2595 log10(1 + f / 700) from mel(lower) in steps of (mel(upper) - mel(lower)) /
// (num_mel_bins + 2), each mapped back to hertz and to the DFT bin floor((dft_length + 1) * f /
// sample_rate); mel band i is the triangle rising from point i to point i + 1 (peak 1) and falling
// to point i + 2. Output [floor(dft_length / 2) + 1, num_mel_bins] in `output_datatype` (default
// f32; integer types truncate).

StatusOr<DType> mel_output_dtype(const Attributes& a) {
  KILN_RETURN_IF_ERROR(check_known_attributes(a, {"output_datatype"}));
  KILN_ASSIGN_OR_RETURN(int64_t code, a.get_int("output_datatype", 1));
  KILN_ASSIGN_OR_RETURN(DType dtype, dtype_from_onnx_code(code, "output_datatype"));
  if (dtype == DType::kBool) {
    return invalid_argument("attribute 'output_datatype' = {} (bool) is not a numeric type", code);
  }
  return dtype;
}

Status infer_mel_weight_matrix(InferArgs& args) {
  KILN_ASSIGN_OR_RETURN(DType dtype, mel_output_dtype(args.attributes));
  KILN_RETURN_IF_ERROR(check_arity(args, 5, 5));
  const char* names[] = {"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz",
                         "upper_edge_hertz"};
  std::vector<ValueType> types;
  for (size_t i = 0; i < 5; ++i) {
    KILN_ASSIGN_OR_RETURN(ValueType t, required_input(args, i, names[i]));
    if (i < 3) {
      KILN_RETURN_IF_ERROR(check_dtype(t, i, names[i], {DType::kI32, DType::kI64}));
    } else {
      KILN_RETURN_IF_ERROR(check_dtype(t, i, names[i], float_dtypes()));
    }
    if (i == 1 || i == 2 || i == 4) {
      const size_t first = i == 4 ? 3 : 0;
      KILN_RETURN_IF_ERROR(
          check_same_dtype(t, i, names[i], types[first].dtype, input_label(first, names[first])));
    }
    KILN_RETURN_IF_ERROR(check_scalar(t, i, names[i]));
    types.push_back(t);
  }
  KILN_ASSIGN_OR_RETURN(std::optional<DimExpr> mel_bins, length_input(args, 0, "num_mel_bins"));
  KILN_ASSIGN_OR_RETURN(std::optional<DimExpr> dft_length, length_input(args, 1, "dft_length"));
  args.outputs = {ValueType{dtype, Shape{bins_of(*dft_length, true), *mel_bins}}};
  return ok_status();
}

class MelWeightMatrixKernel : public Kernel {
 public:
  MelWeightMatrixKernel(int64_t rows, int64_t mel_bins) : rows_(rows), mel_bins_(mel_bins) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t mel_bins = scalar_int(in[0]);
    const int64_t dft_length = scalar_int(in[1]);
    if (mel_bins != mel_bins_ || dft_length <= 0 || bins_of(dft_length, true) != rows_) {
      return invalid_argument(
          "inputs 0 'num_mel_bins' = {} and 1 'dft_length' = {} do not give the [{}, {}] output "
          "the kernel was made for",
          mel_bins, dft_length, rows_, mel_bins_);
    }
    const int64_t rate = scalar_int(in[2]);
    if (rate <= 0) return invalid_argument("input 2 'sample_rate' = {} must be positive", rate);
    const double lower = scalar_float(in[3]);
    const double upper = scalar_float(in[4]);
    if (!(lower >= 0) || !(upper >= lower) || !std::isfinite(upper)) {
      return invalid_argument(
          "input 3 'lower_edge_hertz' = {} and input 4 'upper_edge_hertz' = {} must be finite "
          "with 0 <= lower <= upper",
          lower, upper);
    }
    auto to_mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
    const double low = to_mel(lower);
    const double step = (to_mel(upper) - low) / static_cast<double>(mel_bins + 2);
    std::vector<int64_t> points(static_cast<size_t>(mel_bins + 2));
    for (int64_t i = 0; i < mel_bins + 2; ++i) {
      const double mel = static_cast<double>(i) * step + low;
      const double hz = 700 * (std::pow(10.0, mel / 2595) - 1);
      points[i] = static_cast<int64_t>(
          std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(rate)));
    }
    // Points never decrease; the last band writes rows up to points[mel_bins] and below
    // points[mel_bins + 1].
    if (points[mel_bins] >= rows_ || points[mel_bins + 1] > rows_) {
      return invalid_argument(
          "input 4 'upper_edge_hertz' = {} reaches past the {} bins of a {}-point DFT at sample "
          "rate {}",
          upper, rows_, dft_length, rate);
    }
    std::vector<double> w(static_cast<size_t>(rows_ * mel_bins), 0.0);
    for (int64_t i = 0; i < mel_bins; ++i) {
      const int64_t left = points[i], center = points[i + 1], right = points[i + 2];
      if (center == left) {
        w[center * mel_bins + i] = 1;
      } else {
        for (int64_t j = left; j <= center; ++j) {
          w[j * mel_bins + i] = static_cast<double>(j - left) / static_cast<double>(center - left);
        }
      }
      for (int64_t j = center; j < right; ++j) {
        w[j * mel_bins + i] = static_cast<double>(right - j) / static_cast<double>(right - center);
      }
    }
    visit_dtype(out[0].dtype, [&]<typename T>() {
      if constexpr (!std::is_same_v<T, Bool>) {
        T* y = out[0].as<T>();
        for (size_t e = 0; e < w.size(); ++e) {
          if constexpr (is_float_storage_v<T>) {
            store(y, static_cast<int64_t>(e), static_cast<compute_t<T>>(w[e]));
          } else {
            y[e] = static_cast<T>(w[e]);
          }
        }
      }
    });
    return ok_status();
  }

 private:
  int64_t rows_, mel_bins_;
};

StatusOr<std::unique_ptr<Kernel>> make_mel_weight_matrix(const MakeArgs& args) {
  const ConcreteShape y = args.output_dims(0);
  return std::unique_ptr<Kernel>(std::make_unique<MelWeightMatrixKernel>(y[0], y[1]));
}

}  // namespace

void register_signal_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{.op_type = "DFT",
                        .infer = infer_dft,
                        .make = make_dft,
                        .compile_time_inputs = 1u << 1,
                        .multiply_adds = dft_multiply_adds});
  table.push_back(OpDef{.op_type = "STFT",
                        .infer = infer_stft,
                        .make = make_stft,
                        .compile_time_inputs = (1u << 1) | (1u << 3),
                        .multiply_adds = stft_multiply_adds});
  table.push_back(OpDef{"MelWeightMatrix", infer_mel_weight_matrix, make_mel_weight_matrix, 0b11u});
}

}  // namespace kiln::kernels
