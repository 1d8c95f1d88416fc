// The optimizers of ONNX's ai.onnx.preview.training domain (version 1): Adagrad, Adam, Momentum.
// Each takes R (learning rate, f32/f64 scalar), T (update count, i64 scalar), then n tensors X
// to optimize, their gradients G and optimizer states, all grouped by kind (X1..Xn, G1..Gn, ...),
// and returns the new tensors and states, grouped the same way:
//   Adagrad  (X, G, H)    -> (X', H')    r' = R / (1 + T decay_factor), g = norm_coefficient X + G,
//                                        H' = H + g^2, X' = X - r' g / (sqrt(H') + epsilon)
//   Adam     (X, G, V, H) -> (X', V', H') g = norm_coefficient X + G, V' = alpha V + (1 - alpha) g,
//                                        H' = beta H + (1 - beta) g^2,
//                                        r' = T > 0 ? R sqrt(1 - beta^T) / (1 - alpha^T) : R,
//                                        X' = (1 - norm_coefficient_post)(X - r' V' /
//                                             (sqrt(H') + epsilon))
//   Momentum (X, G, V)    -> (X', V')    g = norm_coefficient X + G, b = T > 0 ? beta : 1,
//                                        V' = alpha V + b g; standard: X' = X - R V',
//                                        nesterov: X' = X - R (g + alpha V')
// (ONNX's definitions and onnx/backend/test/case/node/{adagrad,adam,momentum}.py). Every X and
// its states share X's dtype (f32 or f64) and shape; the arithmetic is done in double and each
// output rounded once. The importer accepts this domain for these three ops only.
#include <cmath>

#include <fmt/format.h>

#include "kiln/kernels/dtype_dispatch.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"

namespace kiln::kernels {
namespace {

enum class Optimizer { kAdagrad, kAdam, kMomentum };

struct OptimizerSpec {
  Optimizer kind;
  std::vector<std::string_view> inputs;   // the kinds of the variadic inputs, in order
  std::vector<std::string_view> outputs;  // and of the outputs
};

const OptimizerSpec& spec_of(Optimizer kind) {
  static const OptimizerSpec adagrad{Optimizer::kAdagrad, {"X", "G", "H"}, {"X_new", "H_new"}};
  static const OptimizerSpec adam{
      Optimizer::kAdam, {"X", "G", "V", "H"}, {"X_new", "V_new", "H_new"}};
  static const OptimizerSpec momentum{Optimizer::kMomentum, {"X", "G", "V"}, {"X_new", "V_new"}};
  switch (kind) {
    case Optimizer::kAdagrad: return adagrad;
    case Optimizer::kAdam: return adam;
    case Optimizer::kMomentum: return momentum;
  }
  return adagrad;
}

struct OptimizerAttributes {
  double alpha = 0, beta = 0, epsilon = 0, decay_factor = 0;
  double norm_coefficient = 0, norm_coefficient_post = 0;
  bool nesterov = false;
};

StatusOr<double> required_float(const Attributes& a, const char* name) {
  if (!a.has(name)) return invalid_argument("attribute '{}' is required", name);
  return a.get_float(name, 0);
}

StatusOr<OptimizerAttributes> read_optimizer(Optimizer kind, const Attributes& a) {
  OptimizerAttributes o;
  switch (kind) {
    case Optimizer::kAdagrad: {
      KILN_RETURN_IF_ERROR(
          check_known_attributes(a, {"decay_factor", "epsilon", "norm_coefficient"}));
      KILN_ASSIGN_OR_RETURN(o.decay_factor, a.get_float("decay_factor", 0.0));
      KILN_ASSIGN_OR_RETURN(o.epsilon, a.get_float("epsilon", 1e-6));
      KILN_ASSIGN_OR_RETURN(o.norm_coefficient, a.get_float("norm_coefficient", 0.0));
      break;
    }
    case Optimizer::kAdam: {
      KILN_RETURN_IF_ERROR(check_known_attributes(
          a, {"alpha", "beta", "epsilon", "norm_coefficient", "norm_coefficient_post"}));
      KILN_ASSIGN_OR_RETURN(o.alpha, a.get_float("alpha", 0.9));
      KILN_ASSIGN_OR_RETURN(o.beta, a.get_float("beta", 0.999));
      KILN_ASSIGN_OR_RETURN(o.epsilon, a.get_float("epsilon", 1e-6));
      KILN_ASSIGN_OR_RETURN(o.norm_coefficient, a.get_float("norm_coefficient", 0.0));
      KILN_ASSIGN_OR_RETURN(o.norm_coefficient_post, a.get_float("norm_coefficient_post", 0.0));
      break;
    }
    case Optimizer::kMomentum: {
      KILN_RETURN_IF_ERROR(
          check_known_attributes(a, {"alpha", "beta", "mode", "norm_coefficient"}));
      KILN_ASSIGN_OR_RETURN(o.alpha, required_float(a, "alpha"));
      KILN_ASSIGN_OR_RETURN(o.beta, required_float(a, "beta"));
      KILN_ASSIGN_OR_RETURN(o.norm_coefficient, required_float(a, "norm_coefficient"));
      if (!a.has("mode")) return invalid_argument("attribute 'mode' is required");
      KILN_ASSIGN_OR_RETURN(std::string mode, a.get_string("mode", ""));
      if (mode != "standard" && mode != "nesterov") {
        return invalid_argument("attribute 'mode' must be \"standard\" or \"nesterov\", got \"{}\"",
                                mode);
      }
      o.nesterov = mode == "nesterov";
      break;
    }
  }
  return o;
}

// The number n of optimized tensors, from the input and output counts.
StatusOr<size_t> tensor_count(const OptimizerSpec& s, size_t inputs, size_t outputs) {
  const size_t groups = s.inputs.size();
  if (inputs < 2 + groups || (inputs - 2) % groups != 0) {
    return invalid_argument(
        "{} inputs: expected R, T and then n >= 1 of each of {} ({} inputs for n = 1, then {} "
        "more per tensor)",
        inputs, fmt::join(s.inputs, ", "), 2 + groups, groups);
  }
  const size_t n = (inputs - 2) / groups;
  if (outputs != n * s.outputs.size()) {
    return invalid_argument("{} outputs: {} tensors to optimize need {} ({})", outputs, n,
                            n * s.outputs.size(), fmt::join(s.outputs, ", "));
  }
  return n;
}

Status infer_optimizer(Optimizer kind, InferArgs& args) {
  const OptimizerSpec& s = spec_of(kind);
  KILN_RETURN_IF_ERROR(read_optimizer(kind, args.attributes).status());
  KILN_ASSIGN_OR_RETURN(size_t n, tensor_count(s, args.inputs.size(), args.output_count));
  KILN_ASSIGN_OR_RETURN(ValueType r, required_input(args, 0, "R"));
  KILN_RETURN_IF_ERROR(check_dtype(r, 0, "R", {DType::kF32, DType::kF64}));
  KILN_RETURN_IF_ERROR(check_scalar(r, 0, "R"));
  KILN_ASSIGN_OR_RETURN(ValueType t, required_input(args, 1, "T"));
  KILN_RETURN_IF_ERROR(check_dtype(t, 1, "T", {DType::kI64}));
  KILN_RETURN_IF_ERROR(check_scalar(t, 1, "T"));
  std::vector<ValueType> xs;
  for (size_t g = 0; g < s.inputs.size(); ++g) {
    for (size_t i = 0; i < n; ++i) {
      const size_t index = 2 + g * n + i;
      const std::string name = fmt::format("{}{}", s.inputs[g], i + 1);
      KILN_ASSIGN_OR_RETURN(ValueType v, required_input(args, index, name));
      if (g == 0) {
        KILN_RETURN_IF_ERROR(check_dtype(v, index, name, {DType::kF32, DType::kF64}));
        xs.push_back(v);
        continue;
      }
      const ValueType& x = xs[i];
      const std::string x_label = input_label(2 + i, fmt::format("X{}", i + 1));
      KILN_RETURN_IF_ERROR(check_same_dtype(v, index, name, x.dtype, x_label));
      if (v.shape.size() != x.shape.size()) {
        return invalid_argument("{} must have the shape of {} {}, got {}", input_label(index, name),
                                x_label, shape_to_string(x.shape), shape_to_string(v.shape));
      }
      for (size_t d = 0; d < x.shape.size(); ++d) {
        KILN_RETURN_IF_ERROR(check_dims_equal(
            v.shape[d], x.shape[d],
            fmt::format("{} dim {} (the shape of {})", input_label(index, name), d, x_label)));
      }
    }
  }
  args.outputs.clear();
  for (size_t g = 0; g < s.outputs.size(); ++g) {
    for (size_t i = 0; i < n; ++i) args.outputs.push_back(xs[i]);
  }
  return ok_status();
}

double scalar_as_double(const ConstBuffer& b) {
  return b.dtype == DType::kF64 ? b.as<double>()[0] : static_cast<double>(b.as<float>()[0]);
}

class OptimizerKernel : public Kernel {
 public:
  OptimizerKernel(Optimizer kind, OptimizerAttributes o, size_t n) : kind_(kind), o_(o), n_(n) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const double r = scalar_as_double(in[0]);
    const int64_t t = in[1].as<int64_t>()[0];
    double rate = r;  // the learning rate of this step
    if (kind_ == Optimizer::kAdagrad) rate = r / (1 + static_cast<double>(t) * o_.decay_factor);
    if (kind_ == Optimizer::kAdam && t > 0) {
      const auto td = static_cast<double>(t);
      rate = r * std::sqrt(1 - std::pow(o_.beta, td)) / (1 - std::pow(o_.alpha, td));
    }
    const double momentum_beta = t > 0 ? o_.beta : 1.0;
    for (size_t i = 0; i < n_; ++i) {
      const ConstBuffer& xb = in[2 + i];
      const int64_t count = xb.element_count();
      Status st = visit_dtype(xb.dtype, [&]<typename T>() -> Status {
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          const T* x = xb.as<T>();
          const T* g = in[2 + n_ + i].as<T>();
          const T* s1 = in[2 + 2 * n_ + i].as<T>();  // H (Adagrad) or V
          T* x_new = out[i].as<T>();
          T* s1_new = out[n_ + i].as<T>();
          for (int64_t k = 0; k < count; ++k) {
            const double xv = x[k];
            const double gv = o_.norm_coefficient * xv + static_cast<double>(g[k]);
            const double sv = s1[k];
            switch (kind_) {
              case Optimizer::kAdagrad: {
                const double h = sv + gv * gv;
                x_new[k] = static_cast<T>(xv - rate * gv / (std::sqrt(h) + o_.epsilon));
                s1_new[k] = static_cast<T>(h);
                break;
              }
              case Optimizer::kAdam: {
                const T* h_old = in[2 + 3 * n_ + i].as<T>();
                T* h_new = out[2 * n_ + i].as<T>();
                const double v = o_.alpha * sv + (1 - o_.alpha) * gv;
                const double h = o_.beta * static_cast<double>(h_old[k]) + (1 - o_.beta) * gv * gv;
                const double step = xv - rate * (v / (std::sqrt(h) + o_.epsilon));
                x_new[k] = static_cast<T>((1 - o_.norm_coefficient_post) * step);
                s1_new[k] = static_cast<T>(v);
                h_new[k] = static_cast<T>(h);
                break;
              }
              case Optimizer::kMomentum: {
                const double v = o_.alpha * sv + momentum_beta * gv;
                x_new[k] = static_cast<T>(o_.nesterov ? xv - r * (gv + o_.alpha * v) : xv - r * v);
                s1_new[k] = static_cast<T>(v);
                break;
              }
            }
          }
          return ok_status();
        } else {
          return internal_error("optimizer tensor of dtype {}", dtype_name(xb.dtype));
        }
      });
      KILN_RETURN_IF_ERROR(st);
    }
    return ok_status();
  }

 private:
  Optimizer kind_;
  OptimizerAttributes o_;
  size_t n_;
};

StatusOr<std::unique_ptr<Kernel>> make_optimizer(Optimizer kind, const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(OptimizerAttributes o, read_optimizer(kind, args.attributes));
  KILN_ASSIGN_OR_RETURN(size_t n,
                        tensor_count(spec_of(kind), args.inputs.size(), args.outputs.size()));
  return std::unique_ptr<Kernel>(std::make_unique<OptimizerKernel>(kind, o, n));
}

template <Optimizer kKind>
Status infer_of(InferArgs& args) {
  return infer_optimizer(kKind, args);
}
template <Optimizer kKind>
StatusOr<std::unique_ptr<Kernel>> make_of(const MakeArgs& args) {
  return make_optimizer(kKind, args);
}

}  // namespace

void register_training_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{"Adagrad", infer_of<Optimizer::kAdagrad>, make_of<Optimizer::kAdagrad>});
  table.push_back(OpDef{"Adam", infer_of<Optimizer::kAdam>, make_of<Optimizer::kAdam>});
  table.push_back(OpDef{"Momentum", infer_of<Optimizer::kMomentum>, make_of<Optimizer::kMomentum>});
}

}  // namespace kiln::kernels
