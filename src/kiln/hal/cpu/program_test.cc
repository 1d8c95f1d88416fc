// Whole programs on the CPU backend: a small ResNet-like network against the reference, arena
// sharing with NaN poisoning, two shape sets on one device sharing reordered weights, batch
// invariance (batch 8 vs each sample alone, bitwise), layout choices, and malformed specs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <limits>

#include "kiln/hal/cpu/cpu_device.h"
#include "kiln/hal/cpu/cpu_executable.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/hal/reference.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

std::unique_ptr<Device> device(int threads = 0) {
  auto d = create_cpu_device({threads});
  KILN_CHECK(d.ok());
  return std::move(d).value();
}

std::vector<int64_t> v(std::initializer_list<int64_t> l) { return l; }

// Weights of the ResNet-like test network, shared by every batch size.
struct Weights {
  Tensor stem = random_tensor({16, 3, 7, 7}, 101, -0.2f, 0.2f), stem_b = random_tensor({16}, 102);
  Tensor c1 = random_tensor({16, 16, 3, 3}, 103, -0.15f, 0.15f), c1_b = random_tensor({16}, 104);
  Tensor c2 = random_tensor({16, 16, 3, 3}, 105, -0.15f, 0.15f), c2_b = random_tensor({16}, 106);
  Tensor c3 = random_tensor({32, 16, 3, 3}, 107, -0.15f, 0.15f);
  Tensor bn_s = random_tensor({32}, 108, 0.5f, 1.5f), bn_b = random_tensor({32}, 109);
  Tensor bn_m = random_tensor({32}, 110), bn_v = random_tensor({32}, 111, 0.5f, 2.0f);
  Tensor c4 = random_tensor({32, 32, 1, 1}, 112, -0.3f, 0.3f);
  Tensor fc = random_tensor({10, 32}, 113), fc_b = random_tensor({10}, 114);
  Tensor flat_shape = i64({2}, std::vector<int64_t>{0, -1});
};

const Weights& weights() {
  static const Weights w;
  return w;
}

// x[N,3,32,32] -> conv7x7/2+relu -> maxpool3/2 -> conv3x3+relu -> conv3x3+residual+relu ->
// conv3x3/2 -> bn+relu -> conv1x1 -> add(bn) -> relu -> gap -> flatten -> gemm -> softmax.
void build_resnet_like(SpecBuilder& s, int64_t n) {
  const Weights& w = weights();
  auto pads = [](int64_t p) { return std::vector<int64_t>(4, p); };
  const int32_t x = s.input("x", {n, 3, 32, 32});
  const int32_t stem = s.value("stem", {n, 16, 16, 16});
  s.dispatch(
      "stem", "Conv", {x, s.constant("stem_w", w.stem), s.constant("stem_b", w.stem_b)}, {stem},
      attrs({{"strides", v({2, 2})}, {"pads", pads(3)}, {"kiln_activation", std::string("relu")}}));
  const int32_t pool = s.value("pool", {n, 16, 8, 8});
  s.dispatch("pool", "MaxPool", {stem}, {pool},
             attrs({{"kernel_shape", v({3, 3})}, {"strides", v({2, 2})}, {"pads", pads(1)}}));
  const int32_t c1 = s.value("c1", {n, 16, 8, 8});
  s.dispatch("c1", "Conv", {pool, s.constant("c1_w", w.c1), s.constant("c1_b", w.c1_b)}, {c1},
             attrs({{"pads", pads(1)}, {"kiln_activation", std::string("relu")}}));
  const int32_t c2 = s.value("c2", {n, 16, 8, 8});
  s.dispatch("c2", "Conv", {c1, s.constant("c2_w", w.c2), s.constant("c2_b", w.c2_b), pool}, {c2},
             attrs({{"pads", pads(1)}, {"kiln_activation", std::string("relu")}}));
  const int32_t c3 = s.value("c3", {n, 32, 4, 4});
  s.dispatch("c3", "Conv", {c2, s.constant("c3_w", w.c3)}, {c3},
             attrs({{"pads", pads(1)}, {"strides", v({2, 2})}}));
  const int32_t bn = s.value("bn", {n, 32, 4, 4});
  s.dispatch("bn", "BatchNormalization",
             {c3, s.constant("bn_s", w.bn_s), s.constant("bn_b", w.bn_b),
              s.constant("bn_m", w.bn_m), s.constant("bn_v", w.bn_v)},
             {bn}, attrs({{"epsilon", 1e-5}, {"kiln_activation", std::string("relu")}}));
  const int32_t c4 = s.value("c4", {n, 32, 4, 4});
  s.dispatch("c4", "Conv", {bn, s.constant("c4_w", w.c4)}, {c4});
  const int32_t add = s.value("add", {n, 32, 4, 4});
  s.dispatch("add", "Add", {c4, bn}, {add});
  const int32_t relu = s.value("relu", {n, 32, 4, 4});
  s.dispatch("relu", "Relu", {add}, {relu});
  const int32_t gap = s.value("gap", {n, 32, 1, 1});
  s.dispatch("gap", "GlobalAveragePool", {relu}, {gap});
  const int32_t flat = s.output("features", {n, 32});
  s.dispatch("flatten", "Reshape", {gap, s.constant("flat_shape", w.flat_shape)}, {flat});
  const int32_t logits = s.value("logits", {n, 10});
  s.dispatch("fc", "Gemm", {flat, s.constant("fc_w", w.fc), s.constant("fc_b", w.fc_b)}, {logits},
             attrs({{"transB", int64_t{1}}}));
  const int32_t probs = s.output("probs", {n, 10});
  s.dispatch("softmax", "Softmax", {logits}, {probs}, attrs({{"axis", int64_t{1}}}));
}

std::vector<Tensor> reference_resnet_like(const Tensor& x) {
  const Weights& w = weights();
  const int64_t n = x.shape()[0];
  auto conv = [](const Tensor& in, const Tensor& wt, const Tensor* b, const Tensor* res,
                 int64_t stride, int64_t pad, bool relu) {
    ConvRef p{{stride, stride}, {pad, pad}, {pad, pad}, {1, 1}, 1, {}};
    if (relu) p.activation.kind = kernels::FusedActivation::Kind::kRelu;
    return ref_conv(in, wt, b, res, p);
  };
  Tensor stem = conv(x, w.stem, &w.stem_b, nullptr, 2, 3, true);
  PoolRef pr{true, false, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {n, 16, 8, 8}};
  Tensor pool = ref_pool(stem, pr);
  Tensor c1 = conv(pool, w.c1, &w.c1_b, nullptr, 1, 1, true);
  Tensor c2 = conv(c1, w.c2, &w.c2_b, &pool, 1, 1, true);
  Tensor c3 = conv(c2, w.c3, nullptr, nullptr, 2, 1, false);
  Tensor bn = ref_batch_norm(c3, w.bn_s, w.bn_b, w.bn_m, w.bn_v, 1e-5, true);
  Tensor c4 = conv(bn, w.c4, nullptr, nullptr, 1, 0, false);
  Tensor relu = ref_relu(ref_binary('+', c4, bn));
  PoolRef gr{false, false, {4, 4}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, {n, 32, 1, 1}};
  Tensor features = ref_pool(relu, gr).reshaped({n, 32});
  Tensor logits = ref_gemm(features, w.fc, &w.fc_b, 1.0, 1.0, false, true);
  return {features, ref_softmax(logits, 1)};
}

TEST(CpuProgramTest, ResNetLikeMatchesReference) {
  SpecBuilder s;
  build_resnet_like(s, 3);
  Tensor x = random_tensor({3, 3, 32, 32}, 1);
  auto dev = device();
  auto exe = dev->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  auto out = run_program(**exe, s.spec(), {x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  auto expected = reference_resnet_like(x);
  EXPECT_TRUE(all_close((*out)[0], expected[0]));
  EXPECT_TRUE(all_close((*out)[1], expected[1], {.atol = 1e-6, .rtol = 1e-5}));
}

TEST(CpuProgramTest, ConvChainsKeepOneLayoutAndReorderOnlyAtTheEdges) {
  SpecBuilder s;
  build_resnet_like(s, 2);
  auto dev = device();
  auto exe = dev->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  auto& cpu = static_cast<CpuExecutable&>(**exe);
  std::string steps;
  for (const std::string& line : cpu.summary()) steps += line + "\n";
  std::cout << steps;
  // Reorders may only convert the graph input for the stem conv and the blocked features to
  // plain for Flatten/Reshape; the conv/pool/bn/add/relu chain runs in one layout.
  for (const std::string& line : cpu.summary()) {
    if (line.find(": reorder") == std::string::npos) continue;
    EXPECT_TRUE(line.rfind("stem (Conv): reorder plain", 0) == 0 || line.rfind("flatten", 0) == 0)
        << "unexpected reorder: " << line;
  }
  const auto& values = s.spec().values;
  std::string chain_layout;
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string& name = values[i].name;
    const std::string& layout = cpu.layout_of(static_cast<int32_t>(i));
    if (name == "stem" || name == "pool" || name == "c2" || name == "bn" || name == "add") {
      // The kind of layout (e.g. "aBcd8b" or "acdb") is the same along the chain.
      const std::string kind = layout.substr(0, layout.find(' '));
      if (chain_layout.empty()) chain_layout = kind;
      EXPECT_EQ(kind, chain_layout) << name << " is " << layout;
      EXPECT_NE(kind, "plain") << name << " is " << layout;
    }
    if (name == "logits") {
      EXPECT_EQ(layout, "plain 2x10");
    }
  }
}

TEST(CpuProgramTest, StorageBytesReportPaddedBlockedSize) {
  SpecBuilder s;
  const int32_t x = s.input("x", {2, 8, 5, 5});
  const int32_t c = s.value("c", {2, 5, 5, 5});
  s.dispatch("conv", "Conv", {x, s.constant("w", random_tensor({5, 8, 1, 1}, 1))}, {c});
  const int32_t y = s.output("y", {2, 5, 5, 5});
  s.dispatch("relu", "Relu", {c}, {y});
  auto exe = device()->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  auto& cpu = static_cast<CpuExecutable&>(**exe);
  const size_t plain = 2 * 5 * 5 * 5 * 4;
  const std::string layout = cpu.layout_of(c);
  if (layout.find("8b") != std::string::npos || layout.find("16b") != std::string::npos) {
    // Channels padded to the block: 5 -> 8 or 16.
    const size_t block = layout.find("16b") != std::string::npos ? 16 : 8;
    EXPECT_EQ(cpu.storage_bytes(c), plain / 5 * block) << layout;
  } else {
    EXPECT_EQ(cpu.storage_bytes(c), plain) << layout;
  }
  EXPECT_EQ(cpu.storage_bytes(x), 0u);
  EXPECT_EQ(cpu.storage_bytes(y), 0u);
}

TEST(CpuProgramTest, ArenaSharingAndNaNPoisonDoNotChangeResults) {
  SpecBuilder s;
  build_resnet_like(s, 2);
  Tensor x = random_tensor({2, 3, 32, 32}, 2);
  auto dev = device();
  auto exe = dev->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  auto separate = run_program(**exe, s.spec(), {x}, {.share_memory = false, .poison = false});
  ASSERT_TRUE(separate.ok()) << separate.status().to_string();
  const size_t separate_bytes = last_arena_bytes();
  for (int i = 0; i < 3; ++i) {
    auto shared = run_program(**exe, s.spec(), {x}, {.share_memory = true, .poison = true});
    ASSERT_TRUE(shared.ok()) << shared.status().to_string();
    EXPECT_LT(last_arena_bytes(), separate_bytes);
    for (size_t o = 0; o < shared->size(); ++o) {
      EXPECT_TRUE(identical((*shared)[o], (*separate)[o])) << "output " << o << " run " << i;
    }
  }
}

TEST(CpuProgramTest, TwoShapeSetsOnOneDeviceShareWeights) {
  auto dev = device();
  auto* cpu = static_cast<CpuDevice*>(dev.get());
  SpecBuilder s1, s8;
  build_resnet_like(s1, 1);
  build_resnet_like(s8, 8);
  auto e1 = dev->prepare(s1.spec());
  ASSERT_TRUE(e1.ok()) << e1.status().to_string();
  const size_t after_first = cpu->cached_weight_count();
  EXPECT_GT(after_first, 0u);
  auto e8 = dev->prepare(s8.spec());
  ASSERT_TRUE(e8.ok()) << e8.status().to_string();
  // Conv weights are shared; at most the FC's preferred layout may differ between M=1 and M=8.
  EXPECT_LE(cpu->cached_weight_count(), after_first + 1);
  Tensor x8 = random_tensor({8, 3, 32, 32}, 3);
  auto out8 = run_program(**e8, s8.spec(), {x8});
  ASSERT_TRUE(out8.ok()) << out8.status().to_string();
  auto expected = reference_resnet_like(x8);
  EXPECT_TRUE(all_close((*out8)[0], expected[0]));
  EXPECT_TRUE(all_close((*out8)[1], expected[1], {.atol = 1e-6, .rtol = 1e-5}));
  Tensor x1 = slice_batch(x8, 5);
  auto out1 = run_program(**e1, s1.spec(), {x1});
  ASSERT_TRUE(out1.ok()) << out1.status().to_string();
  EXPECT_TRUE(all_close((*out1)[1], slice_batch(expected[1], 5), {.atol = 1e-6, .rtol = 1e-5}));
  e1->reset();
  e8->reset();
  EXPECT_EQ(cpu->cached_weight_count(), 0u);
}

// The runtime's plan cache (runtime/plan_cache.h) keeps one executable per width and charges
// each its memory_bytes(); the weights must be one shared copy, not one per width, and go with
// the last executable that holds them. (From 72 pixels on, where every width runs the same
// kernels: a channels-last 1x1 conv of up to 64 pixels runs kiln's gemm, with its own packing.)
TEST(CpuProgramTest, WeightsAreSharedAcrossWidthsAndFreedWithTheLastExecutable) {
  auto dev = device();
  auto* cpu = static_cast<CpuDevice*>(dev.get());
  const Tensor w = random_tensor({16, 8, 3, 3}, 9, -0.2f, 0.2f);
  const Tensor w1x1 = random_tensor({4, 16, 1, 1}, 10, -0.2f, 0.2f);
  std::vector<std::unique_ptr<Executable>> held;
  size_t after_first = 0;
  for (int64_t width = 12; width <= 48; width += 3) {
    SpecBuilder s;
    int32_t x = s.input("x", {1, 8, 6, width});
    int32_t c = s.value("c", {1, 16, 6, width});
    int32_t y = s.output("y", {1, 4, 6, width});
    Attributes pads;
    pads.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    s.dispatch("conv", "Conv", {x, s.constant("w", w)}, {c}, pads);
    s.dispatch("head", "Conv", {c, s.constant("w1x1", w1x1)}, {y});
    auto exe = dev->prepare(s.spec());
    ASSERT_TRUE(exe.ok()) << exe.status().to_string();
    EXPECT_GT((*exe)->memory_bytes(), 0u);
    if (held.empty()) after_first = cpu->cached_weight_count();
    EXPECT_EQ(cpu->cached_weight_count(), after_first) << "width " << width;
    held.push_back(std::move(exe).value());
  }
  EXPECT_GT(after_first, 0u);
  held.erase(held.begin(), held.end() - 1);  // evict all but one
  EXPECT_EQ(cpu->cached_weight_count(), after_first);
  held.clear();
  EXPECT_EQ(cpu->cached_weight_count(), 0u);
}

// Runs `build` at batch 8 and at batch 1 for every sample; every output row must match bitwise.
void expect_batch_invariant(const std::function<void(SpecBuilder&, int64_t)>& build,
                            const ConcreteShape& sample_shape, const std::string& what) {
  SCOPED_TRACE(what);
  auto dev = device();
  SpecBuilder s1, s8;
  build(s1, 1);
  build(s8, 8);
  auto e1 = dev->prepare(s1.spec());
  auto e8 = dev->prepare(s8.spec());
  ASSERT_TRUE(e1.ok()) << e1.status().to_string();
  ASSERT_TRUE(e8.ok()) << e8.status().to_string();
  for (const std::string& line : static_cast<CpuExecutable&>(**e8).summary()) {
    std::cout << "  [batch 8] " << line << "\n";
  }
  ConcreteShape shape8 = sample_shape;
  shape8.insert(shape8.begin(), 8);
  Tensor x8 = random_tensor(shape8, 42);
  auto out8 = run_program(**e8, s8.spec(), {x8});
  ASSERT_TRUE(out8.ok()) << out8.status().to_string();
  for (int64_t i = 0; i < 8; ++i) {
    auto out1 = run_program(**e1, s1.spec(), {slice_batch(x8, i)});
    ASSERT_TRUE(out1.ok()) << out1.status().to_string();
    for (size_t o = 0; o < out1->size(); ++o) {
      EXPECT_TRUE(identical((*out1)[o], slice_batch((*out8)[o], i)))
          << "sample " << i << " output " << o;
    }
  }
}

TEST(CpuBatchInvarianceTest, ResNetLike) {
  expect_batch_invariant(build_resnet_like, {3, 32, 32}, "resnet-like");
}

TEST(CpuBatchInvarianceTest, ResNetSizedConvReluChainAndPools) {
  static const Tensor w1 = random_tensor({64, 64, 3, 3}, 1, -0.05f, 0.05f);
  static const Tensor w2 = random_tensor({256, 64, 1, 1}, 2, -0.1f, 0.1f);
  static const Tensor w3 = random_tensor({128, 256, 1, 1}, 3, -0.1f, 0.1f);
  static const Tensor w4 = random_tensor({128, 128, 3, 3}, 4, -0.05f, 0.05f);
  auto build = [](SpecBuilder& s, int64_t n) {
    const int32_t x = s.input("x", {n, 64, 28, 28});
    const int32_t a = s.value("a", {n, 64, 28, 28});
    s.dispatch("c3x3", "Conv", {x, s.constant("w1", w1)}, {a},
               attrs({{"pads", v({1, 1, 1, 1})}, {"kiln_activation", std::string("relu")}}));
    const int32_t b = s.value("b", {n, 256, 28, 28});
    s.dispatch("c1x1_up", "Conv", {a, s.constant("w2", w2)}, {b},
               attrs({{"kiln_activation", std::string("relu")}}));
    const int32_t c = s.value("c", {n, 128, 14, 14});
    s.dispatch("c1x1_s2", "Conv", {b, s.constant("w3", w3)}, {c}, attrs({{"strides", v({2, 2})}}));
    const int32_t d = s.value("d", {n, 128, 14, 14});
    s.dispatch("c3x3_res", "Conv", {c, s.constant("w4", w4), -1, c}, {d},
               attrs({{"pads", v({1, 1, 1, 1})}, {"kiln_activation", std::string("relu")}}));
    const int32_t mp = s.output("max", {n, 128, 7, 7});
    s.dispatch(
        "maxpool", "MaxPool", {d}, {mp},
        attrs({{"kernel_shape", v({3, 3})}, {"strides", v({2, 2})}, {"pads", v({1, 1, 1, 1})}}));
    const int32_t ap = s.output("avg", {n, 128, 7, 7});
    s.dispatch("avgpool", "AveragePool", {d}, {ap},
               attrs({{"kernel_shape", v({2, 2})}, {"strides", v({2, 2})}}));
    const int32_t gp = s.output("gap", {n, 128, 1, 1});
    s.dispatch("gap", "GlobalAveragePool", {d}, {gp});
  };
  expect_batch_invariant(build, {64, 28, 28}, "conv chain");
}

TEST(CpuBatchInvarianceTest, ResNetSizedGemmAndMatMul) {
  static const Tensor fc = random_tensor({1000, 2048}, 5, -0.05f, 0.05f);
  static const Tensor fc_b = random_tensor({1000}, 6);
  static const Tensor mm = random_tensor({2048, 64}, 7, -0.05f, 0.05f);
  auto build = [](SpecBuilder& s, int64_t n) {
    const int32_t x = s.input("x", {n, 2048});
    const int32_t y = s.output("fc", {n, 1000});
    s.dispatch("fc", "Gemm", {x, s.constant("fc", fc), s.constant("fc_b", fc_b)}, {y},
               attrs({{"transB", int64_t{1}}}));
    const int32_t z = s.output("mm", {n, 64});
    s.dispatch("mm", "MatMul", {x, s.constant("mm", mm)}, {z});
    const int32_t p = s.output("softmax", {n, 1000});
    s.dispatch("softmax", "Softmax", {y}, {p}, attrs({{"axis", int64_t{1}}}));
  };
  expect_batch_invariant(build, {2048}, "gemm");
}

TEST(CpuBatchInvarianceTest, BatchedMatMul) {
  static const Tensor w = random_tensor({96, 40}, 8);
  auto build = [](SpecBuilder& s, int64_t n) {
    const int32_t x = s.input("x", {n, 12, 96});
    const int32_t y = s.output("y", {n, 12, 40});
    s.dispatch("mm", "MatMul", {x, s.constant("w", w)}, {y});
  };
  expect_batch_invariant(build, {12, 96}, "batched matmul");
}

TEST(CpuProgramTest, SingleThreadDeviceMatchesReference) {
  auto dev = device(1);
  EXPECT_NE(dev->name().find("1 threads"), std::string::npos) << dev->name();
  SpecBuilder s;
  build_resnet_like(s, 2);
  Tensor x = random_tensor({2, 3, 32, 32}, 9);
  auto exe = dev->prepare(s.spec());
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  auto out = run_program(**exe, s.spec(), {x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(all_close((*out)[1], reference_resnet_like(x)[1], {.atol = 1e-6, .rtol = 1e-5}));
}

// ---- malformed specs and arguments ----

struct Bad {
  SpecBuilder s;
  int32_t x, y;
  Bad() {
    x = s.input("x", {1, 4, 6, 6});
    y = s.output("y", {1, 4, 6, 6});
  }
};

void expect_error(const Status& st, StatusCode code, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), code) << st.to_string();
  for (const char* p : parts) {
    EXPECT_NE(st.to_string().find(p), std::string::npos)
        << "'" << p << "' not in: " << st.to_string();
  }
}

TEST(CpuBadSpecTest, AutoPadSameIsResolvedForTheFastPath) {
  // The compiler canonicalizes pads; a dispatch that still has auto_pad (a symbolic dim decided
  // the padding) is resolved from its concrete dims by Conv's definition (read_conv_attributes),
  // which the oneDNN path reads.
  Bad b;
  b.s.dispatch("conv_same", "Conv", {b.x, b.s.constant("w", random_tensor({4, 4, 3, 3}, 1))}, {b.y},
               attrs({{"auto_pad", std::string("SAME_UPPER")}}));
  auto dev = device();
  EXPECT_TRUE(dev->supports(b.s.spec().dispatches[0], b.s.spec().values).ok());
  EXPECT_TRUE(dev->prepare(b.s.spec()).ok());
}

TEST(CpuBadSpecTest, UnsupportedOpIsRejected) {
  Bad b;
  b.s.dispatch("mystery", "StringNormalizer", {b.x}, {b.y});
  auto dev = device();
  expect_error(dev->supports(b.s.spec().dispatches[0], b.s.spec().values),
               StatusCode::kUnimplemented,
               {"'mystery' (StringNormalizer)", "op type 'StringNormalizer' is not supported"});
  expect_error(dev->prepare(b.s.spec()).status(), StatusCode::kUnimplemented, {"mystery"});
}

TEST(CpuBadSpecTest, WrongInputCountIsRejected) {
  Bad b;
  b.s.dispatch("relu2", "Relu", {b.x, b.x}, {b.y});
  expect_error(device()->prepare(b.s.spec()).status(), StatusCode::kInvalidArgument,
               {"'relu2' (Relu)", "expects 1 inputs, got 2"});
  Bad c;
  c.s.dispatch("conv1", "Conv", {c.x}, {c.y});
  expect_error(device()->prepare(c.s.spec()).status(), StatusCode::kInvalidArgument,
               {"'conv1' (Conv)", "expects 2 to 4 inputs, got 1"});
}

TEST(CpuBadSpecTest, UnknownAttributeAndActivationAreRejected) {
  Bad b;
  b.s.dispatch("r", "Relu", {b.x}, {b.y}, attrs({{"alpha", 0.1}}));
  expect_error(device()->prepare(b.s.spec()).status(), StatusCode::kUnimplemented,
               {"attribute 'alpha' is not supported"});
  Bad c;
  c.s.dispatch("conv", "Conv", {c.x, c.s.constant("w", random_tensor({4, 4, 1, 1}, 1))}, {c.y},
               attrs({{"kiln_activation", std::string("sigmoid")}}));
  expect_error(device()->prepare(c.s.spec()).status(), StatusCode::kInvalidArgument,
               {"'kiln_activation' must be", "got \"sigmoid\""});
  Bad crossed;
  crossed.s.dispatch("conv", "Conv",
                     {crossed.x, crossed.s.constant("w", random_tensor({4, 4, 1, 1}, 1))},
                     {crossed.y},
                     attrs({{"kiln_activation", std::string("clip")},
                            {"kiln_activation_min", 6.0},
                            {"kiln_activation_max", 0.0}}));
  expect_error(device()->prepare(crossed.s.spec()).status(), StatusCode::kInvalidArgument,
               {"'kiln_activation_min' = 6", "exceeds the maximum"});
}

TEST(CpuBadSpecTest, ConvShapeMismatchesAreRejected) {
  Bad b;
  b.s.dispatch("conv", "Conv", {b.x, b.s.constant("w", random_tensor({4, 4, 3, 3}, 1))}, {b.y});
  expect_error(device()->prepare(b.s.spec()).status(), StatusCode::kInvalidArgument,
               {"output 0 is declared f32 [1,4,6,6] but the op gives f32 [1,4,4,4]"});
  Bad c;
  c.s.dispatch("conv", "Conv", {c.x, c.s.constant("w", random_tensor({4, 3, 1, 1}, 1))}, {c.y});
  expect_error(device()->prepare(c.s.spec()).status(), StatusCode::kInvalidArgument,
               {"input 0 'X' dim 1 (channels", "must be 3, got 4"});
}

TEST(CpuBadSpecTest, StructuralErrorsAreRejected) {
  {
    Bad b;  // index out of range
    b.s.dispatch("r", "Relu", {17}, {b.y});
    expect_error(device()->prepare(b.s.spec()).status(), StatusCode::kInvalidArgument,
                 {"input 0 refers to value 17"});
  }
  {
    Bad b;  // consumed before produced
    const int32_t t = b.s.value("t", {1, 4, 6, 6});
    b.s.dispatch("first", "Relu", {t}, {b.y});
    b.s.dispatch("second", "Relu", {b.x}, {t});
    expect_error(device()->prepare(b.s.spec()).status(), StatusCode::kInvalidArgument,
                 {"'first' (Relu)", "'t' is not produced by an earlier dispatch"});
  }
  {
    Bad b;  // produced twice
    b.s.dispatch("a", "Relu", {b.x}, {b.y});
    b.s.dispatch("b", "Relu", {b.x}, {b.y});
    expect_error(device()->prepare(b.s.spec()).status(), StatusCode::kInvalidArgument,
                 {"'b' (Relu)", "already produced"});
  }
  {
    Bad b;  // graph output never produced
    expect_error(device()->prepare(b.s.spec()).status(), StatusCode::kInvalidArgument,
                 {"graph output 'y' is not produced"});
  }
  {
    Bad b;  // writes a graph input
    b.s.dispatch("w", "Relu", {b.x}, {b.x});
    expect_error(device()->prepare(b.s.spec()).status(), StatusCode::kInvalidArgument,
                 {"cannot be written"});
  }
  {
    Bad b;  // constant without data
    const int32_t c = b.s.constant("c", random_tensor({1}, 1));
    b.s.spec().values[c].constant = nullptr;
    b.s.dispatch("r", "Relu", {b.x}, {b.y});
    expect_error(device()->prepare(b.s.spec()).status(), StatusCode::kInvalidArgument,
                 {"constant 'c' has no data"});
  }
}

TEST(CpuBadSpecTest, BadRunArgumentsAreRejected) {
  Bad b;
  b.s.dispatch("r", "Relu", {b.x}, {b.y});
  auto exe = device()->prepare(b.s.spec());
  ASSERT_TRUE(exe.ok());
  expect_error(run_program(**exe, b.s.spec(), {random_tensor({1, 4, 6, 5}, 1)}).status(),
               StatusCode::kInvalidArgument,
               {"input 0 'x' must be f32 [1,4,6,6]", "got f32 [1,4,6,5]"});
  expect_error(run_program(**exe, b.s.spec(), {}).status(), StatusCode::kInvalidArgument,
               {"got 0 inputs"});
  RunArgs args;
  expect_error((*exe)->run(args), StatusCode::kInvalidArgument, {"value bindings"});
}

TEST(CpuBadSpecTest, NegativeThreadsAreRejected) {
  expect_error(create_cpu_device({-1}).status(), StatusCode::kInvalidArgument, {"threads"});
}

// Reshape of a plain intermediate that nothing reads later takes over its bytes (no copy, the
// runtime places both at one offset); one that is read again, or a graph input, is copied. Values
// are right either way.
TEST(CpuProgramTest, ReshapeOfALastReadIntermediateSharesItsBytes) {
  for (bool read_later : {false, true}) {
    SCOPED_TRACE(read_later);
    SpecBuilder s;
    const int32_t a = s.input("a", {2, 3, 4});
    const int32_t b = s.input("b", {2, 3, 4});
    const int32_t sum = s.value("sum", {2, 3, 4});
    s.dispatch("add", "Add", {a, b}, {sum});
    const int32_t flat = s.value("flat", {6, 4});
    const int32_t shape = s.constant("shape", i64({2}, std::vector<int64_t>{6, 4}));
    s.dispatch("reshape", "Reshape", {sum, shape}, {flat});
    const int32_t y = s.output("y", {6, 4});
    if (read_later) {
      const int32_t again = s.value("again", {6, 4});
      const int32_t shape2 = s.constant("shape2", i64({2}, std::vector<int64_t>{6, 4}));
      s.dispatch("reshape_sum_again", "Reshape", {sum, shape2}, {again});
      s.dispatch("twice", "Add", {flat, again}, {y});
    } else {
      s.dispatch("twice", "Add", {flat, flat}, {y});
    }
    auto exe = device()->prepare(s.spec());
    ASSERT_TRUE(exe.ok()) << exe.status().to_string();
    EXPECT_EQ((*exe)->storage_shared_with(flat), read_later ? -1 : sum);
    Tensor ta = random_tensor({2, 3, 4}, 1), tb = random_tensor({2, 3, 4}, 2);
    auto out = run_program(**exe, s.spec(), {ta, tb});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    Tensor doubled = ref_binary('+', ta, tb);
    doubled = ref_binary('+', doubled, doubled);
    EXPECT_TRUE(all_close((*out)[0], doubled.reshaped({6, 4}), {.atol = 1e-6, .rtol = 1e-6}));
  }
}

// Transpose on a oneDNN reorder: the definition's values bit for bit (a NaN and -0 included), for
// the head split [B, S, H, D] -> [B, H, S, D], the default (reversed) perm and a 2-D one.
TEST(CpuProgramTest, TransposeIsAReorderWithTheDefinitionsBits) {
  struct Case {
    ConcreteShape x;
    std::vector<int64_t> perm;  // empty: the default
  };
  for (const Case& c :
       {Case{{2, 5, 3, 4}, {0, 2, 1, 3}}, Case{{2, 3, 4}, {}}, Case{{7, 33}, {1, 0}}}) {
    SCOPED_TRACE(c.x.size());
    Tensor x = random_tensor(c.x, 3);
    x.mutable_values<float>()[5] = std::numeric_limits<float>::quiet_NaN();
    x.mutable_values<float>()[6] = -0.0f;
    Attributes a;
    if (!c.perm.empty()) a.set("perm", c.perm);
    Tensor expected = reference("Transpose", {x}, a);
    SpecBuilder s;
    const int32_t xi = s.input("x", c.x);
    const int32_t y = s.output("y", expected.shape());
    s.dispatch("t", "Transpose", {xi}, {y}, a);
    auto exe = device()->prepare(s.spec());
    ASSERT_TRUE(exe.ok()) << exe.status().to_string();
    std::string steps;
    for (const std::string& line : static_cast<CpuExecutable&>(**exe).summary()) steps += line;
    EXPECT_NE(steps.find("reorder"), std::string::npos) << steps;
    auto out = run_program(**exe, s.spec(), {x});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_TRUE(identical((*out)[0], expected));
  }
}

// A tf2onnx-style NHWC graph: Transpose NHWC -> NCHW of a graph input, a 1x1 Conv (which writes
// channels-last here), Transpose back to NHWC, Relu. The transposes only relabel bytes: the first
// copies the graph input as it is into a channels-last output the conv reads directly, the second
// takes over the conv's bytes (nothing copied), unless the conv's output is read again later.
// A transpose of the channels-last conv output that is no relabelling reorders from the stored
// layout. Values equal the definitions' either way (transposes bit for bit).
TEST(CpuProgramTest, TransposesThatRelabelChannelsLastBytesCopyNothing) {
  for (bool read_later : {false, true}) {
    SCOPED_TRACE(read_later);
    Tensor x = random_tensor({2, 9, 7, 16}, 11);
    x.mutable_values<float>()[3] = std::numeric_limits<float>::quiet_NaN();
    Tensor w = random_tensor({24, 16, 1, 1}, 12);
    Attributes to_nchw, to_nhwc, swap_hw;
    to_nchw.set("perm", v({0, 3, 1, 2}));
    to_nhwc.set("perm", v({0, 2, 3, 1}));
    swap_hw.set("perm", v({0, 1, 3, 2}));
    const Tensor nchw = reference("Transpose", {x}, to_nchw);
    ConvRef cr{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1};
    const Tensor conv = ref_conv(nchw, w, nullptr, nullptr, cr);
    const Tensor expected = reference("Relu", {reference("Transpose", {conv}, to_nhwc)});
    const Tensor expected_swapped = reference("Transpose", {conv}, swap_hw);

    SpecBuilder s;
    const int32_t xi = s.input("x", x.shape());
    const int32_t t1 = s.value("t1", nchw.shape());
    s.dispatch("to_nchw", "Transpose", {xi}, {t1}, to_nchw);
    const int32_t c = s.value("c", conv.shape());
    s.dispatch("conv", "Conv", {t1, s.constant("w", w)}, {c}, attrs({{"kernel_shape", v({1, 1})}}));
    int32_t swapped = -1;
    if (read_later) {
      swapped = s.value("swapped", expected_swapped.shape());
    }
    const int32_t t2 = s.value("t2", expected.shape());
    s.dispatch("to_nhwc", "Transpose", {c}, {t2}, to_nhwc);
    const int32_t y = s.output("y", expected.shape());
    s.dispatch("relu", "Relu", {t2}, {y});
    if (read_later) {
      const int32_t z = s.output("z", expected_swapped.shape());
      s.dispatch("swap_hw", "Transpose", {c}, {swapped}, swap_hw);
      s.dispatch("copy", "Identity", {swapped}, {z});
    }
    auto exe = device()->prepare(s.spec());
    ASSERT_TRUE(exe.ok()) << exe.status().to_string();
    std::string steps;
    for (const std::string& line : static_cast<CpuExecutable&>(**exe).summary()) {
      steps += line + "\n";
    }
    EXPECT_NE(steps.find("copy acdb 2x16x9x7"), std::string::npos) << steps;
    EXPECT_EQ(steps.find("reorder plain 2x16x9x7"), std::string::npos) << steps;
    // Where oneDNN's conv writes channels-last (AVX-512 here; AVX2 blocks by 8), the transpose
    // back takes over its bytes.
    const bool channels_last = steps.find("-> acdb 2x24x9x7") != std::string::npos;
    EXPECT_EQ((*exe)->storage_shared_with(t2), read_later || !channels_last ? -1 : c) << steps;
    std::vector<Tensor> inputs{x};
    auto out = run_program(**exe, s.spec(), inputs);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_TRUE(all_close((*out)[0], expected, {.atol = 1e-5, .rtol = 1e-5}));
    if (read_later) {
      EXPECT_TRUE(all_close((*out)[1], expected_swapped, {.atol = 1e-5, .rtol = 1e-5}));
    }
  }
}

}  // namespace
}  // namespace kiln::hal::cpu
