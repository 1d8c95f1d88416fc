// The Vulkan backend's integer Add/Sub/Mul/Max/Min, Cast, comparisons and logic (Equal, Less,
// Greater, LessOrEqual, GreaterOrEqual, Not, And, Or, Xor), Where, Range, ConstantOfShape and
// Resize against the float64 reference evaluator (tests/support/hal/reference.h): numpy
// broadcasting, NaN (false in every comparison, passed through by Where), int64 values beyond 2^32,
// every Resize mode on odd sizes up and down, and forms the GPU kernels refuse, which must still
// compute the right result on the CPU fallback. The validation layer is on (vulkan_test_env.h).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "kiln/hal/vulkan/kernel_builder.h"
#include "kiln/hal/vulkan/op_table.h"
#include "kiln/hal/vulkan/vulkan_context.h"
#include "kiln/hal/vulkan/vulkan_device.h"
#include "kiln/hal/vulkan/vulkan_executable.h"
#include "tests/support/expect.h"
#include "tests/support/graph_eval/op_graph.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/tensors.h"
#include "tests/support/vulkan/vulkan_test_env.h"

namespace kiln::hal::vulkan {
namespace {

using namespace kiln::testing;
using testing::make_vulkan_device;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// An input of a test dispatch: a graph input, a constant, or a value the shape program knows
// (ValueSpec::known_value); an absent one has no data.
struct In {
  Tensor t;
  enum Kind { kInput, kConstant, kKnown } kind = kInput;
};
In constant(Tensor t) { return {std::move(t), In::kConstant}; }
In known(Tensor t) { return {std::move(t), In::kKnown}; }
In absent() { return {Tensor(), In::kInput}; }

// Equal dtype, shape and elements: integers and bools bit for bit, floats exactly (NaN where NaN).
::testing::AssertionResult same(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    return ::testing::AssertionFailure() << "dtype or shape differs";
  }
  if (want.dtype() == DType::kF32 || want.dtype() == DType::kF64) {
    return all_close(got, want, {.atol = 0, .rtol = 0});
  }
  if (std::memcmp(got.data(), want.data(), want.byte_size()) != 0) {
    return ::testing::AssertionFailure() << "elements differ";
  }
  return ::testing::AssertionSuccess();
}

// The float64 reference evaluator's output of one `op_type` node whose constant and known inputs
// are constants of the graph (Range and ConstantOfShape need their values when shapes are
// inferred; reference() takes every input as a graph input).
Tensor expected_of(const std::string& op_type, const std::vector<In>& ins, const Attributes& a) {
  OpGraph graph(op_type, 18);
  std::vector<Tensor> runtime;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].t.data() == nullptr && ins[i].t.shape().empty()) {
      graph.absent();
    } else if (ins[i].kind != In::kInput) {
      graph.constant("c" + std::to_string(i), ins[i].t);
    } else {
      graph.input("x" + std::to_string(i), ins[i].t.dtype(), shape_from_concrete(ins[i].t.shape()));
      runtime.push_back(ins[i].t);
    }
  }
  for (const auto& [name, value] : a.all()) graph.attr(name, value);
  graph.outputs(1);
  auto out = graph.run(std::move(runtime));
  EXPECT_TRUE(out.ok()) << op_type << ": " << out.status().to_string();
  return out.ok() && out->size() == 1 ? std::move((*out)[0]) : Tensor();
}

class VulkanOpsTest : public testing::VulkanDeviceTest {
 protected:
  // Runs one `op_type` dispatch with output `like`'s dtype and shape; on_gpu says where it must be
  // placed. Empty on a failure (reported).
  std::optional<Tensor> run_op(const std::string& op_type, const std::vector<In>& ins,
                               const Attributes& attributes, const Tensor& like, bool on_gpu) {
    SpecBuilder s;
    std::vector<int32_t> inputs;
    std::vector<Tensor> runtime;
    for (size_t i = 0; i < ins.size(); ++i) {
      const std::string name = "x" + std::to_string(i);
      if (ins[i].t.data() == nullptr && ins[i].t.shape().empty()) {
        inputs.push_back(-1);
      } else if (ins[i].kind == In::kConstant) {
        inputs.push_back(s.constant(name, ins[i].t));
      } else {
        inputs.push_back(s.input(name, ins[i].t.shape(), ins[i].t.dtype()));
        if (ins[i].kind == In::kKnown) s.spec().values[inputs.back()].known_value = ins[i].t;
        runtime.push_back(ins[i].t);
      }
    }
    const int32_t y = s.output("y", like.shape(), like.dtype());
    s.dispatch("op", op_type, inputs, {y}, attributes);
    Status gpu = vulkan().runs_on_gpu(s.spec().dispatches[0], s.spec().values);
    EXPECT_EQ(gpu.ok(), on_gpu) << op_type << ": " << gpu.to_string();
    auto exe = device_->prepare(s.spec());
    EXPECT_TRUE(exe.ok()) << exe.status().to_string();
    if (!exe.ok()) return std::nullopt;
    EXPECT_EQ(static_cast<VulkanExecutable&>(**exe).placements()[0].on_gpu, on_gpu);
    auto out = run_program(*device_, **exe, s.spec(), runtime);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    if (!out.ok() || out->size() != 1) return std::nullopt;
    return std::move((*out)[0]);
  }

  // run_op against the reference: exactly (`tol` null) or within `tol`.
  void check(const std::string& op_type, const std::vector<In>& ins, const Attributes& a = {},
             bool on_gpu = true, std::optional<Tolerance> tol = std::nullopt) {
    const Tensor want = expected_of(op_type, ins, a);
    std::optional<Tensor> got = run_op(op_type, ins, a, want, on_gpu);
    ASSERT_TRUE(got.has_value()) << op_type;
    if (tol) {
      EXPECT_TRUE(all_close(*got, want, *tol)) << op_type;
    } else {
      EXPECT_TRUE(same(*got, want)) << op_type;
    }
  }
};

// f32 data with NaN, infinities, ties and signed zeros among random values.
Tensor special_f32(ConcreteShape shape, uint32_t seed) {
  Tensor t = random_tensor(shape, seed, -2, 2);
  float* v = reinterpret_cast<float*>(t.mutable_data());
  const float specials[] = {kNaN, kInf, -kInf, 0.0f, -0.0f, 0.5f, -0.5f, 1.0f};
  for (int64_t i = 0; i < t.element_count(); i += 3) v[i] = specials[(i / 3 + seed) % 8];
  return t;
}

// i64 values beyond 2^32 in both signs, with repeats so that Equal finds some.
Tensor big_i64(ConcreteShape shape, int64_t salt) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = (i * 7 + salt) % 5;
    v[i] = (k - 2) * ((int64_t{1} << 33) + 3) + (k == 4 ? int64_t{1} << 62 : 0) + (i % 2);
  }
  return i64(shape, v);
}

// ---- Trilu

TEST_F(VulkanOpsTest, TriluKeepsATriangleOfEveryMatrix) {
  for (int64_t upper : {1, 0}) {
    for (int64_t k : {-2, 0, 1, 9}) {
      SCOPED_TRACE(fmt::format("upper {} k {}", upper, k));
      Attributes a;
      a.set("upper", upper);
      check("Trilu", {{special_f32({2, 3, 5}, 7)}, constant(i64({}, {k}))}, a);
    }
  }
  check("Trilu", {{big_i64({4, 4}, 1)}});  // 8-byte elements, the default upper and k
  // A k computed at run time runs on the CPU.
  check("Trilu", {{special_f32({3, 3}, 2)}, {i64({}, {1})}}, {}, /*on_gpu=*/false);
}

// ---- Comparisons and logic

TEST_F(VulkanOpsTest, ComparisonsOfF32WithNaNAndBroadcasting) {
  for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    SCOPED_TRACE(op);
    check(op, {{special_f32({2, 3, 5}, 1)}, {special_f32({2, 3, 5}, 2)}});
    check(op, {{special_f32({2, 1, 5}, 3)}, {special_f32({3, 1}, 4)}});
    check(op, {{special_f32({3, 5}, 5)}, constant(f32({}, {0.5f}))});
    Tensor same_values = special_f32({7}, 6);
    check(op, {{same_values}, {same_values}});  // NaN == NaN is false
  }
}

TEST_F(VulkanOpsTest, ComparisonsOfIntegers) {
  for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    SCOPED_TRACE(op);
    check(op, {{big_i64({4, 1, 3}, 0)}, {big_i64({5, 1}, 3)}});
    check(op, {{big_i64({11}, 1)}, {big_i64({11}, 2)}});
    check(op, {{i32({2, 3}, {-5, 0, 7, -2147483647 - 1, 3, 2147483647})}, {i32({3}, {0, 3, -5})}});
  }
}

TEST_F(VulkanOpsTest, LogicOnBool) {
  const Tensor a =
      boolean({2, 3, 4}, {1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 1, 0, 1, 1, 0, 0, 1, 0, 1});
  const Tensor b = boolean({3, 1}, {1, 0, 1});
  for (const char* op : {"And", "Or", "Xor", "Equal"}) {
    SCOPED_TRACE(op);
    check(op, {{a}, {b}});
    check(op, {{b}, {a}});
  }
  check("Not", {{a}});
  check("Not", {{boolean({5}, {1, 0, 0, 1, 1})}});
}

// ---- Integer arithmetic (shape computations: Sub of dims, Mul of a dim)

TEST_F(VulkanOpsTest, IntegerArithmeticWraps) {
  const int32_t kMin = std::numeric_limits<int32_t>::min();
  const int32_t kMax = std::numeric_limits<int32_t>::max();
  for (const char* op : {"Add", "Sub", "Mul", "Max", "Min"}) {
    SCOPED_TRACE(op);
    check(op, {{big_i64({4, 1, 3}, 0)}, {big_i64({5, 1}, 3)}});
    check(
        op,
        {{i64({3}, {std::numeric_limits<int64_t>::max(), -5, std::numeric_limits<int64_t>::min()})},
         constant(i64({}, {3}))});
    check(op, {{i32({2, 3}, {-5, 0, 7, kMin, 3, kMax})}, {i32({3}, {kMax, 3, -5})}});
  }
  // Integer Div (its division by zero is an error the CPU reports) stays on the CPU.
  check("Div", {{i64({3}, {7, -7, 9})}, constant(i64({}, {2}))}, {}, false);
}

// ---- Where

TEST_F(VulkanOpsTest, WhereBroadcastsAllThreeAndPassesNaN) {
  const Tensor c = boolean({2, 1, 3}, {1, 0, 1, 0, 0, 1});
  check("Where", {{c}, {special_f32({4, 3}, 7)}, {special_f32({2, 4, 1}, 8)}});
  check("Where", {{boolean({3}, {0, 1, 1})}, {special_f32({3}, 9)}, constant(f32({}, {kNaN}))});
  check("Where", {{c}, {big_i64({2, 4, 3}, 1)}, {big_i64({1}, 2)}});
  check("Where", {{c}, {i32({3}, {1, -2, 3})}, {i32({4, 1}, {5, 6, 7, -8})}});
  // Rank 6 with every operand broadcast differently.
  Tensor c6 = boolean({2, 1, 2, 1, 2, 1}, {1, 0, 0, 1, 1, 1, 0, 0});
  check("Where",
        {{c6}, {special_f32({1, 3, 1, 2, 1, 3}, 10)}, {special_f32({2, 3, 2, 1, 1, 1}, 11)}});
}

TEST_F(VulkanOpsTest, WhereOfBoolRunsOnTheCpu) {
  check("Where", {{boolean({3}, {0, 1, 1})}, {boolean({3}, {1, 1, 0})}, {boolean({1}, {0})}}, {},
        false);
}

// ---- Cast

TEST_F(VulkanOpsTest, CastBetweenF32I32I64BoolU8) {
  Tensor f = f32({16}, {kNaN, kInf, -kInf, 0.0f, -0.0f, 0.5f, -0.5f, 1.7f, -1.7f, 254.9f, 255.5f,
                        300.0f, -3e9f, 3e9f, 1e19f, -1e19f});
  Tensor big = i64({8}, {0, 1, -1, (int64_t{1} << 33) + 5, -(int64_t{1} << 40) - 3,
                         std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
                         (int64_t{1} << 24) + 1});
  Tensor small = i32({6}, {0, -1, 255, 256, -2147483647 - 1, 16777217});
  Tensor b = boolean({5}, {0, 1, 1, 0, 1});
  Tensor u = u8({5}, {0, 1, 255, 128, 7});
  // ONNX TensorProto codes: 1 f32, 2 u8, 6 i32, 7 i64, 9 bool.
  for (int64_t to : {1, 2, 6, 7, 9}) {
    SCOPED_TRACE(to);
    const Attributes a = attrs({{"to", to}});
    check("Cast", {{f}}, a);
    check("Cast", {{big}}, a);
    check("Cast", {{small}}, a);
    check("Cast", {{b}}, a);
    check("Cast", {{u}}, a);
  }
}

TEST_F(VulkanOpsTest, CastToF16RunsOnTheCpu) {
  check("Cast", {{special_f32({5}, 12)}}, attrs({{"to", int64_t{10}}}), false);
}

// ---- Range and ConstantOfShape

TEST_F(VulkanOpsTest, RangeFromConstantsAndKnownValues) {
  check("Range", {constant(f32({}, {0.1f})), constant(f32({}, {2.9f})), constant(f32({}, {0.3f}))});
  check("Range",
        {constant(f32({}, {5.0f})), constant(f32({}, {-1.0f})), constant(f32({}, {-0.7f}))});
  check("Range", {known(i64({}, {int64_t{1} << 34})), known(i64({}, {(int64_t{1} << 34) + 17})),
                  constant(i64({}, {3}))});
  check("Range", {constant(i32({}, {10})), constant(i32({}, {-3})), constant(i32({}, {-4}))});
}

TEST_F(VulkanOpsTest, RangeOfF64RunsOnTheCpu) {
  check("Range", {constant(f64({}, {0.25})), constant(f64({}, {3.0})), constant(f64({}, {0.5}))},
        {}, false);
}

TEST_F(VulkanOpsTest, ConstantOfShape) {
  const Tensor shape = i64({3}, {2, 3, 5});
  check("ConstantOfShape", {constant(shape)});  // f32 0
  check("ConstantOfShape", {known(shape)},
        attrs({{"value", 2.5}, {"kiln_value_dtype", std::string("f32")}}));
  check("ConstantOfShape", {constant(shape)},
        attrs({{"value", (int64_t{1} << 40) + 3}, {"kiln_value_dtype", std::string("i64")}}));
  check("ConstantOfShape", {constant(shape)},
        attrs({{"value", int64_t{-7}}, {"kiln_value_dtype", std::string("i32")}}));
  check("ConstantOfShape", {constant(i64({2}, {3, 7}))},
        attrs({{"value", int64_t{1}}, {"kiln_value_dtype", std::string("bool")}}));
}

// ---- Resize

struct ResizeCase {
  std::string mode, coord, nearest_mode;
  ConcreteShape in, out;
  bool by_scales = false;  // scales input (else sizes)
};

void PrintTo(const ResizeCase& c, std::ostream* os) {
  *os << c.mode << " " << c.coord << " " << c.nearest_mode << " " << c.in.size() << "-D";
}

class VulkanResizeTest : public VulkanOpsTest, public ::testing::WithParamInterface<ResizeCase> {};

TEST_P(VulkanResizeTest, MatchesReference) {
  const ResizeCase& c = GetParam();
  Attributes a = attrs({{"mode", c.mode}, {"coordinate_transformation_mode", c.coord}});
  if (!c.nearest_mode.empty())
    a = attrs({{"mode", c.mode},
               {"coordinate_transformation_mode", c.coord},
               {"nearest_mode", c.nearest_mode}});
  const bool nearest = c.mode == "nearest";
  // Specials (NaN, infinities) where elements are copied; plain values where they are weighed.
  std::vector<In> ins = {{nearest ? special_f32(c.in, 13) : random_tensor(c.in, 13)}};
  if (c.coord == "tf_crop_and_resize") {
    std::vector<double> roi(2 * c.in.size());
    for (size_t d = 0; d < c.in.size(); ++d) {
      roi[d] = d < 2 ? 0.0 : 0.2;
      roi[d + c.in.size()] = d < 2 ? 1.0 : 1.1;  // past the end: extrapolated
    }
    ins.push_back(constant(make_tensor(DType::kF32, {static_cast<int64_t>(roi.size())}, roi)));
  } else {
    ins.push_back(absent());
  }
  if (c.by_scales) {
    std::vector<double> scales;
    for (size_t d = 0; d < c.in.size(); ++d) {
      scales.push_back(static_cast<double>(c.out[d]) / static_cast<double>(c.in[d]));
    }
    ins.push_back(
        constant(make_tensor(DType::kF32, {static_cast<int64_t>(scales.size())}, scales)));
  } else {
    ins.push_back(absent());
    std::vector<int64_t> sizes(c.out.begin(), c.out.end());
    ins.push_back(constant(i64({static_cast<int64_t>(sizes.size())}, sizes)));
  }
  check("Resize", ins, a, true,
        nearest ? std::nullopt : std::optional<Tolerance>(Tolerance{.atol = 1e-5, .rtol = 1e-5}));
}

std::vector<ResizeCase> resize_cases() {
  std::vector<ResizeCase> cases;
  const ConcreteShape in = {2, 3, 5, 7};
  const ConcreteShape ups[] = {{2, 3, 9, 13}, {2, 3, 3, 4}, {2, 3, 5, 11}, {2, 3, 1, 3}};
  for (const char* coord : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                            "tf_half_pixel_for_nn"}) {
    for (const char* rounding : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      cases.push_back(
          {"nearest", coord, rounding, in, ups[cases.size() % 4], cases.size() % 2 == 0});
    }
  }
  for (const char* coord :
       {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"}) {
    for (const ConcreteShape& out : ups) cases.push_back({"linear", coord, "", in, out, false});
  }
  cases.push_back({"nearest", "tf_crop_and_resize", "round_prefer_ceil", in, {2, 3, 8, 6}, false});
  cases.push_back({"linear", "half_pixel", "", {3, 5, 4}, {6, 3, 9}, true});  // N-D linear
  cases.push_back({"cubic", "half_pixel", "", in, {2, 3, 9, 4}, true});
  cases.push_back({"cubic", "align_corners", "", in, {2, 3, 4, 12}, false});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Modes, VulkanResizeTest, ::testing::ValuesIn(resize_cases()),
                         [](const auto& info) {
                           const ResizeCase& c = info.param;
                           return c.mode + "_" + c.coord + "_" + c.nearest_mode + "_" +
                                  std::to_string(info.index);
                         });

TEST_F(VulkanOpsTest, ResizeOfI64RunsOnTheCpu) {
  check("Resize", {{big_i64({1, 2, 3, 3}, 3)}, absent(), constant(f32({4}, {1, 1, 2, 1.5f}))},
        attrs({{"mode", std::string("nearest")}}), false);
}

TEST_F(VulkanOpsTest, ResizeNearestOfI32) {
  check("Resize",
        {{i32({1, 1, 2, 3}, {-7, 0, 2147483647, 5, -2147483647 - 1, 9})},
         absent(),
         constant(f32({4}, {1, 1, 2.5f, 1.4f}))},
        attrs({{"mode", std::string("nearest")},
               {"coordinate_transformation_mode", std::string("asymmetric")}}));
}

// Sample i of a batch of 3 equals sample i resized alone, bit for bit.
TEST_F(VulkanOpsTest, ResizeIsBatchInvariant) {
  const Attributes a = attrs({{"mode", std::string("linear")}});
  const Tensor x = random_tensor({3, 2, 5, 7}, 15);
  const Tensor want =
      expected_of("Resize", {{x}, absent(), absent(), constant(i64({4}, {3, 2, 9, 4}))}, a);
  std::optional<Tensor> whole =
      run_op("Resize", {{x}, absent(), absent(), constant(i64({4}, {3, 2, 9, 4}))}, a, want, true);
  ASSERT_TRUE(whole.has_value());
  for (int64_t i = 0; i < 3; ++i) {
    const Tensor xi = slice_batch(x, i);
    const Tensor wi = slice_batch(want, i);
    std::optional<Tensor> one =
        run_op("Resize", {{xi}, absent(), absent(), constant(i64({4}, {1, 2, 9, 4}))}, a, wi, true);
    ASSERT_TRUE(one.has_value());
    EXPECT_EQ(std::memcmp(one->data(), whole->data() + i * one->byte_size(), one->byte_size()), 0);
  }
}

// A device without 8-bit storage or shaderInt64: the kernels needing them refuse (the dispatch
// then runs on the CPU fallback) when a dispatch is planned for it.
TEST_F(VulkanOpsTest, KernelsRefuseWithoutTheFeaturesTheyNeed) {
  SpecBuilder s;
  const int32_t a = s.input("a", {3}, DType::kF32);
  const int32_t c = s.input("c", {3}, DType::kBool);
  const int32_t i = s.input("i", {3}, DType::kI64);
  const int32_t y = s.output("y", {3}, DType::kBool);
  const int32_t f = s.output("f", {3}, DType::kF32);
  s.dispatch("equal", "Equal", {a, a}, {y});
  s.dispatch("where", "Where", {c, a, a}, {f});
  s.dispatch("cast", "Cast", {i}, {f}, attrs({{"to", int64_t{1}}}));
  const BuildKernel builds[] = {build_compare, build_where, build_cast};
  for (bool has_8bit : {false, true}) {
    PhysicalDeviceInfo info = vulkan().context().info();
    info.storage_buffer_8bit = has_8bit;
    info.shader_int64 = false;
    for (size_t d = 0; d < 3; ++d) {
      KernelBuilder b(info, nullptr, nullptr, s.spec().dispatches[d], s.spec().values);
      const Status status = builds[d](b);
      // With 8-bit storage, only Cast (which needs shaderInt64 too) still refuses.
      const bool refused = !has_8bit || d == 2;
      EXPECT_EQ(status.code() == StatusCode::kUnimplemented, refused)
          << s.spec().dispatches[d].op_type << ": " << status.to_string();
      if (!refused) {
        EXPECT_TRUE(status.ok()) << status.to_string();
      }
    }
  }
}

}  // namespace
}  // namespace kiln::hal::vulkan
