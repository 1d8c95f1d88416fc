// Losses (inference; opset 13): NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
//
// Both view the scores as [N, C, D] (D the product of the dims after C, 1 for rank 2) and the
// targets as [N, D]. Element (n, j) with target t contributes loss -w[t] * x[n, t, j] and weight
// w[t] (w = 1 without a weight input); a target equal to ignore_index contributes 0 and weight 0.
// reduction "none" gives the per-element losses (the target's shape), "sum" their sum, "mean"
// the sum divided by the sum of the weights (numpy's mean when there is neither a weight input
// nor an ignore_index; 0/0 = NaN when every element is ignored, as the ONNX reference).
//
// Everything is computed in double whatever the storage type and rounded once to the output
// type. Per-element losses may be computed in parallel, but the sums run sequentially in
// row-major element order, so results do not depend on the thread count. SoftmaxCrossEntropyLoss
// takes log-softmax along axis 1 as x - max - log(sum(exp(x - max))).
//
// A target outside [0, C) that is not ignore_index is an InvalidArgument naming the element
// (ONNX leaves it undefined); targets are all checked before anything is written.
#include <cmath>
#include <limits>

#include <fmt/ranges.h>

#include "kiln/kernels/dtype_dispatch.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/reduce_geometry.h"

namespace kiln::kernels {
namespace {

enum class Reduction { kNone, kSum, kMean };

struct LossOptions {
  Reduction reduction = Reduction::kMean;
  std::optional<int64_t> ignore_index;
};

StatusOr<LossOptions> read_loss_options(const Attributes& a) {
  KILN_RETURN_IF_ERROR(check_known_attributes(a, {"reduction", "ignore_index"}));
  LossOptions o;
  KILN_ASSIGN_OR_RETURN(std::string reduction, a.get_string("reduction", "mean"));
  if (reduction == "none") {
    o.reduction = Reduction::kNone;
  } else if (reduction == "sum") {
    o.reduction = Reduction::kSum;
  } else if (reduction == "mean") {
    o.reduction = Reduction::kMean;
  } else {
    return invalid_argument("attribute 'reduction' must be 'none', 'sum' or 'mean', got '{}'",
                            reduction);
  }
  if (a.has("ignore_index")) {
    KILN_ASSIGN_OR_RETURN(int64_t ii, a.get_int("ignore_index", 0));
    o.ignore_index = ii;
  }
  return o;
}

// Input names of each op (ONNX's).
struct LossNames {
  const char* scores;
  const char* target;
  const char* weight;
};
constexpr LossNames kNllNames{"input", "target", "weight"};
constexpr LossNames kSceNames{"scores", "labels", "weights"};

template <bool kSoftmax>
Status infer_loss(InferArgs& args) {
  constexpr LossNames names = kSoftmax ? kSceNames : kNllNames;
  KILN_ASSIGN_OR_RETURN(LossOptions o, read_loss_options(args.attributes));
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 3, 1, kSoftmax ? 2 : 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, names.scores));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, names.scores, float_dtypes()));
  if (x.shape.size() < 2) {
    return invalid_argument("input 0 '{}' must have rank >= 2 ([N, C, d1, ...]), got shape {}",
                            names.scores, shape_to_string(x.shape));
  }
  KILN_ASSIGN_OR_RETURN(ValueType t, required_input(args, 1, names.target));
  KILN_RETURN_IF_ERROR(check_dtype(t, 1, names.target, {DType::kI32, DType::kI64}));
  // The target's expected shape: the scores' without C.
  Shape target_shape = x.shape;
  target_shape.erase(target_shape.begin() + 1);
  if (t.shape.size() != target_shape.size()) {
    return invalid_argument("{} must have rank {} (input 0 '{}' without dim 1), got shape {}",
                            input_label(1, names.target), target_shape.size(), names.scores,
                            shape_to_string(t.shape));
  }
  for (size_t d = 0; d < target_shape.size(); ++d) {
    KILN_RETURN_IF_ERROR(check_dims_equal(
        t.shape[d], target_shape[d],
        fmt::format("{} dim {} (dim {} of input 0 '{}')", input_label(1, names.target), d,
                    d == 0 ? 0 : d + 1, names.scores)));
  }
  if (const ValueType* w = optional_input(args, 2)) {
    KILN_RETURN_IF_ERROR(
        check_same_dtype(*w, 2, names.weight, x.dtype, fmt::format("input 0 '{}'", names.scores)));
    KILN_RETURN_IF_ERROR(check_rank(*w, 2, names.weight, 1));
    KILN_RETURN_IF_ERROR(check_dims_equal(w->shape[0], x.shape[1],
                                          fmt::format("{} dim 0 (classes, dim 1 of input 0 '{}')",
                                                      input_label(2, names.weight), names.scores)));
  }
  args.outputs.clear();
  args.outputs.push_back({x.dtype, o.reduction == Reduction::kNone ? target_shape : Shape{}});
  if (args.output_count > 1) args.outputs.push_back(x);  // log_prob
  return ok_status();
}

// Any integer target buffer as int64.
std::vector<int64_t> targets_of(const ConstBuffer& b) {
  const int64_t n = b.element_count();
  std::vector<int64_t> out(static_cast<size_t>(n));
  if (b.dtype == DType::kI32) {
    const int32_t* p = b.as<int32_t>();
    for (int64_t i = 0; i < n; ++i) out[i] = p[i];
  } else {
    const int64_t* p = b.as<int64_t>();
    for (int64_t i = 0; i < n; ++i) out[i] = p[i];
  }
  return out;
}

std::vector<double> weights_of(const ConstBuffer& b) {
  const int64_t n = b.element_count();
  std::vector<double> out(static_cast<size_t>(n));
  visit_dtype(b.dtype, [&]<typename T>() {
    if constexpr (is_float_storage_v<T>) {
      const T* p = b.as<T>();
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(load(p, i));
    }
  });
  return out;
}

// "[1, 2]": the coordinates of flat element `i` of `dims`.
std::string coordinates(std::span<const int64_t> dims, int64_t i) {
  std::vector<int64_t> idx(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    idx[d] = dims[d] == 0 ? 0 : i % dims[d];
    if (dims[d] != 0) i /= dims[d];
  }
  return fmt::format("[{}]", fmt::join(idx, ", "));
}

template <bool kSoftmax>
class LossKernel : public Kernel {
 public:
  LossKernel(int64_t n, int64_t c, int64_t d, LossOptions o) : n_(n), c_(c), d_(d), o_(o) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    constexpr LossNames names = kSoftmax ? kSceNames : kNllNames;
    const std::vector<int64_t> target = targets_of(in[1]);
    for (size_t e = 0; e < target.size(); ++e) {
      const int64_t t = target[e];
      if (o_.ignore_index && t == *o_.ignore_index) continue;
      if (t < 0 || t >= c_) {
        return invalid_argument(
            "{} element {} {} = {} is out of range [0, {}){}", input_label(1, names.target), e,
            coordinates(in[1].dims, static_cast<int64_t>(e)), t, c_,
            o_.ignore_index ? fmt::format(" and is not ignore_index {}", *o_.ignore_index)
                            : std::string());
      }
    }
    const bool weighted = in.size() > 2 && in[2].data != nullptr;
    const std::vector<double> weight = weighted ? weights_of(in[2]) : std::vector<double>{};
    const bool want_log_prob = kSoftmax && out.size() > 1 && out[1].data != nullptr;
    const int64_t count = n_ * d_;
    return visit_float(in[0].dtype, [&]<typename T>() {
      const T* x = in[0].as<T>();
      T* log_prob = want_log_prob ? out[1].as<T>() : nullptr;
      // Per element: loss and weight (0 and 0 when ignored).
      std::vector<double> loss(static_cast<size_t>(count)), w(static_cast<size_t>(count));
      parallel_ranges(count, kSoftmax ? c_ : 1, [&](int64_t begin, int64_t end) {
        for (int64_t e = begin; e < end; ++e) {
          const int64_t base = (e / d_) * c_ * d_ + e % d_;  // x[n, 0, j]
          const int64_t t = target[e];
          const bool ignored = o_.ignore_index && t == *o_.ignore_index;
          double picked = 0;  // log-probability (or input) of the target class
          if constexpr (kSoftmax) {
            auto v = [&](int64_t k) { return static_cast<double>(load(x, base + k * d_)); };
            double m = -std::numeric_limits<double>::infinity();
            for (int64_t k = 0; k < c_; ++k) {
              const double s = v(k);
              if (s > m || std::isnan(s)) m = s;
            }
            double sum = 0;
            for (int64_t k = 0; k < c_; ++k) sum += std::exp(v(k) - m);
            const double shift = m + std::log(sum);
            if (log_prob != nullptr) {
              for (int64_t k = 0; k < c_; ++k) {
                store(log_prob, base + k * d_, static_cast<compute_t<T>>(v(k) - shift));
              }
            }
            if (!ignored) picked = v(t) - shift;
          } else {
            if (!ignored) picked = static_cast<double>(load(x, base + t * d_));
          }
          const double wt = ignored ? 0.0 : weighted ? weight[t] : 1.0;
          w[e] = wt;
          loss[e] = ignored ? 0.0 : -wt * picked;
        }
      });
      T* y = out[0].as<T>();
      if (o_.reduction == Reduction::kNone) {
        for (int64_t e = 0; e < count; ++e) store(y, e, static_cast<compute_t<T>>(loss[e]));
        return;
      }
      double sum = 0, weight_sum = 0;
      for (int64_t e = 0; e < count; ++e) {
        sum += loss[e];
        weight_sum += w[e];
      }
      const double r = o_.reduction == Reduction::kSum ? sum : sum / weight_sum;
      store(y, 0, static_cast<compute_t<T>>(r));
    });
  }

 private:
  // Runs fn.template operator()<T>() for the float storage type of `dtype`.
  template <typename F>
  static Status visit_float(DType dtype, F&& fn) {
    return visit_dtype(dtype, [&]<typename T>() -> Status {
      if constexpr (is_float_storage_v<T>) {
        fn.template operator()<T>();
        return ok_status();
      } else {
        return internal_error("no float kernel instance for {}", dtype_name(dtype));
      }
    });
  }

  int64_t n_, c_, d_;
  LossOptions o_;
};

template <bool kSoftmax>
StatusOr<std::unique_ptr<Kernel>> make_loss(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(LossOptions o, read_loss_options(args.attributes));
  const ConcreteShape dims = args.input_dims(0);
  return std::unique_ptr<Kernel>(std::make_unique<LossKernel<kSoftmax>>(
      dims[0], dims[1], product(std::span(dims).subspan(2)), o));
}

}  // namespace

void register_loss_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{"NegativeLogLikelihoodLoss", infer_loss<false>, make_loss<false>});
  table.push_back(OpDef{"SoftmaxCrossEntropyLoss", infer_loss<true>, make_loss<true>});
}

}  // namespace kiln::kernels
