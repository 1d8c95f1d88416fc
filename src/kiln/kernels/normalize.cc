// Normalizations: Softmax, LogSoftmax, Hardmax (opset 13: along one axis of any rank; opsets
// 1-12: the input coerced to 2-D [prod(dims before axis), prod(dims from axis)], default axis 1,
// each row normalized; the importer rewrites the old form where the two differ),
// LayerNormalization, InstanceNormalization, LpNormalization, LRN, MeanVarianceNormalization and
// BatchNormalization (inference and training mode).
//
// Every statistic (max, sum of exponentials, mean, variance, norm) and every output is computed
// in double whatever the storage type (f16, bf16, f32, f64), then rounded once to the output
// type. Each output row is reduced sequentially in index order, and rows are split across
// threads, so results do not depend on the thread count or the batch size.
//
// Choices where ONNX leaves room or its reference is fragile:
//   - Softmax subtracts the row maximum first (no overflow for large inputs); Hardmax marks the
//     first maximum (numpy's argmax; a NaN counts as the maximum).
//   - LayerNormalization: variance is the mean of squared deviations (two passes); stash_type 1
//     only (Mean and InvStdDev are f32). Scale and B may be any shape unidirectionally
//     broadcastable to X.shape[axis:].
//   - LpNormalization: a row whose norm is 0 gives 0 (as ONNX Runtime), not 0/0.
//   - MeanVarianceNormalization: (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9) as the ONNX
//     function body, with a negative rounding residue of the variance clamped to 0.
//   - BatchNormalization: parameters may have float dtypes other than X's (opset 15); kiln's
//     fused attribute kiln_activation = "relu" applies ReLU last; opset 7's spatial = 0 takes
//     per-feature parameters of shape X.shape[1:]. training_mode = 1 normalizes with the batch's
//     mean and population variance (ONNX's reference) and gives running_mean and running_var
//     (input * momentum + batch * (1 - momentum), input_mean's dtype) as outputs 1 and 2.
#include <cmath>
#include <limits>

#include "kiln/kernels/activation.h"
#include "kiln/kernels/broadcast.h"
#include "kiln/kernels/dtype_dispatch.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/op_attributes.h"
#include "kiln/kernels/reduce_geometry.h"
#include "kiln/kernels/softmax_lane.h"

namespace kiln::kernels {
namespace {

// Any numeric buffer as doubles (parameters: small).
std::vector<double> to_doubles(const ConstBuffer& b) {
  const int64_t n = b.data == nullptr ? 0 : b.element_count();
  std::vector<double> out(static_cast<size_t>(n), 0.0);
  visit_dtype(b.dtype, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, Bool>) {
      const T* p = b.as<T>();
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(load(p, i));
    }
  });
  return out;
}

// Runs fn.template operator()<T>() for the float storage type of `dtype`.
template <typename F>
Status visit_float(DType dtype, F&& fn) {
  return visit_dtype(dtype, [&]<typename T>() -> Status {
    if constexpr (is_float_storage_v<T>) {
      fn.template operator()<T>();
      return ok_status();
    } else {
      return internal_error("no float kernel instance for {}", dtype_name(dtype));
    }
  });
}

// outer x n x inner around one axis.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisSplit split_at(const ConcreteShape& dims, int64_t axis) {
  return {product(std::span(dims).first(axis)), dims[axis],
          product(std::span(dims).subspan(axis + 1))};
}

StatusOr<ValueType> float_input(const InferArgs& args, size_t index, std::string_view name) {
  KILN_ASSIGN_OR_RETURN(ValueType t, required_input(args, index, name));
  KILN_RETURN_IF_ERROR(check_dtype(t, index, name, float_dtypes()));
  return t;
}

// ---- Softmax, LogSoftmax, Hardmax, LpNormalization: one lane at a time along an axis.

enum class Lane { kSoftmax, kLogSoftmax, kHardmax, kLp };

struct LaneOptions {
  int64_t axis = -1;
  int64_t p = 2;
};

// kCoerce2d: the opset 1-12 form of Softmax, LogSoftmax and Hardmax (default axis 1).
template <Lane L, bool kCoerce2d = false>
StatusOr<LaneOptions> read_lane_options(const Attributes& a, int64_t rank) {
  LaneOptions o;
  if constexpr (L == Lane::kLp) {
    KILN_RETURN_IF_ERROR(check_known_attributes(a, {"axis", "p"}));
    KILN_ASSIGN_OR_RETURN(o.p, a.get_int("p", 2));
    if (o.p != 1 && o.p != 2) return invalid_argument("attribute 'p' must be 1 or 2, got {}", o.p);
  } else {
    KILN_RETURN_IF_ERROR(check_known_attributes(a, {"axis"}));
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, a.get_int("axis", kCoerce2d ? 1 : -1));
  KILN_ASSIGN_OR_RETURN(o.axis, normalize_axis(axis, rank, "attribute 'axis'"));
  return o;
}

template <Lane L>
class LaneKernel : public Kernel {
 public:
  LaneKernel(AxisSplit s, int64_t p) : s_(s), p_(p) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_float(in[0].dtype, [&]<typename T>() {
      const T* x = in[0].as<T>();
      T* y = out[0].as<T>();
      const int64_t n = s_.n, inner = s_.inner;
      parallel_ranges(s_.outer * inner, n, [&](int64_t begin, int64_t end) {
        for (int64_t lane = begin; lane < end; ++lane) {
          const int64_t base = (lane / inner) * n * inner + lane % inner;
          auto at = [&](int64_t k) { return base + k * inner; };
          auto v = [&](int64_t k) { return static_cast<double>(load(x, at(k))); };
          auto put = [&](int64_t k, double r) { store(y, at(k), static_cast<compute_t<T>>(r)); };
          if constexpr (L == Lane::kHardmax) {
            int64_t best = 0;
            for (int64_t k = 1; k < n; ++k) {
              const double b = v(best), c = v(k);
              if (!std::isnan(b) && (std::isnan(c) || c > b)) best = k;
            }
            for (int64_t k = 0; k < n; ++k) put(k, k == best ? 1.0 : 0.0);
          } else if constexpr (L == Lane::kLp) {
            double norm = 0;
            for (int64_t k = 0; k < n; ++k) norm += p_ == 1 ? std::fabs(v(k)) : v(k) * v(k);
            if (p_ == 2) norm = std::sqrt(norm);
            for (int64_t k = 0; k < n; ++k) put(k, norm == 0 ? 0.0 : v(k) / norm);
          } else if constexpr (L == Lane::kSoftmax) {
            softmax_lane(n, v, put);
          } else {
            const SoftmaxStats stats = softmax_stats(n, v);
            const double shift = stats.max + std::log(stats.sum);
            for (int64_t k = 0; k < n; ++k) put(k, v(k) - shift);
          }
        }
      });
    });
  }

 private:
  AxisSplit s_;
  int64_t p_;
};

template <Lane L, bool kCoerce2d = false>
Status infer_lane(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, float_input(args, 0, "input"));
  KILN_RETURN_IF_ERROR(
      (read_lane_options<L, kCoerce2d>(args.attributes, static_cast<int64_t>(x.shape.size()))
           .status()));
  args.outputs = {x};
  return ok_status();
}

template <Lane L, bool kCoerce2d = false>
StatusOr<std::unique_ptr<Kernel>> make_lane(const MakeArgs& args) {
  const ConcreteShape dims = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(LaneOptions o, (read_lane_options<L, kCoerce2d>(
                                           args.attributes, static_cast<int64_t>(dims.size()))));
  const AxisSplit split = kCoerce2d ? AxisSplit{product(std::span(dims).first(o.axis)),
                                                product(std::span(dims).subspan(o.axis)), 1}
                                    : split_at(dims, o.axis);
  return std::unique_ptr<Kernel>(std::make_unique<LaneKernel<L>>(split, o.p));
}

// One definition of `op_type` for opsets 1-12 (coerced to 2-D) and one from opset 13.
template <Lane L>
void add_lane_versions(std::vector<OpDef>& table, std::string_view op_type) {
  table.push_back(OpDef{.op_type = op_type,
                        .infer = infer_lane<L, true>,
                        .make = make_lane<L, true>,
                        .since_version = 1});
  table.push_back(
      OpDef{.op_type = op_type, .infer = infer_lane<L>, .make = make_lane<L>, .since_version = 13});
}

// ---- LayerNormalization

// Checks that `p` (Scale or B) broadcasts unidirectionally to `block` (X.shape[axis:]).
Status check_broadcasts_to(const ValueType& p, size_t index, std::string_view name,
                           const Shape& block) {
  if (p.shape.size() > block.size()) {
    return invalid_argument("{} has rank {}, more than the {} normalized dims of input 0 'X'",
                            input_label(index, name), p.shape.size(), block.size());
  }
  const size_t lead = block.size() - p.shape.size();
  for (size_t d = 0; d < p.shape.size(); ++d) {
    if (p.shape[d] == DimExpr(1)) continue;
    KILN_RETURN_IF_ERROR(
        check_dims_equal(p.shape[d], block[lead + d],
                         fmt::format("{} dim {} (normalized dim {} of input 0 'X')",
                                     input_label(index, name), d, lead + d)));
  }
  return ok_status();
}

Status infer_layer_norm(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 3, 1, 3));
  KILN_ASSIGN_OR_RETURN(ValueType x, float_input(args, 0, "X"));
  const auto rank = static_cast<int64_t>(x.shape.size());
  KILN_ASSIGN_OR_RETURN(LayerNormOptions o, read_layer_norm_options(args.attributes, rank));
  const Shape block(x.shape.begin() + o.axis, x.shape.end());
  const char* names[] = {"X", "Scale", "B"};
  for (size_t i = 1; i < 3; ++i) {
    const ValueType* p = optional_input(args, i);
    if (p == nullptr) {
      if (i == 1) return invalid_argument("input 1 'Scale' is required");
      continue;
    }
    KILN_RETURN_IF_ERROR(check_same_dtype(*p, i, names[i], x.dtype, "input 0 'X'"));
    KILN_RETURN_IF_ERROR(check_broadcasts_to(*p, i, names[i], block));
  }
  Shape stats = x.shape;
  for (int64_t d = o.axis; d < rank; ++d) stats[d] = DimExpr(1);
  args.outputs = {x};
  for (size_t i = 1; i < args.output_count; ++i) args.outputs.push_back({DType::kF32, stats});
  return ok_status();
}

class LayerNormKernel : public Kernel {
 public:
  // `scale_index` / `bias_index`: flat parameter index per element of the normalized block;
  // empty when the parameter has the block's shape.
  LayerNormKernel(int64_t rows, int64_t block, double epsilon, std::vector<int64_t> scale_index,
                  std::vector<int64_t> bias_index)
      : rows_(rows),
        block_(block),
        epsilon_(epsilon),
        scale_index_(std::move(scale_index)),
        bias_index_(std::move(bias_index)) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const std::vector<double> scale = to_doubles(in[1]);
    const std::vector<double> bias = in.size() > 2 ? to_doubles(in[2]) : std::vector<double>{};
    float* mean_out = out.size() > 1 ? out[1].as<float>() : nullptr;  // null: absent
    float* inv_out = out.size() > 2 ? out[2].as<float>() : nullptr;
    return visit_float(in[0].dtype, [&]<typename T>() {
      const T* x = in[0].as<T>();
      T* y = out[0].as<T>();
      const int64_t b = block_;
      parallel_ranges(rows_, b, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const int64_t base = r * b;
          double mean = 0;
          for (int64_t j = 0; j < b; ++j) mean += static_cast<double>(load(x, base + j));
          mean /= static_cast<double>(b);
          double var = 0;
          for (int64_t j = 0; j < b; ++j) {
            const double d = static_cast<double>(load(x, base + j)) - mean;
            var += d * d;
          }
          var /= static_cast<double>(b);
          const double inv = 1.0 / std::sqrt(var + epsilon_);
          for (int64_t j = 0; j < b; ++j) {
            const double s = scale[scale_index_.empty() ? j : scale_index_[j]];
            const double c = bias.empty() ? 0.0 : bias[bias_index_.empty() ? j : bias_index_[j]];
            const double v = (static_cast<double>(load(x, base + j)) - mean) * inv * s + c;
            store(y, base + j, static_cast<compute_t<T>>(v));
          }
          if (mean_out != nullptr) mean_out[r] = static_cast<float>(mean);
          if (inv_out != nullptr) inv_out[r] = static_cast<float>(inv);
        }
      });
    });
  }

 private:
  int64_t rows_, block_;
  double epsilon_;
  std::vector<int64_t> scale_index_, bias_index_;
};

StatusOr<std::unique_ptr<Kernel>> make_layer_norm(const MakeArgs& args) {
  const ConcreteShape dims = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(
      LayerNormOptions o,
      read_layer_norm_options(args.attributes, static_cast<int64_t>(dims.size())));
  const ConcreteShape block(dims.begin() + o.axis, dims.end());
  auto index_of = [&](size_t i) {
    if (i >= args.inputs.size() || !args.inputs[i]) return std::vector<int64_t>{};
    const ConcreteShape p = args.input_dims(i);
    if (p == block) return std::vector<int64_t>{};
    return broadcast_index_map(p, block);
  };
  return std::unique_ptr<Kernel>(std::make_unique<LayerNormKernel>(
      product(std::span(dims).first(o.axis)), product(block), o.epsilon, index_of(1), index_of(2)));
}

// ---- InstanceNormalization and BatchNormalization: per-channel parameters of X [N, C, ...].

Status check_channel_param(const InferArgs& args, size_t index, std::string_view name,
                           const Shape& expected, std::string_view expected_what) {
  KILN_ASSIGN_OR_RETURN(ValueType p, float_input(args, index, name));
  if (p.shape.size() != expected.size()) {
    return invalid_argument("{} must have shape {} ({}), got {}", input_label(index, name),
                            shape_to_string(expected), expected_what, shape_to_string(p.shape));
  }
  for (size_t d = 0; d < expected.size(); ++d) {
    KILN_RETURN_IF_ERROR(check_dims_equal(
        p.shape[d], expected[d],
        fmt::format("{} dim {} ({})", input_label(index, name), d, expected_what)));
  }
  return ok_status();
}

StatusOr<ValueType> channels_input(const InferArgs& args, std::string_view name) {
  KILN_ASSIGN_OR_RETURN(ValueType x, float_input(args, 0, name));
  if (x.shape.size() < 2) {
    return invalid_argument("input 0 '{}' must have rank >= 2 ([N, C, ...]), got shape {}", name,
                            shape_to_string(x.shape));
  }
  return x;
}

Status infer_instance_norm(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"epsilon"}));
  KILN_RETURN_IF_ERROR(args.attributes.get_float("epsilon", 1e-5).status());
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 3));
  KILN_ASSIGN_OR_RETURN(ValueType x, channels_input(args, "input"));
  KILN_RETURN_IF_ERROR(check_channel_param(args, 1, "scale", {x.shape[1]}, "channels of input"));
  KILN_RETURN_IF_ERROR(check_channel_param(args, 2, "B", {x.shape[1]}, "channels of input"));
  args.outputs = {x};
  return ok_status();
}

class InstanceNormKernel : public Kernel {
 public:
  InstanceNormKernel(int64_t channels, int64_t planes, int64_t size, double epsilon)
      : channels_(channels), planes_(planes), size_(size), epsilon_(epsilon) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const std::vector<double> scale = to_doubles(in[1]);
    const std::vector<double> bias = to_doubles(in[2]);
    return visit_float(in[0].dtype, [&]<typename T>() {
      const T* x = in[0].as<T>();
      T* y = out[0].as<T>();
      parallel_ranges(planes_, size_, [&](int64_t begin, int64_t end) {
        for (int64_t p = begin; p < end; ++p) {
          const int64_t base = p * size_;
          const int64_t c = p % channels_;
          double mean = 0;
          for (int64_t j = 0; j < size_; ++j) mean += static_cast<double>(load(x, base + j));
          mean /= static_cast<double>(size_);
          double var = 0;
          for (int64_t j = 0; j < size_; ++j) {
            const double d = static_cast<double>(load(x, base + j)) - mean;
            var += d * d;
          }
          var /= static_cast<double>(size_);
          const double a = scale[c] / std::sqrt(var + epsilon_);
          for (int64_t j = 0; j < size_; ++j) {
            const double v = (static_cast<double>(load(x, base + j)) - mean) * a + bias[c];
            store(y, base + j, static_cast<compute_t<T>>(v));
          }
        }
      });
    });
  }

 private:
  int64_t channels_, planes_, size_;
  double epsilon_;
};

StatusOr<std::unique_ptr<Kernel>> make_instance_norm(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(double epsilon, args.attributes.get_float("epsilon", 1e-5));
  const ConcreteShape dims = args.input_dims(0);
  return std::unique_ptr<Kernel>(std::make_unique<InstanceNormKernel>(
      dims[1], dims[0] * dims[1], product(std::span(dims).subspan(2)), epsilon));
}

// BatchNormalization's attributes with its mode. read_batch_norm_attributes (op_attributes.h)
// is the inference contract the backends' fast paths read, and refuses training_mode = 1, so
// those decline a training dispatch and the portable kernel below runs it.
struct BatchNormMode {
  BatchNormAttributes o;
  bool training = false;
  double momentum = 0.9;
};

StatusOr<BatchNormMode> read_batch_norm_mode(const Attributes& a) {
  BatchNormMode m;
  KILN_ASSIGN_OR_RETURN(int64_t training, a.get_int("training_mode", 0));
  if (training != 0 && training != 1) {
    return invalid_argument("attribute 'training_mode' must be 0 or 1, got {}", training);
  }
  m.training = training == 1;
  if (m.training) {
    Attributes inference = a;
    inference.erase("training_mode");
    KILN_ASSIGN_OR_RETURN(m.o, read_batch_norm_attributes(inference));
  } else {
    KILN_ASSIGN_OR_RETURN(m.o, read_batch_norm_attributes(a));
  }
  KILN_ASSIGN_OR_RETURN(m.momentum, a.get_float("momentum", 0.9));
  return m;
}

Status infer_batch_norm(InferArgs& args) {
  KILN_ASSIGN_OR_RETURN(BatchNormMode m, read_batch_norm_mode(args.attributes));
  KILN_RETURN_IF_ERROR(check_arity(args, 5, 5, 1, 3));
  if (args.output_count > 1 && !m.training) {
    return invalid_argument(
        "{} outputs: the running statistics (outputs 1 and 2) exist only in training mode "
        "(training_mode = 1)",
        args.output_count);
  }
  KILN_ASSIGN_OR_RETURN(ValueType x, channels_input(args, "X"));
  const Shape expected =
      m.o.spatial ? Shape{x.shape[1]} : Shape(x.shape.begin() + 1, x.shape.end());
  const char* what = m.o.spatial ? "channels of X" : "X.shape[1:] for spatial = 0";
  const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) {
    KILN_RETURN_IF_ERROR(check_channel_param(args, i, names[i], expected, what));
  }
  args.outputs = {x};
  // running_mean and running_var: input_mean's dtype, the parameters' shape.
  const ValueType& mean = *args.inputs[3];
  for (size_t i = 1; i < args.output_count; ++i) {
    args.outputs.push_back(ValueType{mean.dtype, expected});
  }
  return ok_status();
}

class BatchNormKernel : public Kernel {
 public:
  // Parameter p of element i is at (i / size) % params: per channel (size = spatial size) or
  // per feature (size 1, params = C * spatial size).
  BatchNormKernel(int64_t params, int64_t size, BatchNormMode m)
      : params_(params), size_(size), m_(m) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const std::vector<double> scale = to_doubles(in[1]);
    const std::vector<double> bias = to_doubles(in[2]);
    std::vector<double> mean = to_doubles(in[3]);
    std::vector<double> var = to_doubles(in[4]);
    const int64_t rows = in[0].element_count() / std::max<int64_t>(size_, 1);
    if (m_.training) {
      // The batch's own statistics (population variance, as ONNX's reference), then the
      // running ones: input * momentum + batch * (1 - momentum).
      KILN_ASSIGN_OR_RETURN(BatchStats batch, batch_stats(in[0], rows));
      for (size_t i = 1; i < out.size() && i < 3; ++i) {
        if (out[i].data == nullptr) continue;
        const std::vector<double>& given = i == 1 ? mean : var;
        const std::vector<double>& seen = i == 1 ? batch.mean : batch.var;
        KILN_RETURN_IF_ERROR(visit_float(out[i].dtype, [&]<typename U>() {
          U* r = out[i].as<U>();
          for (size_t p = 0; p < given.size(); ++p) {
            store(r, static_cast<int64_t>(p),
                  static_cast<compute_t<U>>(given[p] * m_.momentum + seen[p] * (1 - m_.momentum)));
          }
        }));
      }
      mean = std::move(batch.mean);
      var = std::move(batch.var);
    }
    std::vector<double> a(scale.size());
    for (size_t p = 0; p < a.size(); ++p) a[p] = scale[p] / std::sqrt(var[p] + m_.o.epsilon);
    return visit_float(in[0].dtype, [&]<typename T>() {
      const T* x = in[0].as<T>();
      T* y = out[0].as<T>();
      parallel_ranges(rows, size_, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const int64_t p = r % params_;
          for (int64_t j = r * size_; j < (r + 1) * size_; ++j) {
            double v = (static_cast<double>(load(x, j)) - mean[p]) * a[p] + bias[p];
            if (m_.o.relu && v < 0) v = 0;
            store(y, j, static_cast<compute_t<T>>(v));
          }
        }
      });
    });
  }

 private:
  struct BatchStats {
    std::vector<double> mean, var;
  };
  // Mean and population variance of each parameter's elements (rows r with r % params == p),
  // two passes in index order.
  StatusOr<BatchStats> batch_stats(const ConstBuffer& xb, int64_t rows) const {
    BatchStats s{std::vector<double>(params_, 0.0), std::vector<double>(params_, 0.0)};
    const int64_t count = (rows / std::max<int64_t>(params_, 1)) * size_;
    KILN_RETURN_IF_ERROR(visit_float(xb.dtype, [&]<typename T>() {
      const T* x = xb.as<T>();
      parallel_ranges(params_, count, [&](int64_t begin, int64_t end) {
        for (int64_t p = begin; p < end; ++p) {
          double sum = 0;
          for (int64_t r = p; r < rows; r += params_) {
            for (int64_t j = r * size_; j < (r + 1) * size_; ++j) {
              sum += static_cast<double>(load(x, j));
            }
          }
          const double mean = sum / static_cast<double>(count);
          double squares = 0;
          for (int64_t r = p; r < rows; r += params_) {
            for (int64_t j = r * size_; j < (r + 1) * size_; ++j) {
              const double d = static_cast<double>(load(x, j)) - mean;
              squares += d * d;
            }
          }
          s.mean[p] = mean;
          s.var[p] = squares / static_cast<double>(count);
        }
      });
    }));
    return s;
  }

  int64_t params_, size_;
  BatchNormMode m_;
};

StatusOr<std::unique_ptr<Kernel>> make_batch_norm(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(BatchNormMode m, read_batch_norm_mode(args.attributes));
  const ConcreteShape dims = args.input_dims(0);
  const int64_t spatial_size = product(std::span(dims).subspan(2));
  if (m.o.spatial) {
    return std::unique_ptr<Kernel>(std::make_unique<BatchNormKernel>(dims[1], spatial_size, m));
  }
  return std::unique_ptr<Kernel>(std::make_unique<BatchNormKernel>(dims[1] * spatial_size, 1, m));
}

// ---- LRN: across channels (axis 1) of X [N, C, ...].

struct LrnOptions {
  double alpha = 1e-4, beta = 0.75, bias = 1.0;
  int64_t size = 1;
};

StatusOr<LrnOptions> read_lrn_options(const Attributes& a) {
  KILN_RETURN_IF_ERROR(check_known_attributes(a, {"alpha", "beta", "bias", "size"}));
  LrnOptions o;
  KILN_ASSIGN_OR_RETURN(o.alpha, a.get_float("alpha", 1e-4));
  KILN_ASSIGN_OR_RETURN(o.beta, a.get_float("beta", 0.75));
  KILN_ASSIGN_OR_RETURN(o.bias, a.get_float("bias", 1.0));
  if (!a.has("size")) return invalid_argument("attribute 'size' is required");
  KILN_ASSIGN_OR_RETURN(o.size, a.get_int("size", 1));
  if (o.size < 1) return invalid_argument("attribute 'size' must be >= 1, got {}", o.size);
  return o;
}

Status infer_lrn(InferArgs& args) {
  KILN_RETURN_IF_ERROR(read_lrn_options(args.attributes).status());
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, channels_input(args, "X"));
  args.outputs = {x};
  return ok_status();
}

class LrnKernel : public Kernel {
 public:
  LrnKernel(AxisSplit s, LrnOptions o) : s_(s), o_(o) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    // Window [c - floor((size-1)/2), c + ceil((size-1)/2)] clipped to the channels.
    const int64_t before = (o_.size - 1) / 2;
    const int64_t after = o_.size / 2;
    const double scale = o_.alpha / static_cast<double>(o_.size);
    return visit_float(in[0].dtype, [&]<typename T>() {
      const T* x = in[0].as<T>();
      T* y = out[0].as<T>();
      const int64_t c_count = s_.n, inner = s_.inner;
      parallel_ranges(
          s_.outer * c_count * inner, std::min(o_.size, c_count), [&](int64_t begin, int64_t end) {
            for (int64_t e = begin; e < end; ++e) {
              const int64_t i = e % inner;
              const int64_t c = (e / inner) % c_count;
              const int64_t base = (e / inner / c_count) * c_count * inner + i;
              const int64_t lo = std::max<int64_t>(0, c - before);
              const int64_t hi = std::min(c_count - 1, c + after);
              double sq = 0;
              for (int64_t k = lo; k <= hi; ++k) {
                const double v = static_cast<double>(load(x, base + k * inner));
                sq += v * v;
              }
              const double v = static_cast<double>(load(x, e));
              store(y, e, static_cast<compute_t<T>>(v / std::pow(o_.bias + scale * sq, o_.beta)));
            }
          });
    });
  }

 private:
  AxisSplit s_;
  LrnOptions o_;
};

StatusOr<std::unique_ptr<Kernel>> make_lrn(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(LrnOptions o, read_lrn_options(args.attributes));
  return std::unique_ptr<Kernel>(std::make_unique<LrnKernel>(split_at(args.input_dims(0), 1), o));
}

// ---- MeanVarianceNormalization over a set of axes.

StatusOr<std::vector<bool>> read_mvn_axes(const Attributes& a, int64_t rank) {
  KILN_RETURN_IF_ERROR(check_known_attributes(a, {"axes"}));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> raw, a.get_ints("axes", {0, 2, 3}));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, normalize_axes(raw, rank, "attribute 'axes'"));
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t d : axes) reduced[d] = true;
  return reduced;
}

Status infer_mvn(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, float_input(args, 0, "X"));
  KILN_RETURN_IF_ERROR(
      read_mvn_axes(args.attributes, static_cast<int64_t>(x.shape.size())).status());
  args.outputs = {x};
  return ok_status();
}

class MvnKernel : public Kernel {
 public:
  explicit MvnKernel(Geometry g) : g_(std::move(g)) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_float(in[0].dtype, [&]<typename T>() {
      const T* x = in[0].as<T>();
      T* y = out[0].as<T>();
      const auto count = static_cast<double>(g_.red_count);
      parallel_ranges(g_.out_count, g_.red_count, [&](int64_t begin, int64_t end) {
        std::vector<int64_t> idx(g_.red_dims.size());
        for (int64_t o = begin; o < end; ++o) {
          const int64_t base = kept_offset(g_, o);
          double sum = 0, sum_sq = 0;
          visit_reduced(g_, base, idx, [&](int64_t off) {
            const double v = static_cast<double>(load(x, off));
            sum += v;
            sum_sq += v * v;
          });
          const double mean = sum / count;
          const double var = std::max(0.0, sum_sq / count - mean * mean);
          const double denom = std::sqrt(var) + 1e-9;
          visit_reduced(g_, base, idx, [&](int64_t off) {
            const double v = static_cast<double>(load(x, off));
            store(y, off, static_cast<compute_t<T>>((v - mean) / denom));
          });
        }
      });
    });
  }

 private:
  Geometry g_;
};

StatusOr<std::unique_ptr<Kernel>> make_mvn(const MakeArgs& args) {
  const ConcreteShape dims = args.input_dims(0);
  KILN_ASSIGN_OR_RETURN(std::vector<bool> reduced,
                        read_mvn_axes(args.attributes, static_cast<int64_t>(dims.size())));
  return std::unique_ptr<Kernel>(std::make_unique<MvnKernel>(make_geometry(dims, reduced)));
}

}  // namespace

void register_normalize_kernels(std::vector<OpDef>& table) {
  add_lane_versions<Lane::kSoftmax>(table, "Softmax");
  add_lane_versions<Lane::kLogSoftmax>(table, "LogSoftmax");
  add_lane_versions<Lane::kHardmax>(table, "Hardmax");
  table.push_back(OpDef{"LpNormalization", infer_lane<Lane::kLp>, make_lane<Lane::kLp>});
  table.push_back(OpDef{"LayerNormalization", infer_layer_norm, make_layer_norm});
  table.push_back(OpDef{"InstanceNormalization", infer_instance_norm, make_instance_norm});
  table.push_back(OpDef{"BatchNormalization", infer_batch_norm, make_batch_norm});
  table.push_back(OpDef{"LRN", infer_lrn, make_lrn});
  table.push_back(OpDef{"MeanVarianceNormalization", infer_mvn, make_mvn});
}

}  // namespace kiln::kernels
