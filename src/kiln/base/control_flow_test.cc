// The host-side control-flow semantics with bodies written as lambdas: slicing and stacking along
// an axis, Loop's trip count, condition and checks, Scan's directions. Expected values are worked
// out by hand from the ONNX spec.
#include "kiln/base/control_flow.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::control_flow {
namespace {

using ::testing::HasSubstr;

Tensor f32(ConcreteShape dims, std::vector<float> v) {
  Tensor t = Tensor::create(DType::kF32, std::move(dims)).value();
  std::copy(v.begin(), v.end(), t.mutable_values<float>().begin());
  return t;
}
Tensor i64(int64_t v) {
  Tensor t = Tensor::create(DType::kI64, {}).value();
  t.mutable_values<int64_t>()[0] = v;
  return t;
}
std::vector<float> floats(const Tensor& t) {
  auto v = t.values<float>();
  return {v.begin(), v.end()};
}

TEST(ControlFlow, SliceAndStackAlongAnInnerAxis) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(floats(slice_along(x, 1, 2)), (std::vector<float>{3, 6}));
  EXPECT_EQ(floats(slice_along(x, 0, 1)), (std::vector<float>{4, 5, 6}));
  std::vector<Tensor> columns = {slice_along(x, 1, 0), slice_along(x, 1, 1), slice_along(x, 1, 2)};
  auto back = stack_along(columns, 1, DType::kF32, {2});
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->shape(), (ConcreteShape{2, 3}));
  EXPECT_EQ(floats(*back), floats(x));
  auto empty = stack_along({}, 0, DType::kF32, {4});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->shape(), (ConcreteShape{0, 4}));
}

LoopArgs doubling_loop() {
  LoopArgs args;
  args.where = "node 'loop' (Loop)";
  args.output_count = 2;  // v, then the scan of v
  args.body = [](std::vector<HostValue> in) -> StatusOr<std::vector<HostValue>> {
    Tensor v = in[2].tensor().clone();
    for (float& x : v.mutable_values<float>()) x *= 2;
    return std::vector<HostValue>{in[1], v, v};
  };
  args.empty_scan_shape = [](size_t) -> StatusOr<SliceType> { return SliceType{DType::kF32, {1}}; };
  return args;
}

TEST(ControlFlow, LoopRunsTheTripCountAndStacksScanOutputs) {
  const std::vector<HostValue> inputs = {i64(3), Tensor(), f32({1}, {1})};
  auto out = run_loop(inputs, doubling_loop());
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(floats((*out)[0].tensor()), std::vector<float>{8});
  EXPECT_EQ((*out)[1].tensor().shape(), (ConcreteShape{3, 1}));
  EXPECT_EQ(floats((*out)[1].tensor()), (std::vector<float>{2, 4, 8}));
  const std::vector<HostValue> none = {i64(0), Tensor(), f32({1}, {1})};
  out = run_loop(none, doubling_loop());
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ((*out)[1].tensor().shape(), (ConcreteShape{0, 1}));
}

TEST(ControlFlow, LoopErrorsNameTheNode) {
  LoopArgs args = doubling_loop();
  auto run = [&](std::vector<HostValue> inputs) { return run_loop(inputs, args).status(); };
  EXPECT_THAT(run({i64(-2), Tensor(), f32({1}, {1})}).message(),
              HasSubstr("node 'loop' (Loop): the trip count M is -2; it must be >= 0"));
  EXPECT_THAT(run({f32({1}, {3}), Tensor(), f32({1}, {1})}).message(),
              HasSubstr("the trip count M must be one int64 element, got f32 [1]"));
  EXPECT_THAT(run({Tensor(), Tensor(), f32({1}, {1})}).message(),
              HasSubstr("neither a trip count nor a condition"));
  args.body = [](std::vector<HostValue> in) -> StatusOr<std::vector<HostValue>> {
    return std::vector<HostValue>{in[1], in[2]};
  };
  EXPECT_THAT(run({i64(2), Tensor(), f32({1}, {1})}).message(),
              HasSubstr("the body returned 2 outputs at iteration 0, expected 3"));
  args.body = [](std::vector<HostValue> in) -> StatusOr<std::vector<HostValue>> {
    return std::vector<HostValue>{in[1], in[0], in[2]};
  };
  EXPECT_THAT(
      run({i64(2), Tensor(), f32({1}, {1})}).message(),
      HasSubstr("loop-carried value 0 is f32 [1] but the body returned i64 [] at iteration 0"));
  // Scan outputs over the memory bound.
  args = doubling_loop();
  args.max_bytes = 8;
  EXPECT_EQ(run({i64(3), Tensor(), f32({1}, {1})}).code(), StatusCode::kOutOfRange);
}

TEST(ControlFlow, ScanVisitsSlicesInEitherDirection) {
  LoopArgs args;
  args.where = "Scan";
  args.output_count = 2;  // the running sum, then the scan of it
  args.body = [](std::vector<HostValue> in) -> StatusOr<std::vector<HostValue>> {
    Tensor sum = in[0].tensor().clone();
    sum.mutable_values<float>()[0] += in[1].tensor().values<float>()[0];
    return std::vector<HostValue>{sum, sum};
  };
  Attributes attributes;
  attributes.set("num_scan_inputs", int64_t{1});
  attributes.set("scan_input_directions", std::vector<int64_t>{1});
  const std::vector<HostValue> inputs = {f32({1}, {0}), f32({3, 1}, {1, 2, 3})};
  auto out = run_scan(inputs, attributes, args);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(floats((*out)[0].tensor()), std::vector<float>{6});
  EXPECT_EQ(floats((*out)[1].tensor()), (std::vector<float>{3, 5, 6}));
  attributes.set("scan_output_directions", std::vector<int64_t>{1});
  out = run_scan(inputs, attributes, args);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(floats((*out)[1].tensor()), (std::vector<float>{6, 5, 3}));
  attributes.set("scan_output_directions", std::vector<int64_t>{2});
  EXPECT_THAT(run_scan(inputs, attributes, args).status().message(),
              HasSubstr("attribute 'scan_output_directions' values must be 0 or 1, got 2"));
}

}  // namespace
}  // namespace kiln::control_flow
