// The Vulkan device end to end on small programs: selection, buffers and transfers, elementwise
// kernels against the float64 reference, the CPU fallback between GPU segments, --no-fallback,
// replayed command buffers, tensors beyond maxStorageBufferRange. The validation layer is on
// (vulkan_test_env.h) and any message it reports fails the run that follows it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/hal/vulkan/buffer_pool.h"
#include "kiln/hal/vulkan/vulkan_buffer.h"
#include "kiln/hal/vulkan/vulkan_context.h"
#include "kiln/hal/vulkan/vulkan_device.h"
#include "kiln/hal/vulkan/vulkan_executable.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/tensors.h"
#include "tests/support/vulkan/vulkan_test_env.h"

namespace kiln::hal::vulkan {
namespace {

using namespace kiln::testing;
using testing::make_vulkan_device;
using testing::VulkanDeviceTest;

TEST(VulkanDevices, ListsAUsableDeviceWithItsLimits) {
  auto devices = list_vulkan_devices();
  ASSERT_TRUE(devices.ok()) << devices.status().to_string();
  ASSERT_FALSE(devices->empty());
  bool usable = false;
  for (const PhysicalDeviceInfo& d : *devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.max_workgroup_count[0], 0u);
    EXPECT_GE(d.max_push_constants_size, 128u);
    usable = usable || d.usable;
  }
  EXPECT_TRUE(usable);
}

TEST(VulkanDevices, BadIndexIsAClearError) {
  DeviceOptions options;
  options.index = "99";
  auto context = VulkanContext::get("99");
  ASSERT_FALSE(context.ok());
  EXPECT_NE(context.status().message().find("vulkan:99"), std::string::npos)
      << context.status().message();
  auto word = VulkanContext::get("gpu");
  ASSERT_FALSE(word.ok());
  EXPECT_NE(word.status().message().find("device index"), std::string::npos);
}

TEST_F(VulkanDeviceTest, ValidationLayerIsOnInTests) {
  EXPECT_TRUE(vulkan().context().validation_enabled());
}

TEST_F(VulkanDeviceTest, BuffersRoundTripThroughTheQueue) {
  auto buffer = device_->allocator().allocate(4096, MemoryType::kDeviceLocal);
  ASSERT_TRUE(buffer.ok()) << buffer.status().to_string();
  std::vector<std::byte> in(1000), out(1000);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::byte>(i * 7);
  ASSERT_TRUE(device_->queue().write({buffer->get(), 96}, in).ok());
  ASSERT_TRUE(device_->queue().read({buffer->get(), 96}, out).ok());
  EXPECT_EQ(in, out);
  Status outside = device_->queue().write({buffer->get(), 4000}, in);
  EXPECT_EQ(outside.code(), StatusCode::kOutOfRange) << outside.to_string();
}

struct UnaryCase {
  std::string op;
  Attributes attributes;
};

class VulkanUnaryTest : public VulkanDeviceTest, public ::testing::WithParamInterface<UnaryCase> {};

TEST_P(VulkanUnaryTest, MatchesReferenceAndKeepsNaN) {
  const UnaryCase& c = GetParam();
  Tensor x = random_tensor({3, 5, 7}, 11, -4.0f, 4.0f);
  if (c.op == "Log" || c.op == "Sqrt") x = random_tensor({3, 5, 7}, 11, 0.01f, 4.0f);
  x.mutable_values<float>()[4] = std::numeric_limits<float>::quiet_NaN();
  SpecBuilder s;
  const int32_t xi = s.input("x", x.shape());
  const int32_t y = s.output("y", x.shape());
  s.dispatch("f", c.op, {xi}, {y}, c.attributes);
  ASSERT_TRUE(vulkan().runs_on_gpu(s.spec().dispatches[0], s.spec().values).ok());
  std::vector<Tensor> out = run(s, {x});
  ASSERT_EQ(out.size(), 1u);
  Tensor expected = reference(c.op, {x}, c.attributes);
  EXPECT_TRUE(all_close(out[0], expected, {.atol = 1e-5, .rtol = 1e-5})) << c.op;
  EXPECT_TRUE(std::isnan(out[0].values<float>()[4])) << c.op << " dropped a NaN";
}

Attributes with_float(const char* name, double v) {
  Attributes a;
  a.set(name, v);
  return a;
}
Attributes gelu_tanh() {
  Attributes a;
  a.set("approximate", std::string("tanh"));
  return a;
}

INSTANTIATE_TEST_SUITE_P(
    Functions, VulkanUnaryTest,
    ::testing::Values(UnaryCase{"Relu"}, UnaryCase{"Sigmoid"}, UnaryCase{"Tanh"}, UnaryCase{"Erf"},
                      UnaryCase{"Gelu"}, UnaryCase{"Gelu", gelu_tanh()}, UnaryCase{"Exp"},
                      UnaryCase{"Log"}, UnaryCase{"Sqrt"}, UnaryCase{"Neg"}, UnaryCase{"Abs"},
                      UnaryCase{"LeakyRelu", with_float("alpha", 0.1)}, UnaryCase{"HardSigmoid"},
                      UnaryCase{"HardSwish"}, UnaryCase{"Elu", with_float("alpha", 0.5)},
                      UnaryCase{"Softplus"}, UnaryCase{"Floor"}, UnaryCase{"Ceil"},
                      UnaryCase{"Round"}, UnaryCase{"Softsign"}, UnaryCase{"Mish"}),
    [](const auto& info) {
      return info.param.op + (info.param.attributes.has("approximate") ? "Tanh" : "");
    });

struct BinaryCase {
  std::string op;
  ConcreteShape a, b;
};

class VulkanBinaryTest : public VulkanDeviceTest,
                         public ::testing::WithParamInterface<BinaryCase> {};

TEST_P(VulkanBinaryTest, BroadcastMatchesReference) {
  const BinaryCase& c = GetParam();
  Tensor a = random_tensor(c.a, 1, -2.0f, 2.0f);
  Tensor b = random_tensor(c.b, 2, 0.5f, 2.0f);
  Tensor expected = reference(c.op, {a, b});
  SpecBuilder s;
  const int32_t ai = s.input("a", c.a);
  const int32_t bi = s.input("b", c.b);
  const int32_t y = s.output("y", expected.shape());
  s.dispatch("op", c.op, {ai, bi}, {y});
  std::vector<Tensor> out = run(s, {a, b});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(all_close(out[0], expected, {.atol = 1e-5, .rtol = 1e-5}));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, VulkanBinaryTest,
    ::testing::Values(BinaryCase{"Add", {2, 3, 4}, {2, 3, 4}}, BinaryCase{"Sub", {2, 3, 4}, {}},
                      BinaryCase{"Mul", {2, 3, 4}, {4}}, BinaryCase{"Div", {2, 3, 4}, {3, 1}},
                      BinaryCase{"Max", {3, 1, 5}, {4, 1}}, BinaryCase{"Min", {1, 4}, {3, 1}},
                      BinaryCase{"Pow", {4}, {2, 3, 4}},
                      BinaryCase{"Add", {1, 2, 1, 3, 1, 2}, {2, 1, 3, 4, 1}}),
    [](const auto& info) { return info.param.op + std::to_string(info.index); });

TEST_F(VulkanDeviceTest, PowOfNegativeBasesFollowsOnnx) {
  Tensor a = f32({4}, {-2.0, -2.0, 0.0, -8.0});
  Tensor b = f32({4}, {2.0, 3.0, 0.0, 0.5});
  SpecBuilder s;
  const int32_t ai = s.input("a", {4});
  const int32_t bi = s.input("b", {4});
  const int32_t y = s.output("y", {4});
  s.dispatch("pow", "Pow", {ai, bi}, {y});
  std::vector<Tensor> out = run(s, {a, b});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(all_close(out[0], {4}, {4.0, -8.0, 1.0, std::nan("")}));
}

// Relu on the GPU, Hardmax (no Vulkan kernel) on the CPU fallback, Sigmoid on the GPU again.
TEST_F(VulkanDeviceTest, FallbackRunsBetweenGpuSegments) {
  Tensor x = random_tensor({2, 3, 4}, 5);
  SpecBuilder s;
  const int32_t xi = s.input("x", {2, 3, 4});
  const int32_t r = s.value("r", {2, 3, 4});
  const int32_t t = s.value("t", {2, 3, 4});
  const int32_t y = s.output("y", {2, 3, 4});
  s.dispatch("relu", "Relu", {xi}, {r});
  s.dispatch("hardmax", "Hardmax", {r}, {t});
  s.dispatch("sigmoid", "Sigmoid", {t}, {y});
  auto exe = device_->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  const auto& placements = static_cast<VulkanExecutable&>(**exe).placements();
  ASSERT_EQ(placements.size(), 3u);
  EXPECT_TRUE(placements[0].on_gpu);
  EXPECT_FALSE(placements[1].on_gpu);
  EXPECT_NE(placements[1].reason.find("Hardmax"), std::string::npos) << placements[1].reason;
  EXPECT_TRUE(placements[2].on_gpu);
  EXPECT_NE((*exe)->describe_dispatch(1).front().find("cpu fallback"), std::string::npos);
  auto out = run_program(*device_, **exe, s.spec(), {x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  Tensor expected = reference("Sigmoid", {reference("Hardmax", {ref_relu(x)})});
  EXPECT_TRUE(all_close((*out)[0], expected, {.atol = 1e-6, .rtol = 1e-6}));
}

// Two 3-D convolutions (CPU fallback) form a CPU sample group inside their host segment: the
// Vulkan executable reports it in its own dispatch positions, so the arena keeps the group's
// values apart, and the result has the bits of the run without groups.
TEST_F(VulkanDeviceTest, AHostSegmentReportsItsSampleGroups) {
  const Tensor x = random_tensor({3, 2, 4, 4, 4}, 8);
  const Tensor w = random_tensor({2, 2, 1, 1, 1}, 9, -0.5f, 0.5f);
  SpecBuilder s;
  const int32_t xi = s.input("x", {3, 2, 4, 4, 4});
  const int32_t r = s.value("r", {3, 2, 4, 4, 4});
  const int32_t a = s.value("a", {3, 2, 4, 4, 4});
  const int32_t b = s.value("b", {3, 2, 4, 4, 4});
  const int32_t y = s.output("y", {3, 2, 4, 4, 4});
  s.dispatch("relu", "Relu", {xi}, {r});
  s.dispatch("conv_a", "Conv", {r, s.constant("w", w)}, {a});
  s.dispatch("conv_b", "Conv", {a, s.constant("w2", w)}, {b});
  s.dispatch("sigmoid", "Sigmoid", {b}, {y});
  DeviceOptions grouped_options, whole_options;
  grouped_options.sample_group_bytes = 0;
  whole_options.sample_group_bytes = std::numeric_limits<uint64_t>::max();
  std::vector<std::vector<Tensor>> outputs;
  for (const DeviceOptions& options : {grouped_options, whole_options}) {
    auto device = make_vulkan_device(options);
    ASSERT_NE(device, nullptr);
    auto exe = device->prepare(s.spec());
    ASSERT_TRUE(exe.ok()) << exe.status().to_string();
    using Ranges = std::vector<std::pair<int32_t, int32_t>>;
    const Ranges expected = options.sample_group_bytes == 0u ? Ranges{{1, 3}} : Ranges{};
    EXPECT_EQ((*exe)->interleaved_dispatches(), expected);
    auto out = run_program(*device, **exe, s.spec(), {x});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    outputs.push_back(std::move(out).value());
  }
  EXPECT_TRUE(identical(outputs[0][0], outputs[1][0]));
}

// Shape's output is known when the program is prepared: it is uploaded with the plan and copied on
// the GPU, so shape arithmetic does not split the GPU work. Without a known value (a malformed
// program) it would need the CPU.
TEST_F(VulkanDeviceTest, ShapeRunsOnTheGpuFromItsKnownValue) {
  SpecBuilder s;
  const int32_t xi = s.input("x", {2, 3, 5});
  const int32_t shape = s.output("shape", {3}, DType::kI64);
  s.dispatch("shape", "Shape", {xi}, {shape});
  s.spec().values[shape].known_value = i64({3}, {2, 3, 5});
  ASSERT_TRUE(vulkan().runs_on_gpu(s.spec().dispatches[0], s.spec().values).ok());
  std::vector<Tensor> out = run(s, {random_tensor({2, 3, 5}, 1)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(identical(out[0], i64({3}, {2, 3, 5})));
  s.spec().values[shape].known_value.reset();
  Status unknown = vulkan().runs_on_gpu(s.spec().dispatches[0], s.spec().values);
  EXPECT_EQ(unknown.code(), StatusCode::kUnimplemented) << unknown.to_string();
}

// As on a discrete GPU, whose memory the host cannot map: every transfer goes through a staging
// buffer and the CPU fallback reads and writes its values through copies.
class VulkanHiddenMemoryTest : public VulkanDeviceTest {
 protected:
  void SetUp() override {
    set_device_memory_hidden_for_testing(true);
    VulkanDeviceTest::SetUp();
  }
  void TearDown() override {
    VulkanDeviceTest::TearDown();
    set_device_memory_hidden_for_testing(false);
  }
};

TEST_F(VulkanHiddenMemoryTest, StagedTransfersAndFallbackCopiesGiveTheSameResults) {
  auto buffer = device_->allocator().allocate(256, MemoryType::kDeviceLocal);
  ASSERT_TRUE(buffer.ok()) << buffer.status().to_string();
  EXPECT_EQ((*buffer)->host_data(), nullptr);
  std::vector<std::byte> in(200), out(200);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::byte>(i * 3 + 1);
  ASSERT_TRUE(device_->queue().write({buffer->get(), 40}, in).ok());
  ASSERT_TRUE(device_->queue().read({buffer->get(), 40}, out).ok());
  EXPECT_EQ(in, out);

  // Relu on the GPU, Hardmax on the CPU fallback (through copies), Neg on the GPU.
  Tensor x = random_tensor({3, 7}, 9);
  SpecBuilder s;
  const int32_t xi = s.input("x", {3, 7});
  const int32_t r = s.value("r", {3, 7});
  const int32_t h = s.value("h", {3, 7});
  const int32_t y = s.output("y", {3, 7});
  s.dispatch("relu", "Relu", {xi}, {r});
  s.dispatch("hardmax", "Hardmax", {r}, {h});
  s.dispatch("neg", "Neg", {h}, {y});
  std::vector<Tensor> got = run(s, {x});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(identical(got[0], reference("Neg", {reference("Hardmax", {ref_relu(x)})})));
}

TEST(VulkanNoFallback, RefusesWhatTheGpuCannotRunNamingTheDispatch) {
  DeviceOptions options;
  options.allow_fallback = false;
  std::unique_ptr<Device> device = make_vulkan_device(options);
  ASSERT_NE(device, nullptr);
  SpecBuilder s;
  const int32_t xi = s.input("x", {2, 3});
  const int32_t y = s.output("y", {2, 3});
  s.dispatch("the_hardmax", "Hardmax", {xi}, {y});
  auto exe = device->prepare(s.spec());
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(exe.status().message().find("the_hardmax"), std::string::npos);
  EXPECT_NE(exe.status().message().find("--no-fallback"), std::string::npos);
  EXPECT_FALSE(device->supports(s.spec().dispatches[0], s.spec().values).ok());
}

// A training_mode known only when the program runs: the CPU runs the Dropout, in either mode.
TEST_F(VulkanDeviceTest, DropoutWithARunTimeTrainingModeRunsOnTheCpu) {
  SpecBuilder s;
  const int32_t xi = s.input("x", {4});
  const int32_t ti = s.input("training_mode", {}, DType::kBool);
  const int32_t y = s.output("y", {4});
  s.dispatch("dropout", "Dropout", {xi, -1, ti}, {y});
  auto exe = device_->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  EXPECT_FALSE(static_cast<VulkanExecutable&>(**exe).placements()[0].on_gpu);
  Tensor x = random_tensor({4}, 6);
  auto off = run_program(*device_, **exe, s.spec(), {x, boolean({}, {0})});
  ASSERT_TRUE(off.ok()) << off.status().to_string();
  EXPECT_TRUE(all_close((*off)[0], x, {.atol = 0, .rtol = 0}));
  // True: the CPU's kernel drops or doubles each element (default ratio 0.5).
  auto on = run_program(*device_, **exe, s.spec(), {x, boolean({}, {1})});
  ASSERT_TRUE(on.ok()) << on.status().to_string();
  for (int64_t i = 0; i < 4; ++i) {
    const float got = (*on)[0].values<float>()[i];
    EXPECT_TRUE(got == 0.0f || got == 2 * x.values<float>()[i]) << i << ": " << got;
  }
}

TEST_F(VulkanDeviceTest, ReplayedRunsSeeNewInputs) {
  SpecBuilder s;
  const int32_t xi = s.input("x", {64});
  const int32_t r = s.value("r", {64});
  const int32_t y = s.output("y", {64});
  s.dispatch("relu", "Relu", {xi}, {r});
  s.dispatch("neg", "Neg", {r}, {y});
  auto exe = device_->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    Tensor x = random_tensor({64}, seed);
    auto out = run_program(*device_, **exe, s.spec(), {x});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_TRUE(all_close((*out)[0], reference("Neg", {ref_relu(x)}), {.atol = 0, .rtol = 0}));
  }
}

// The runtime allocates a run's arena, inputs and outputs anew for every call; the allocator's pool
// gives the same buffers back, so the plan's command buffers are recorded once and replayed.
TEST_F(VulkanDeviceTest, CommandBuffersAreRecordedOnceAndReplayedAcrossCalls) {
  SpecBuilder s;
  const int32_t xi = s.input("x", {64});
  const int32_t r = s.value("r", {64});
  const int32_t h = s.value("h", {64});
  const int32_t y = s.output("y", {64});
  s.dispatch("relu", "Relu", {xi}, {r});
  s.dispatch("hardmax", "Hardmax", {r}, {h});  // CPU fallback: two GPU segments around it
  s.dispatch("neg", "Neg", {h}, {y});
  auto exe = device_->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  auto& vulkan_exe = static_cast<VulkanExecutable&>(**exe);
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    Tensor x = random_tensor({64}, seed);
    auto out = run_program(*device_, **exe, s.spec(), {x});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_TRUE(identical((*out)[0], reference("Neg", {reference("Hardmax", {ref_relu(x)})})));
    EXPECT_EQ(vulkan_exe.recordings(), 2u) << "after call " << seed;
  }
  EXPECT_GT(static_cast<VulkanAllocator&>(device_->allocator()).pool().buffers(), 0u);
}

TEST_F(VulkanDeviceTest, ConstantsAreUploadedOncePerDevice) {
  Tensor bias = random_tensor({16}, 3);
  SpecBuilder s;
  const int32_t xi = s.input("x", {4, 16});
  const int32_t b = s.constant("b", bias);
  const int32_t y = s.output("y", {4, 16});
  s.dispatch("add", "Add", {xi, b}, {y});
  auto first = device_->prepare(s.spec());
  auto second = device_->prepare(s.spec());
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(vulkan().cached_constant_count(), 1u);
  Tensor x = random_tensor({4, 16}, 4);
  auto out = run_program(*device_, **second, s.spec(), {x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close((*out)[0], ref_binary('+', x, bias), {.atol = 0, .rtol = 0}));
}

// 36 Mi floats (144 MiB) exceed lavapipe's 128 MiB maxStorageBufferRange; kernels address
// buffers by pointer, so no range limit applies.
TEST_F(VulkanDeviceTest, TensorsBeyondTheStorageBufferRangeWork) {
  const int64_t n = int64_t{36} << 20;
  ASSERT_GT(static_cast<uint64_t>(n) * 4, uint64_t{128} << 20);
  Tensor x = *Tensor::create(DType::kF32, {n});
  auto values = x.mutable_values<float>();
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>((i % 1000) - 500);
  SpecBuilder s;
  const int32_t xi = s.input("x", {n});
  const int32_t y = s.output("y", {n});
  s.dispatch("relu", "Relu", {xi}, {y});
  std::vector<Tensor> out = run(s, {x});
  ASSERT_EQ(out.size(), 1u);
  auto got = out[0].values<float>();
  int64_t wrong = 0, first_wrong = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (got[i] != std::max(values[i], 0.0f)) {
      if (first_wrong < 0) first_wrong = i;
      ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0) << "first wrong element: " << first_wrong;
}

}  // namespace
}  // namespace kiln::hal::vulkan
