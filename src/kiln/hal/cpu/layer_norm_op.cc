// LayerNormalization (opset 17) on f32 with only output Y: kiln's own row kernel over plain data.
// X is [rows, block] (block = the product of X.shape[axis:], contiguous in row-major order);
// Scale and B hold one value per element of the block or a single value (other broadcasts, other
// dtypes and the Mean / InvStdDev outputs take the portable kernel).
//
// Each row is computed alone, in float, by one fixed sequence of operations: the sum of x over 16
// lanes (lane l adds elements l, l + 16, ... in order, then the lanes are added pairwise in a
// fixed tree, then the tail), mean = sum / block; the same for (x - mean)^2 giving the variance;
// inv = 1 / sqrt(var + epsilon); y = (x - mean) * inv * scale + bias. Rows are split over the
// OpenMP team, so a row's bits depend neither on the number of rows nor on the thread count
// (batch invariance, and a dynamic module equals the bound one bit for bit). A NaN in a row makes
// its mean NaN, hence the whole row NaN, as the definition gives; so does an infinity (x - mean
// is inf - inf).
#include <fmt/format.h>

#include <cmath>

#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/kernels/op_attributes.h"

namespace kiln::hal::cpu {
namespace {

#define KILN_AVX2 __attribute__((target("avx2,fma")))

constexpr int64_t kLanes = 16;

struct RowParams {
  int64_t block = 0;
  float epsilon = 0;
  bool scale_per_element = false;
  bool bias_per_element = false;
};

// The sum of `n` floats f(x[j]) in the order the header gives.
template <typename F>
inline __attribute__((always_inline)) float lane_sum(const float* x, int64_t n, F f) {
  float acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += f(x[j + l]);
  }
  for (int64_t width = kLanes / 2; width >= 1; width /= 2) {
    for (int64_t l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  float sum = acc[0];
  for (; j < n; ++j) sum += f(x[j]);
  return sum;
}

inline __attribute__((always_inline)) void normalize_row(const RowParams& p, const float* x,
                                                         const float* scale, const float* bias,
                                                         float* y) {
  const int64_t n = p.block;
  const float count = static_cast<float>(n);
  const float mean = lane_sum(x, n, [](float v) { return v; }) / count;
  const float var = lane_sum(x, n, [mean](float v) { return (v - mean) * (v - mean); }) / count;
  const float inv = 1.0f / std::sqrt(var + p.epsilon);
  if (p.scale_per_element && p.bias_per_element) {
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - mean) * inv * scale[j] + bias[j];
  } else if (p.scale_per_element && bias == nullptr) {
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - mean) * inv * scale[j];
  } else {
    // Rare forms: a single scale or bias value.
    const int64_t ss = p.scale_per_element ? 1 : 0, bs = p.bias_per_element ? 1 : 0;
    for (int64_t j = 0; j < n; ++j) {
      const float v = (x[j] - mean) * inv * scale[j * ss];
      y[j] = bias == nullptr ? v : v + bias[j * bs];
    }
  }
}

KILN_AVX2 void normalize_rows_avx2(const RowParams& p, int64_t begin, int64_t end, const float* x,
                                   const float* scale, const float* bias, float* y) {
  for (int64_t r = begin; r < end; ++r) {
    normalize_row(p, x + r * p.block, scale, bias, y + r * p.block);
  }
}

void normalize_rows_generic(const RowParams& p, int64_t begin, int64_t end, const float* x,
                            const float* scale, const float* bias, float* y) {
  for (int64_t r = begin; r < end; ++r) {
    normalize_row(p, x + r * p.block, scale, bias, y + r * p.block);
  }
}

bool have_avx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return avx2;
}

class LayerNormStep : public Step {
 public:
  LayerNormStep(std::string label, RowParams params, int64_t rows, BufferRef x, BufferRef scale,
                std::optional<BufferRef> bias, BufferRef y)
      : label_(std::move(label)),
        params_(params),
        rows_(rows),
        x_(x),
        scale_(scale),
        bias_(bias),
        y_(y) {}

  Status run(const ExecContext& ctx) override {
    const auto* x = reinterpret_cast<const float*>(ctx.resolve(x_));
    const auto* scale = reinterpret_cast<const float*>(ctx.resolve(scale_));
    const auto* bias = bias_ ? reinterpret_cast<const float*>(ctx.resolve(*bias_)) : nullptr;
    auto* y = reinterpret_cast<float*>(ctx.resolve(y_));
    // Jobs of whole rows, about 16k floats each; the split never changes a row's arithmetic.
    const int64_t per_job = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, params_.block));
    const int64_t jobs = (rows_ + per_job - 1) / per_job;
    const bool avx2 = have_avx2();
#pragma omp parallel for schedule(static) if (jobs > 1)
    for (int64_t j = 0; j < jobs; ++j) {
      const int64_t begin = j * per_job, end = std::min(rows_, begin + per_job);
      if (avx2) {
        normalize_rows_avx2(params_, begin, end, x, scale, bias, y);
      } else {
        normalize_rows_generic(params_, begin, end, x, scale, bias, y);
      }
    }
    return ok_status();
  }
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  RowParams params_;
  int64_t rows_;
  BufferRef x_, scale_;
  std::optional<BufferRef> bias_;
  BufferRef y_;
};

struct Plan {
  int64_t rows = 0;
  RowParams params;
};

StatusOr<Plan> plan(const OpReader& op) {
  if (op.output_count() > 1) {
    return unimplemented(
        "LayerNormalization's Mean and InvStdDev outputs run on the portable path");
  }
  for (size_t i = 0; i < op.input_count(); ++i) {
    if (op.has_input(i)) KILN_RETURN_IF_ERROR(op.expect_input_dtype(i, DType::kF32));
  }
  KILN_RETURN_IF_ERROR(op.expect_output_dtype(0, DType::kF32));
  const ConcreteShape& dims = op.input(0).shape;
  KILN_ASSIGN_OR_RETURN(
      kernels::LayerNormOptions o,
      kernels::read_layer_norm_options(op.attributes(), static_cast<int64_t>(dims.size())));
  Plan p;
  p.rows = 1;
  p.params.block = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    (static_cast<int64_t>(d) < o.axis ? p.rows : p.params.block) *= dims[d];
  }
  p.params.epsilon = static_cast<float>(o.epsilon);
  auto per_element = [&](size_t i) -> StatusOr<bool> {
    int64_t count = 1;
    for (int64_t d : op.input(i).shape) count *= d;
    if (count == p.params.block) return true;
    if (count == 1) return false;
    return unimplemented("parameter {} broadcast within the block runs on the portable path", i);
  };
  KILN_ASSIGN_OR_RETURN(p.params.scale_per_element, per_element(1));
  if (op.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(p.params.bias_per_element, per_element(2));
  }
  return p;
}

}  // namespace

Status check_layer_norm(const OpReader& op) { return plan(op).status(); }

Status build_layer_norm(ProgramBuilder& b) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(Plan p, plan(op));
  auto plain_input = [&](size_t i) {
    return b.input_as(op.input_index(i), plain_desc(op.input(i).shape));
  };
  KILN_ASSIGN_OR_RETURN(BufferRef x, plain_input(0));
  KILN_ASSIGN_OR_RETURN(BufferRef scale, plain_input(1));
  std::optional<BufferRef> bias;
  if (op.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(bias, plain_input(2));
  }
  // Over X's bytes where nothing reads X later (a row's statistics are summed before it is
  // written).
  bool in_place = false;
  KILN_ASSIGN_OR_RETURN(BufferRef y,
                        b.output_over_if_free(op.output_index(0), op.input_index(0),
                                              plain_desc(op.input(0).shape), in_place));
  if (p.rows == 0 || p.params.block == 0) return ok_status();
  b.add(std::make_unique<LayerNormStep>(
      b.label(fmt::format("layer norm kiln {} rows of {}{}", p.rows, p.params.block,
                          in_place ? " (in place)" : "")),
      p.params, p.rows, x, scale, bias, y));
  return ok_status();
}

}  // namespace kiln::hal::cpu
