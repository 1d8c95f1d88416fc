// The null device's contract (null_device.h): it accepts every well-formed dispatch and refuses a
// malformed program or a data-dependent size with a clear error; runs write zeros to the graph
// outputs, check their bindings, and show an observer every dispatch.
#include "kiln/hal/null/null_device.h"

#include <gtest/gtest.h>

#include "kiln/hal/host_tensors.h"

namespace kiln::hal::null {
namespace {

ProgramSpec two_dispatches(const Tensor* weight) {
  ProgramSpec spec;
  spec.values = {{"x", DType::kF32, {2, 3}, ValueRole::kInput, nullptr, {}},
                 {"w", DType::kF32, {3}, ValueRole::kConstant, weight, {}},
                 {"t", DType::kF32, {2, 3}, ValueRole::kIntermediate, nullptr, {}},
                 {"y", DType::kI64, {2}, ValueRole::kOutput, nullptr, {}}};
  spec.dispatches = {{"mul", "Mul", nullptr, {0, 1}, {2}, -1, {}, {}},
                     {"argmax", "SomeOpNoBackendHas", nullptr, {2}, {3}, -1, {}, {}}};
  spec.inputs = {0};
  spec.outputs = {3};
  return spec;
}

class Observed : public RunObserver {
 public:
  bool wants_outputs(int32_t) override { return true; }
  Status after_dispatch(int32_t d, double ms, std::span<const Tensor> outputs) override {
    seen.push_back(d);
    for (const Tensor& t : outputs) shapes.push_back(t.shape());
    return ok_status();
  }
  std::vector<int32_t> seen;
  std::vector<ConcreteShape> shapes;
};

TEST(NullDevice, RunsAnyWellFormedProgramAndWritesZeros) {
  auto device = create_null_device({});
  ASSERT_TRUE(device.ok());
  EXPECT_EQ((*device)->name().rfind("null", 0), 0u);
  Tensor w = Tensor::create(DType::kF32, {3}).value();
  ProgramSpec spec = two_dispatches(&w);
  EXPECT_TRUE((*device)->supports(spec.dispatches[1], spec.values).ok());
  auto exe = (*device)->prepare(spec);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  EXPECT_EQ((*exe)->storage_bytes(2), 24u);  // plain f32 [2,3]
  EXPECT_EQ((*exe)->storage_bytes(3), 0u);
  EXPECT_EQ((*exe)->describe_dispatch(1),
            std::vector<std::string>{"null: SomeOpNoBackendHas runs nothing"});

  Tensor x = Tensor::create(DType::kF32, {2, 3}).value();
  std::vector<Tensor> y = {Tensor::create(DType::kI64, {2}).value()};
  y[0].mutable_values<int64_t>()[0] = 42;
  Observed observed;
  ASSERT_TRUE(run_on_host(**device, **exe, spec, {&x, 1}, y, &observed).ok());
  EXPECT_EQ(y[0].values<int64_t>()[0], 0);
  EXPECT_EQ(observed.seen, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(observed.shapes, (std::vector<ConcreteShape>{{2, 3}, {2}}));

  RunArgs missing;
  Status refused = (*exe)->run(missing);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("value bindings"), std::string::npos);
}

TEST(NullDevice, RefusesMalformedProgramsAndDataDependentSizes) {
  auto device = create_null_device({});
  ASSERT_TRUE(device.ok());
  Tensor w = Tensor::create(DType::kF32, {3}).value();
  ProgramSpec bad_index = two_dispatches(&w);
  bad_index.dispatches[1].inputs = {9};
  Status s = (*device)->supports(bad_index.dispatches[1], bad_index.values);
  EXPECT_NE(s.to_string().find("in dispatch 'argmax'"), std::string::npos) << s.to_string();
  EXPECT_FALSE((*device)->prepare(bad_index).ok());

  ProgramSpec out_of_order = two_dispatches(&w);
  std::swap(out_of_order.dispatches[0], out_of_order.dispatches[1]);
  auto prepared = (*device)->prepare(out_of_order);
  ASSERT_FALSE(prepared.ok());
  EXPECT_NE(prepared.status().to_string().find("'t' is read before any dispatch produces it"),
            std::string::npos)
      << prepared.status().to_string();

  ProgramSpec no_constant = two_dispatches(nullptr);
  EXPECT_NE((*device)->prepare(no_constant).status().to_string().find("constant 'w' has no data"),
            std::string::npos);

  DispatchSpec nonzero{"nz", "NonZero", nullptr, {0}, {1}, -1, {}, {}};
  auto sizes = (*device)->data_sizes(nonzero, {});
  ASSERT_FALSE(sizes.ok());
  EXPECT_EQ(sizes.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(sizes.status().to_string().find("in dispatch 'nz' (NonZero)"), std::string::npos);

  EXPECT_FALSE(create_null_device({-1}).ok());
}

}  // namespace
}  // namespace kiln::hal::null
