// The portable kernel table and the planning every caller shares.
#include "kiln/kernels/kernel.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kiln/kernels/infer_util.h"

namespace kiln::kernels {
namespace {

TEST(KernelTable, IsSortedAndFindsOps) {
  std::span<const OpDef> all = all_op_defs();
  ASSERT_FALSE(all.empty());
  for (size_t i = 1; i < all.size(); ++i) {
    // By op type, then by version: one definition per (op type, since_version).
    const bool ordered =
        all[i - 1].op_type < all[i].op_type ||
        (all[i - 1].op_type == all[i].op_type && all[i - 1].since_version < all[i].since_version);
    EXPECT_TRUE(ordered) << all[i - 1].op_type << " " << all[i - 1].since_version << " before "
                         << all[i].op_type << " " << all[i].since_version;
  }
  EXPECT_NE(find_op_def("Sigmoid"), nullptr);
  EXPECT_EQ(find_op_def("NoSuchOp"), nullptr);
}

// An op whose semantics changed at an opset has one definition per version; lookups without an
// opset give the newest (what modules carry), lookups with one the version that applies.
TEST(KernelTable, VersionedOpsAreFoundByOpset) {
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    ASSERT_NE(find_op_def(op), nullptr) << op;
    EXPECT_EQ(find_op_def(op)->since_version, 13) << op;
    EXPECT_EQ(find_op_def(op, 17)->since_version, 13) << op;
    EXPECT_EQ(find_op_def(op, 13)->since_version, 13) << op;
    EXPECT_EQ(find_op_def(op, 12)->since_version, 1) << op;
    EXPECT_EQ(find_op_def(op, 1)->since_version, 1) << op;
  }
  EXPECT_EQ(find_op_def("Relu", 17), find_op_def("Relu"));
  EXPECT_EQ(find_op_def("Relu", 0), nullptr);
  EXPECT_EQ(find_op_def("NoSuchOp", 17), nullptr);
}

StatusOr<Tensor> run_unary(std::string_view op, const Tensor& x, const Attributes& attributes) {
  const OpDef* k = find_op_def(op);
  if (k == nullptr) return not_found("no kernel {}", op);
  std::vector<ConcreteInput> inputs = {{true, x.dtype(), x.shape(), nullptr}};
  KILN_ASSIGN_OR_RETURN(Planned p, plan_concrete(*k, attributes, inputs, 1, nullptr));
  KILN_ASSIGN_OR_RETURN(Tensor y, Tensor::create(p.outputs[0].dtype, p.outputs[0].dims));
  ConstBuffer in{x.dtype(), x.shape(), x.data()};
  MutableBuffer out{y.dtype(), y.shape(), y.mutable_data()};
  KILN_RETURN_IF_ERROR(p.kernel->run({&in, 1}, {&out, 1}));
  return y;
}

Tensor f32(std::vector<float> values) {
  Tensor t = Tensor::create(DType::kF32, {static_cast<int64_t>(values.size())}).value();
  std::copy(values.begin(), values.end(), t.mutable_values<float>().begin());
  return t;
}

TEST(UnaryKernels, SigmoidIsStableAtBothEnds) {
  auto y = run_unary("Sigmoid", f32({-1000.f, 0.f, 1000.f}), {});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->values<float>()[0], 0.f);
  EXPECT_EQ(y->values<float>()[1], 0.5f);
  EXPECT_EQ(y->values<float>()[2], 1.f);
}

TEST(UnaryKernels, IsNaNGivesBool) {
  auto y = run_unary("IsNaN", f32({NAN, 1.f}), {});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->dtype(), DType::kBool);
  EXPECT_EQ(y->values<uint8_t>()[0], 1);
  EXPECT_EQ(y->values<uint8_t>()[1], 0);
}

TEST(UnaryKernels, GeluMatchesItsDefinitionWithAndWithoutTheTanhApproximation) {
  // Expected values: 0.5 x (1 + erf(x / sqrt 2)) and the tanh form, from Python's math module.
  const std::vector<float> x{-3, -1, -0.5, 0, 0.5, 1, 2, 3};
  const double exact[] = {-0.004049694, -0.158655254, -0.154268769, 0.0,
                          0.345731231,  0.841344746,  1.954499736,  2.995950306};
  const double tanh_form[] = {-0.003637392, -0.158808009, -0.15428599, 0.0,
                              0.34571401,   0.841191991,  1.954597694, 2.996362608};
  Attributes tanh;
  tanh.set("approximate", std::string("tanh"));
  auto y = run_unary("Gelu", f32(x), {});
  auto t = run_unary("Gelu", f32(x), tanh);
  ASSERT_TRUE(y.ok() && t.ok());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(y->values<float>()[i], exact[i], 1e-6 * (1 + std::abs(exact[i]))) << x[i];
    EXPECT_NEAR(t->values<float>()[i], tanh_form[i], 1e-6 * (1 + std::abs(tanh_form[i]))) << x[i];
  }
  Attributes bad;
  bad.set("approximate", std::string("fast"));
  auto z = run_unary("Gelu", f32(x), bad);
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.status().message().find("got \"fast\""), std::string::npos);
}

TEST(UnaryKernels, RejectsUnknownAttributeAndDtype) {
  Attributes a;
  a.set("beta", 1.0);
  auto y = run_unary("LeakyRelu", f32({1.f}), a);
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("attribute 'beta'"), std::string::npos);
  Tensor b = Tensor::create(DType::kBool, {1}).value();
  auto z = run_unary("Exp", b, {});
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.status().message().find("dtype"), std::string::npos);
}

TEST(UnaryKernels, RoundIsHalfToEven) {
  auto y = run_unary("Round", f32({0.5f, 1.5f, 2.5f, -0.5f}), {});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->values<float>()[0], 0.f);
  EXPECT_EQ(y->values<float>()[1], 2.f);
  EXPECT_EQ(y->values<float>()[2], 2.f);
  EXPECT_EQ(y->values<float>()[3], -0.f);
}

TEST(Planning, RejectsDeclaredOutputThatDiffers) {
  const OpDef* k = find_op_def("Exp");
  std::vector<ConcreteInput> inputs = {{true, DType::kF32, {2, 3}, nullptr}};
  std::vector<ConcreteOutput> declared = {{DType::kF32, {3, 2}}};
  auto p = plan_concrete(*k, {}, inputs, 1, &declared);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("output 0"), std::string::npos);
}

}  // namespace
}  // namespace kiln::kernels
