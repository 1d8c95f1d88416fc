// LSTM, GRU and RNN on the CPU backend: the fast path (recurrent_op.cc, kiln's gemm kernel for
// the weight products) against the op definition's portable kernel, which the kernel tests check
// against PyTorch (kernels/recurrent_test.cc), and batch invariance: an entry run alone gets the
// same bits as in a batch.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>

#include "kiln/hal/cpu/cpu_device.h"
#include "kiln/hal/cpu/gemm_kernel.h"
#include "tests/support/expect.h"
#include "tests/support/hal/program.h"
#include "tests/support/kernels/run_op.h"
#include "tests/support/tensors.h"

namespace kiln::hal::cpu {
namespace {

using namespace testing;

constexpr int64_t kSeq = 6, kInput = 37, kHidden = 19;  // 19: a partial panel of 16 columns

struct Case {
  std::string op_type;
  int64_t gates;
  Attributes attributes;
};

std::vector<Case> cases() {
  return {{"LSTM", 4, attrs({{"direction", std::string("bidirectional")}, {"layout", int64_t{1}}})},
          {"GRU", 3, attrs({{"layout", int64_t{1}}})},  // linear_before_reset 0: R in two products
          {"GRU", 3,
           attrs({{"direction", std::string("reverse")},
                  {"layout", int64_t{1}},
                  {"linear_before_reset", int64_t{1}}})},
          {"RNN", 1, attrs({{"direction", std::string("bidirectional")}, {"layout", int64_t{1}}})}};
}

// Inputs of a batch-major run of `batch` entries: X, W, R, B, sequence_lens, initial_h
// (+ initial_c, P for LSTM).
std::vector<Tensor> inputs_for(const Case& c, int64_t batch) {
  const int64_t dirs = c.attributes.get_string("direction", "").value() == "bidirectional" ? 2 : 1;
  const int64_t gh = c.gates * kHidden;
  std::vector<int32_t> lens = {6, 3, 0, 1, 5};
  lens.resize(static_cast<size_t>(batch));
  std::vector<Tensor> in = {random_tensor({batch, kSeq, kInput}, 1),
                            random_tensor({dirs, gh, kInput}, 2, -0.3f, 0.3f),
                            random_tensor({dirs, gh, kHidden}, 3, -0.3f, 0.3f),
                            random_tensor({dirs, 2 * gh}, 4, -0.3f, 0.3f),
                            i32({batch}, lens),
                            random_tensor({batch, dirs, kHidden}, 5)};
  if (c.op_type == "LSTM") {
    in.push_back(random_tensor({batch, dirs, kHidden}, 6));
    in.push_back(random_tensor({dirs, 3 * kHidden}, 7, -0.3f, 0.3f));
  }
  return in;
}

// Runs the case on the CPU device; `steps` gets the dispatch's step descriptions.
StatusOr<std::vector<Tensor>> run_on_device(const Case& c, const std::vector<Tensor>& in,
                                            std::string* steps) {
  const ConcreteShape x = in[0].shape();
  const int64_t dirs = in[1].shape()[0];
  SpecBuilder s;
  std::vector<int32_t> ins;
  for (size_t i = 0; i < in.size(); ++i) {
    // Weights as constants (packed once per run all the same), the rest as inputs.
    ins.push_back(i >= 1 && i <= 3 ? s.constant(fmt::format("in{}", i), in[i])
                                   : s.input(fmt::format("in{}", i), in[i].shape(), in[i].dtype()));
  }
  std::vector<int32_t> outs = {s.output("y", {x[0], x[1], dirs, kHidden}),
                               s.output("y_h", {x[0], dirs, kHidden})};
  if (c.op_type == "LSTM") outs.push_back(s.output("y_c", {x[0], dirs, kHidden}));
  s.dispatch("rnn", c.op_type, ins, outs, c.attributes);
  auto dev = create_cpu_device({});
  KILN_RETURN_IF_ERROR(dev.status());
  KILN_ASSIGN_OR_RETURN(auto exe, (*dev)->prepare(s.spec()));
  *steps = fmt::format("{}", fmt::join(exe->describe_dispatch(0), "\n"));
  std::vector<Tensor> runtime_inputs;
  for (size_t i = 0; i < in.size(); ++i) {
    if (i < 1 || i > 3) runtime_inputs.push_back(in[i]);
  }
  return run_program(*exe, s.spec(), runtime_inputs);
}

TEST(CpuRecurrentTest, FastPathMatchesThePortableKernel) {
  for (const Case& c : cases()) {
    const std::vector<Tensor> in = inputs_for(c, 5);
    std::string steps;
    auto got = run_on_device(c, in, &steps);
    ASSERT_TRUE(got.ok()) << c.op_type << ": " << got.status().to_string();
    if (gemm::cpu_supported()) {
      EXPECT_NE(steps.find(std::string("kiln_gemm:") + gemm::isa_name(gemm::best_isa())),
                std::string::npos)
          << steps;
    }
    std::vector<In> portable_in;
    for (const Tensor& t : in) portable_in.push_back(value(t));
    auto want = run_op(c.op_type, portable_in, c.attributes, got->size());
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_TRUE(all_close((*got)[i], (*want)[i], {.atol = 1e-5, .rtol = 1e-5}))
          << c.op_type << " output " << i << "\n"
          << steps;
    }
  }
}

TEST(CpuRecurrentTest, AnEntryGetsTheSameBitsAloneAndInABatch) {
  for (const Case& c : cases()) {
    const std::vector<Tensor> batch = inputs_for(c, 5);
    std::vector<Tensor> alone = batch;
    for (size_t i : {size_t{0}, size_t{4}, size_t{5}, size_t{6}}) {
      if (i < alone.size()) alone[i] = slice_batch(batch[i], 0);
    }
    std::string steps;
    auto many = run_on_device(c, batch, &steps);
    auto one = run_on_device(c, alone, &steps);
    ASSERT_TRUE(many.ok() && one.ok());
    for (size_t i = 0; i < one->size(); ++i) {
      const Tensor& first = slice_batch((*many)[i], 0);
      EXPECT_TRUE(identical((*one)[i], first)) << c.op_type << " output " << i;
    }
  }
}

}  // namespace
}  // namespace kiln::hal::cpu
