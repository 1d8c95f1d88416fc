// Steps that write over an input nothing reads later (ProgramBuilder::output_over_if_free): a
// per-channel binary op (a squeeze-and-excitation scale), oneDNN's binary op (a residual Add, an
// attention mask), kiln's BatchNormalization, LayerNormalization and Softmax. Each writes the bits
// it writes to a buffer of its own; where a later dispatch still reads the input, the step writes a
// buffer of its own and that reader sees the input unchanged. The input comes from a Relu
// (plain) or a conv (channels-last where oneDNN picks it, on AVX-512; its blocked output
// elsewhere goes to oneDNN's batch norm and per-channel binary op, which this does not cover;
// layer norm and softmax read plain data, so only after the Relu).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kiln/hal/cpu/cpu_device.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

struct Prepared {
  std::string steps;            // the step's dispatch
  std::vector<Tensor> outputs;  // y = step(c) + 0, then, when read later, c + 0
};

// x [2, 24, 5, 7] -> producer -> c -> `op` -> m -> m + 0 = y; with `read_later`, c + 0 as a second
// output.
Prepared run_chain(const Tensor& x, const std::string& producer, const std::string& op,
                   bool read_later) {
  const ConcreteShape& xs = x.shape();
  const Tensor zero = make_tensor(DType::kF32, {1}, std::vector<float>{0.0f});
  SpecBuilder s;
  const int32_t xi = s.input("x", xs);
  const int32_t c = s.value("c", xs);
  if (producer == "Conv") {
    s.dispatch("produce", "Conv", {xi, s.constant("w", random_tensor({24, 24, 1, 1}, 72))}, {c});
  } else {
    s.dispatch("produce", "Relu", {xi}, {c});
  }
  const int32_t m = s.value("m", xs);
  const int32_t z = s.constant("zero", zero);
  if (op == "Add") {
    s.dispatch("step", "Add", {c, s.constant("r", random_tensor(xs, 78))}, {m});
  } else if (op == "LayerNormalization") {
    s.dispatch("step", "LayerNormalization",
               {c, s.constant("scale", random_tensor({7}, 79, 0.5f, 2.0f)),
                s.constant("B", random_tensor({7}, 80))},
               {m}, attrs({{"axis", int64_t{-1}}}));
  } else if (op == "Softmax") {
    s.dispatch("step", "Softmax", {c}, {m}, attrs({{"axis", int64_t{-1}}}));
  } else if (op == "Mul") {
    s.dispatch("step", "Mul", {c, s.constant("s", random_tensor({2, 24, 1, 1}, 73, 0.5f, 2.0f))},
               {m});
  } else {
    Attributes a;
    a.set("kiln_activation", std::string("relu"));
    s.dispatch(
        "step", "BatchNormalization",
        {c, s.constant("scale", random_tensor({24}, 74, 0.5f, 2.0f)),
         s.constant("B", random_tensor({24}, 75)), s.constant("mean", random_tensor({24}, 76)),
         s.constant("var", random_tensor({24}, 77, 0.5f, 2.0f))},
        {m}, a);
  }
  s.dispatch("next", "Add", {m, z}, {s.output("y", xs)});
  if (read_later) s.dispatch("later", "Add", {c, z}, {s.output("c", xs)});
  auto device = create_cpu_device({});
  KILN_CHECK(device.ok());
  auto exe = (*device)->prepare(s.spec());
  KILN_CHECK(exe.ok());
  Prepared r;
  r.steps = fmt::format("{}", fmt::join((*exe)->describe_dispatch(1), "\n"));
  auto out = run_program(**exe, s.spec(), {x});
  KILN_CHECK(out.ok());
  r.outputs = *std::move(out);
  return r;
}

TEST(CpuInPlace, AStepWritesOverAnInputNothingReadsLater) {
  const Tensor x = random_tensor({2, 24, 5, 7}, 71);
  const std::map<std::string, std::string> kernels = {{"Mul", "binary kiln per channel"},
                                                      {"Add", "binary "},
                                                      {"BatchNormalization", "batch_norm kiln"},
                                                      {"LayerNormalization", "layer norm kiln"},
                                                      {"Softmax", "softmax kiln"}};
  for (const auto& [op, kernel] : kernels) {
    for (const std::string producer : {"Relu", "Conv"}) {
      // Layer norm and softmax read plain data: after a conv, a reordered copy, no value's bytes.
      if ((op == "LayerNormalization" || op == "Softmax") && producer == "Conv") continue;
      SCOPED_TRACE(op + " after a " + producer);
      const Prepared alone = run_chain(x, producer, op, false);
      const Prepared later = run_chain(x, producer, op, true);
      if (alone.steps.find(kernel) == std::string::npos) {
        EXPECT_EQ(producer, "Conv") << alone.steps;  // a plain input always takes this step
        continue;
      }
      EXPECT_NE(alone.steps.find("(in place)"), std::string::npos) << alone.steps;
      EXPECT_EQ(later.steps.find("(in place)"), std::string::npos) << later.steps;
      EXPECT_TRUE(bitwise_equal(alone.outputs[0], later.outputs[0]));
      if (producer == "Relu") {
        // The later reader saw Relu(x), not the step's output.
        const auto xv = x.values<float>();
        const auto cv = later.outputs[1].values<float>();
        int64_t changed = 0;
        for (size_t i = 0; i < xv.size(); ++i) {
          const float want = xv[i] > 0.0f ? xv[i] : 0.0f;
          changed += std::memcmp(&want, &cv[i], sizeof(float)) != 0;
        }
        EXPECT_EQ(changed, 0);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::hal::cpu
