// Index, scatter, generator and selection kernels (index.cc, scatter.cc, generate.cc,
// select.cc): semantics from the
// ONNX operator spec's examples and hand calculation, symbolic inference and value propagation,
// and the bad inputs each rejects.
#include <gtest/gtest.h>

#include <cstring>

#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/kernel.h"

namespace kiln::kernels {
namespace {

template <typename T>
Tensor make(DType dtype, ConcreteShape dims, std::vector<T> values) {
  Tensor t = Tensor::create(dtype, std::move(dims)).value();
  EXPECT_EQ(static_cast<size_t>(t.element_count()), values.size());
  if (!values.empty()) std::memcpy(t.mutable_data(), values.data(), values.size() * sizeof(T));
  return t;
}
Tensor f32(ConcreteShape dims, std::vector<float> v) { return make(DType::kF32, dims, v); }
Tensor i64(ConcreteShape dims, std::vector<int64_t> v) { return make(DType::kI64, dims, v); }
Tensor i32(ConcreteShape dims, std::vector<int32_t> v) { return make(DType::kI32, dims, v); }

struct In {
  Tensor tensor;
  bool constant = false;
};

// Plans `op` on concrete inputs (constants where marked) and runs it.
StatusOr<std::vector<Tensor>> run_op(std::string_view op, std::vector<In> ins,
                                     const Attributes& attributes = {}) {
  const OpDef* k = find_op_def(op);
  if (k == nullptr) return not_found("no kernel {}", op);
  std::vector<ConcreteInput> inputs;
  for (const In& in : ins) {
    inputs.push_back(
        {true, in.tensor.dtype(), in.tensor.shape(), in.constant ? &in.tensor : nullptr});
  }
  KILN_ASSIGN_OR_RETURN(Planned p, plan_concrete(*k, attributes, inputs, 1, nullptr));
  std::vector<Tensor> outs;
  for (const ConcreteOutput& o : p.outputs) {
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(o.dtype, o.dims));
    outs.push_back(std::move(t));
  }
  std::vector<ConstBuffer> in_buffers;
  for (const In& in : ins) {
    in_buffers.push_back({in.tensor.dtype(), in.tensor.shape(), in.tensor.data()});
  }
  std::vector<MutableBuffer> out_buffers;
  for (Tensor& t : outs) out_buffers.push_back({t.dtype(), t.shape(), t.mutable_data()});
  KILN_RETURN_IF_ERROR(p.kernel->run(in_buffers, out_buffers));
  return outs;
}

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  auto v = t.values<T>();
  return {v.begin(), v.end()};
}

// Symbolic inference of one node.
struct SymIn {
  SymIn(ValueType t, const Tensor* c = nullptr, std::vector<DimExpr> v = {})
      : type(std::move(t)), constant(c), values(std::move(v)) {}
  ValueType type;
  const Tensor* constant;
  std::vector<DimExpr> values;  // known element values (a shape computation), or empty
};
struct Inferred {
  Status status;
  std::vector<ValueType> outputs;
  std::vector<std::optional<std::vector<DimExpr>>> values;
};

Inferred infer_op(std::string_view op, const std::vector<SymIn>& ins,
                  const Attributes& attributes = {}) {
  const OpDef* k = find_op_def(op);
  EXPECT_NE(k, nullptr) << op;
  InferArgs args{attributes, {}, {}, 1, {}, {}, {}, {}};
  for (const SymIn& in : ins) {
    args.inputs.emplace_back(in.type);
    args.constants.push_back(in.constant);
    args.values.push_back(&in.values);
  }
  Inferred out;
  out.status = k->infer(args);
  out.outputs = args.outputs;
  out.values = args.output_values;
  return out;
}

const DimExpr N = DimExpr::symbol("N");
const DimExpr H = DimExpr::symbol("H");

bool contains(const Status& s, std::string_view text) {
  return s.message().find(text) != std::string::npos;
}

TEST(ShapeKernel, SymbolicInputGivesItsDimsAsValues) {
  Inferred r = infer_op("Shape", {{{DType::kF32, {N, 3, H}}}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.outputs[0].dtype, DType::kI64);
  EXPECT_EQ(r.outputs[0].shape, (Shape{3}));
  ASSERT_EQ(r.values.size(), 1u);
  EXPECT_EQ(*r.values[0], (std::vector<DimExpr>{N, 3, H}));

  Attributes a;
  a.set("start", int64_t{1});
  a.set("end", int64_t{-1});
  r = infer_op("Shape", {{{DType::kF32, {N, 3, H}}}}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(*r.values[0], (std::vector<DimExpr>{3}));
}

TEST(ShapeKernel, StartAndEndClampAndRun) {
  Tensor x = f32({2, 3, 4}, std::vector<float>(24, 0.f));
  Attributes a;
  a.set("start", int64_t{-10});  // clamps to 0
  a.set("end", int64_t{2});
  auto y = run_op("Shape", {{x}}, a);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<int64_t>((*y)[0]), (std::vector<int64_t>{2, 3}));
  Attributes b;
  b.set("start", int64_t{2});
  b.set("end", int64_t{1});  // empty
  y = run_op("Shape", {{x}}, b);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{0}));
}

TEST(SizeKernel, SymbolicCountAndRun) {
  Inferred r = infer_op("Size", {{{DType::kF32, {N, 3}}}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.outputs[0].shape, Shape{});
  EXPECT_EQ(*r.values[0], (std::vector<DimExpr>{N * 3}));
  auto y = run_op("Size", {{f32({2, 3}, std::vector<float>(6, 0.f))}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<int64_t>((*y)[0]), (std::vector<int64_t>{6}));
}

TEST(GatherKernel, SpecExampleAxis0) {
  Tensor data = f32({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  auto y = run_op("Gather", {{data}, {i64({2, 2}, {0, 1, 1, 2})}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{2, 2, 2}));
  EXPECT_EQ(values_of<float>((*y)[0]),
            (std::vector<float>{1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f}));
}

TEST(GatherKernel, NegativeIndicesOnAxis1) {
  Tensor data = i32({2, 3}, {1, 2, 3, 4, 5, 6});
  Attributes a;
  a.set("axis", int64_t{1});
  auto y = run_op("Gather", {{data}, {i32({2}, {-1, 0})}}, a);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{2, 2}));
  EXPECT_EQ(values_of<int32_t>((*y)[0]), (std::vector<int32_t>{3, 1, 6, 4}));
}

TEST(GatherKernel, OutOfRangeIndexNamesTheElement) {
  auto y = run_op("Gather", {{f32({3}, {1, 2, 3})}, {i64({2}, {0, 3})}});
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(contains(y.status(), "element [1] = 3 is out of range [-3, 2]"))
      << y.status().to_string();
}

TEST(GatherKernel, PropagatesShapeValues) {
  // Gather(Shape(x), -1) with x of shape [N, 3, H] is H.
  Tensor index = i64({}, {-1});
  Inferred r =
      infer_op("Gather", {{{DType::kI64, {3}}, nullptr, {N, 3, H}}, {{DType::kI64, {}}, &index}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.outputs[0].shape, Shape{});
  ASSERT_EQ(r.values.size(), 1u);
  EXPECT_EQ(*r.values[0], (std::vector<DimExpr>{H}));
  Tensor two = i64({2}, {1, 0});
  r = infer_op("Gather", {{{DType::kI64, {3}}, nullptr, {N, 3, H}}, {{DType::kI64, {2}}, &two}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(*r.values[0], (std::vector<DimExpr>{3, N}));
}

TEST(GatherKernel, LargeIntegerTablesAreNotShapeValues) {
  Tensor table = i64({2000}, std::vector<int64_t>(2000, 5));
  Tensor index = i64({}, {3});
  Inferred r = infer_op("Gather", {{{DType::kI64, {2000}}, &table}, {{DType::kI64, {}}, &index}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_TRUE(r.values.empty() || !r.values[0].has_value());
}

TEST(GatherKernel, SymbolicShapeAndBadInputs) {
  Inferred r = infer_op("Gather", {{{DType::kF32, {N, 5}}}, {{DType::kI64, {H}}}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.outputs[0].shape, (Shape{H, 5}));
  r = infer_op("Gather", {{{DType::kF32, {N, 5}}}, {{DType::kF32, {2}}}});
  EXPECT_TRUE(contains(r.status, "input 1 'indices' must have dtype i32 or i64"));
  Attributes a;
  a.set("axis", int64_t{2});
  r = infer_op("Gather", {{{DType::kF32, {N, 5}}}, {{DType::kI64, {2}}}}, a);
  EXPECT_TRUE(contains(r.status, "attribute 'axis' = 2 is out of range"));
  r = infer_op("Gather", {{{DType::kF32, {}}}, {{DType::kI64, {2}}}});
  EXPECT_TRUE(contains(r.status, "input 0 'data' must have rank"));
}

TEST(GatherElementsKernel, SpecExample) {
  Attributes a;
  a.set("axis", int64_t{1});
  auto y = run_op("GatherElements", {{f32({2, 2}, {1, 2, 3, 4})}, {i64({2, 2}, {0, 0, 1, 0})}}, a);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<float>((*y)[0]), (std::vector<float>{1, 1, 4, 3}));
  // Negative indices, and indices smaller than data on the other axis (axis 0).
  y = run_op("GatherElements",
             {{f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})}, {i64({2, 3}, {-1, 1, 0, 1, 2, -3})}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<float>((*y)[0]), (std::vector<float>{7, 5, 3, 4, 8, 3}));
}

TEST(GatherElementsKernel, RejectsBadShapesAndIndices) {
  Inferred r = infer_op("GatherElements", {{{DType::kF32, {2, 2}}}, {{DType::kI64, {2}}}});
  EXPECT_TRUE(contains(r.status, "must have the rank of input 0 'data'")) << r.status.to_string();
  r = infer_op("GatherElements", {{{DType::kF32, {2, 2}}}, {{DType::kI64, {2, 3}}}});
  EXPECT_TRUE(contains(r.status, "dim 1 (3) exceeds input 0 'data' dim 1 (2)"));
  r = infer_op("GatherElements", {{{DType::kF32, {2, N}}}, {{DType::kI64, {2, H}}}});
  EXPECT_EQ(r.status.code(), StatusCode::kUnimplemented);
  auto y = run_op("GatherElements", {{f32({2}, {1, 2})}, {i64({1}, {-3})}});
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(contains(y.status(), "element [0] = -3 is out of range [-2, 1]"));
}

TEST(GatherNDKernel, SpecExamples) {
  Tensor data = i32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  auto y = run_op("GatherND", {{data}, {i64({2, 1, 2}, {0, 1, 1, 0})}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{2, 1, 2}));
  EXPECT_EQ(values_of<int32_t>((*y)[0]), (std::vector<int32_t>{2, 3, 4, 5}));
  Attributes a;
  a.set("batch_dims", int64_t{1});
  y = run_op("GatherND", {{data}, {i64({2, 1}, {1, 0})}}, a);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{2, 2}));
  EXPECT_EQ(values_of<int32_t>((*y)[0]), (std::vector<int32_t>{2, 3, 4, 5}));
}

TEST(GatherNDKernel, RejectsBadInputs) {
  Attributes a;
  a.set("batch_dims", int64_t{2});
  Inferred r = infer_op("GatherND", {{{DType::kF32, {2, 2}}}, {{DType::kI64, {2, 1}}}}, a);
  EXPECT_TRUE(contains(r.status, "attribute 'batch_dims' = 2")) << r.status.to_string();
  r = infer_op("GatherND", {{{DType::kF32, {2, 2}}}, {{DType::kI64, {2, 3}}}});
  EXPECT_TRUE(contains(r.status, "last dim = 3 must be in [1, 2]"));
  r = infer_op("GatherND", {{{DType::kF32, {2, 2}}}, {{DType::kI64, {2, N}}}});
  EXPECT_EQ(r.status.code(), StatusCode::kUnimplemented);
  auto y = run_op("GatherND", {{f32({2, 2}, {1, 2, 3, 4})}, {i64({1, 2}, {0, 2})}});
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(contains(y.status(), "element [0, 1] = 2 is out of range"));
}

TEST(ScatterNDKernel, SpecExampleAndReductionsInOrder) {
  Tensor data = f32({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto y = run_op("ScatterND", {{data}, {i64({4, 1}, {4, 3, 1, 7})}, {f32({4}, {9, 10, 11, 12})}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<float>((*y)[0]), (std::vector<float>{1, 11, 3, 10, 9, 6, 7, 12}));
  Attributes mul;
  mul.set("reduction", std::string("mul"));
  y = run_op("ScatterND", {{data}, {i64({2, 1}, {0, 0})}, {f32({2}, {3, 5})}}, mul);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<float>((*y)[0])[0], 15.f);
  // Slices: data [2, 2], k = 1 replaces whole rows; duplicates add up.
  Attributes add;
  add.set("reduction", std::string("add"));
  y = run_op(
      "ScatterND",
      {{i64({2, 2}, {1, 2, 3, 4})}, {i64({2, 1}, {1, 1})}, {i64({2, 2}, {10, 20, 100, 200})}}, add);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<int64_t>((*y)[0]), (std::vector<int64_t>{1, 2, 113, 224}));
}

TEST(ScatterNDKernel, RejectsBadInputs) {
  Inferred r = infer_op(
      "ScatterND", {{{DType::kF32, {4, 2}}}, {{DType::kI64, {3, 1}}}, {{DType::kF32, {3, 3}}}});
  EXPECT_TRUE(contains(r.status, "input 2 'updates' dim 1 must be 2, got 3"))
      << r.status.to_string();
  r = infer_op("ScatterND", {{{DType::kF32, {4}}}, {{DType::kI64, {3, 1}}}, {{DType::kI64, {3}}}});
  EXPECT_TRUE(contains(r.status, "input 2 'updates' must have dtype f32"));
  Attributes a;
  a.set("reduction", std::string("max"));
  r = infer_op("ScatterND", {{{DType::kF32, {4}}}, {{DType::kI64, {3, 1}}}, {{DType::kF32, {3}}}},
               a);
  EXPECT_EQ(r.status.code(), StatusCode::kUnimplemented);
  auto y = run_op("ScatterND", {{f32({2}, {1, 2})}, {i64({1, 1}, {5})}, {f32({1}, {0})}});
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(contains(y.status(), "element [0, 0] = 5 is out of range"));
}

TEST(ScatterElementsKernel, SpecExamples) {
  // Spec example 1 (axis 0).
  Tensor data = f32({3, 3}, std::vector<float>(9, 0.f));
  auto y = run_op("ScatterElements", {{data},
                                      {i64({2, 3}, {1, 0, 2, 0, 2, 1})},
                                      {f32({2, 3}, {1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f})}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<float>((*y)[0]),
            (std::vector<float>{2.0f, 1.1f, 0.0f, 1.0f, 0.0f, 2.2f, 0.0f, 2.1f, 1.2f}));
  // Duplicate indices with add (test_scatter_elements_with_duplicate_indices).
  Attributes a;
  a.set("axis", int64_t{1});
  a.set("reduction", std::string("add"));
  y = run_op("ScatterElements",
             {{f32({1, 5}, {1, 2, 3, 4, 5})}, {i64({1, 2}, {1, 1})}, {f32({1, 2}, {1.1f, 2.1f})}},
             a);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_FLOAT_EQ(values_of<float>((*y)[0])[1], 2.f + 1.1f + 2.1f);
  // Reduction none: the last write wins; negative index.
  Attributes b;
  b.set("axis", int64_t{1});
  y = run_op("ScatterElements",
             {{i32({1, 3}, {0, 0, 0})}, {i64({1, 2}, {-1, 2})}, {i32({1, 2}, {7, 9})}}, b);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<int32_t>((*y)[0]), (std::vector<int32_t>{0, 0, 9}));
}

TEST(ScatterElementsKernel, RejectsBadInputs) {
  Inferred r = infer_op("ScatterElements",
                        {{{DType::kF32, {3}}}, {{DType::kI64, {2}}}, {{DType::kF32, {3}}}});
  EXPECT_TRUE(contains(r.status, "input 2 'updates' dim 0 must be 2, got 3"))
      << r.status.to_string();
  Attributes a;
  a.set("reduction", std::string("max"));
  r = infer_op("ScatterElements",
               {{{DType::kF32, {3}}}, {{DType::kI64, {2}}}, {{DType::kF32, {2}}}}, a);
  EXPECT_EQ(r.status.code(), StatusCode::kUnimplemented);
  auto y = run_op("ScatterElements", {{f32({3}, {1, 2, 3})}, {i32({1}, {3})}, {f32({1}, {0})}});
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(contains(y.status(), "element [0] = 3 is out of range [-3, 2]"));
}

TEST(OneHotKernel, OutOfRangeRowsAreOffAndNegativeCountsFromDepth) {
  auto y = run_op("OneHot", {{i64({3}, {0, -1, 5})}, {i64({}, {3}), true}, {f32({2}, {0, 1})}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{3, 3}));
  EXPECT_EQ(values_of<float>((*y)[0]), (std::vector<float>{1, 0, 0, 0, 0, 1, 0, 0, 0}));
  // axis 0, float indices truncate, float depth, int32 values [off, on] = [2, 5].
  Attributes a;
  a.set("axis", int64_t{0});
  y = run_op("OneHot", {{f32({2}, {1.7f, 0.f})}, {f32({}, {2.f}), true}, {i32({2}, {2, 5})}}, a);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{2, 2}));
  EXPECT_EQ(values_of<int32_t>((*y)[0]), (std::vector<int32_t>{2, 5, 5, 2}));
}

TEST(OneHotKernel, DepthMustBeKnownAtCompileTime) {
  EXPECT_EQ(find_op_def("OneHot")->compile_time_inputs, 1u << 1);
  Inferred r =
      infer_op("OneHot", {{{DType::kI64, {N}}}, {{DType::kI64, {}}}, {{DType::kF32, {2}}}});
  EXPECT_EQ(r.status.code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(r.status, "must be known at compile time"));
  // A depth known as an expression (e.g. a dim of another input).
  r = infer_op("OneHot",
               {{{DType::kI64, {N}}}, {{DType::kI64, {}}, nullptr, {H}}, {{DType::kF32, {2}}}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.outputs[0].shape, (Shape{N, H}));
  Tensor bad = i64({}, {-2});
  r = infer_op("OneHot", {{{DType::kI64, {N}}}, {{DType::kI64, {}}, &bad}, {{DType::kF32, {2}}}});
  EXPECT_TRUE(contains(r.status, "must be a non-negative count"));
  Tensor depth = i64({}, {4});
  r = infer_op("OneHot", {{{DType::kI64, {N}}}, {{DType::kI64, {}}, &depth}, {{DType::kF32, {3}}}});
  EXPECT_TRUE(contains(r.status, "input 2 'values' length"));
}

TEST(EyeLikeKernel, OffDiagonalAndDtype) {
  Attributes a;
  a.set("k", int64_t{1});
  a.set("dtype", int64_t{7});  // INT64
  auto y = run_op("EyeLike", {{f32({2, 3}, std::vector<float>(6, 9.f))}}, a);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].dtype(), DType::kI64);
  EXPECT_EQ(values_of<int64_t>((*y)[0]), (std::vector<int64_t>{0, 1, 0, 0, 0, 1}));
  Attributes b;
  b.set("k", int64_t{-1});
  y = run_op("EyeLike", {{i32({3, 2}, std::vector<int32_t>(6, 9))}}, b);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<int32_t>((*y)[0]), (std::vector<int32_t>{0, 0, 1, 0, 0, 1}));
  Attributes huge;
  huge.set("k", int64_t{INT64_MIN});
  y = run_op("EyeLike", {{i32({1, 1}, {9})}}, huge);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<int32_t>((*y)[0]), (std::vector<int32_t>{0}));
}

TEST(EyeLikeKernel, RejectsBadInputs) {
  Attributes a;
  a.set("dtype", int64_t{8});  // STRING
  Inferred r = infer_op("EyeLike", {{{DType::kF32, {2, 2}}}}, a);
  EXPECT_EQ(r.status.code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(r.status, "attribute 'dtype' = 8"));
  r = infer_op("EyeLike", {{{DType::kF32, {2, 2, 2}}}});
  EXPECT_TRUE(contains(r.status, "must have rank 2"));
}

TEST(RangeKernel, IntegerAndFloat) {
  EXPECT_EQ(find_op_def("Range")->compile_time_inputs, 0b111u);
  auto y = run_op("Range", {{i32({}, {10}), true}, {i32({}, {4}), true}, {i32({}, {-3}), true}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<int32_t>((*y)[0]), (std::vector<int32_t>{10, 7}));
  y = run_op("Range", {{f32({}, {1}), true}, {f32({}, {5}), true}, {f32({}, {1.5f}), true}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<float>((*y)[0]), (std::vector<float>{1.f, 2.5f, 4.f}));
  // An empty range.
  y = run_op("Range", {{i64({}, {3}), true}, {i64({}, {1}), true}, {i64({}, {1}), true}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{0}));
}

// Hand-computed windows: w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N).
TEST(WindowKernels, PeriodicSymmetricAndDtypes) {
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    EXPECT_EQ(find_op_def(op)->compile_time_inputs, 1u) << op;
  }
  auto near = [](const std::vector<float>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  };
  // Periodic (the default), size 4: N = 4, x = pi n / 2.
  auto y = run_op("HannWindow", {{i64({}, {4}), true}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].dtype(), DType::kF32);
  near(values_of<float>((*y)[0]), {0, 0.5, 1, 0.5});
  y = run_op("BlackmanWindow", {{i32({}, {4}), true}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  near(values_of<float>((*y)[0]), {0, 0.34, 1, 0.34});
  // Symmetric, size 5: N = 4, so the window ends where it starts.
  Attributes symmetric;
  symmetric.set("periodic", int64_t{0});
  y = run_op("HannWindow", {{i64({}, {5}), true}}, symmetric);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  near(values_of<float>((*y)[0]), {0, 0.5, 1, 0.5, 0});
  y = run_op("HammingWindow", {{i64({}, {3}), true}}, symmetric);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  near(values_of<float>((*y)[0]), {4.0 / 46, 1, 4.0 / 46});
  // A symmetric window of one sample is [1] (N = 0), not 0/0.
  y = run_op("HammingWindow", {{i64({}, {1}), true}}, symmetric);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  near(values_of<float>((*y)[0]), {1});
  // output_datatype: f64, and an integer type truncates.
  Attributes f64;
  f64.set("output_datatype", int64_t{11});
  y = run_op("HannWindow", {{i64({}, {4}), true}}, f64);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const std::vector<double> hann = values_of<double>((*y)[0]);
  ASSERT_EQ(hann.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(hann[i], (std::vector<double>{0, 0.5, 1, 0.5})[i], 1e-15);
  Attributes i64_type;
  i64_type.set("output_datatype", int64_t{7});
  y = run_op("HannWindow", {{i64({}, {4}), true}}, i64_type);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<int64_t>((*y)[0]), (std::vector<int64_t>{0, 0, 1, 0}));
  // Size 0: an empty window.
  y = run_op("BlackmanWindow", {{i64({}, {0}), true}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{0}));
}

TEST(WindowKernels, SymbolicSizeAndBadInputs) {
  Inferred r = infer_op("HannWindow", {{{DType::kI64, {}}, nullptr, {N}}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.outputs[0].shape, (Shape{N}));
  EXPECT_EQ(r.outputs[0].dtype, DType::kF32);
  r = infer_op("HannWindow", {{{DType::kI64, {}}}});
  EXPECT_EQ(r.status.code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(r.status, "input 0 'size' must be known at compile time"));
  Tensor minus = i64({}, {-2});
  r = infer_op("HammingWindow", {{{DType::kI64, {}}, &minus}});
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(r.status, "input 0 'size' = -2 must be >= 0"));
  Tensor four = i64({}, {4});
  r = infer_op("HannWindow", {{{DType::kF32, {}}, &four}});
  EXPECT_TRUE(contains(r.status, "input 0 'size' must have dtype"));
  r = infer_op("HannWindow", {{{DType::kI64, {2}}, &four}});
  EXPECT_TRUE(contains(r.status, "input 0 'size' must be a scalar"));
  Attributes bad;
  bad.set("periodic", int64_t{2});
  r = infer_op("BlackmanWindow", {{{DType::kI64, {}}, &four}}, bad);
  EXPECT_TRUE(contains(r.status, "attribute 'periodic' must be 0 or 1, got 2"));
  Attributes string_type;
  string_type.set("output_datatype", int64_t{8});
  r = infer_op("BlackmanWindow", {{{DType::kI64, {}}, &four}}, string_type);
  EXPECT_EQ(r.status.code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(r.status, "attribute 'output_datatype' = 8 (STRING)"));
}

TEST(RangeKernel, SymbolicLengthAndValues) {
  Tensor zero = i64({}, {0});
  Tensor two = i64({}, {2});
  Inferred r = infer_op(
      "Range",
      {{{DType::kI64, {}}, &zero}, {{DType::kI64, {}}, nullptr, {N}}, {{DType::kI64, {}}, &two}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.outputs[0].shape, (Shape{N.ceil_div(2)}));
  // Constant length: values propagate.
  Tensor four = i64({}, {4});
  Tensor one = i64({}, {1});
  r = infer_op("Range", {{{DType::kI64, {}}, nullptr, {N}},
                         {{DType::kI64, {}}, nullptr, {N + 3}},
                         {{DType::kI64, {}}, &one}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.outputs[0].shape, (Shape{3}));
  ASSERT_EQ(r.values.size(), 1u);
  EXPECT_EQ(*r.values[0], (std::vector<DimExpr>{N, N + 1, N + 2}));
  // N - H may be negative: the length clamps at 0.
  r = infer_op("Range", {{{DType::kI64, {}}, nullptr, {H}},
                         {{DType::kI64, {}}, nullptr, {N}},
                         {{DType::kI64, {}}, &one}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.outputs[0].shape, (Shape{DimExpr::max(N - H, DimExpr(0))}));
  EXPECT_EQ(r.outputs[0].shape[0].evaluate({{"N", 3}, {"H", 5}}).value(), 0);
  EXPECT_EQ(r.outputs[0].shape[0].evaluate({{"N", 7}, {"H", 5}}).value(), 2);
  // Range(0, 8*N): sizes are never negative, so no clamp.
  Tensor eight_n_start = i64({}, {0});
  r = infer_op("Range", {{{DType::kI64, {}}, &eight_n_start},
                         {{DType::kI64, {}}, nullptr, {N * 8}},
                         {{DType::kI64, {}}, &one}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.outputs[0].shape, (Shape{N * 8}));
}

TEST(RangeKernel, OperandsComputedAtRunTimeGiveADataDependentLength) {
  // A window's length cast to float (the ONNX window functions' expansion): limit is unknown.
  Tensor zero = f32({}, {0});
  Tensor one = f32({}, {1});
  Inferred r = infer_op(
      "Range", {{{DType::kF32, {}}, &zero}, {{DType::kF32, {}}}, {{DType::kF32, {}}, &one}});
  EXPECT_EQ(r.status.code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(r.status, "input 1 'limit' must be known at compile time"));
  // With data_dim the length is a fresh size, bound from the operands' values by data_sizes.
  const OpDef* range = find_op_def("Range");
  const Attributes none;
  InferArgs args{none, {}, {}, 1, {}, {}, {}, {}};
  args.inputs = {ValueType{DType::kF32, {}}, ValueType{DType::kF32, {}},
                 ValueType{DType::kF32, {}}};
  args.constants = {&zero, nullptr, &one};
  args.data_dim = [](size_t i) -> StatusOr<DimExpr> {
    return DimExpr::symbol(fmt::format("r{}", i));
  };
  ASSERT_TRUE(range->infer(args).ok());
  EXPECT_EQ(args.outputs[0].shape, (Shape{DimExpr::symbol("r0")}));
  auto sizes =
      range->data_sizes({}, std::vector<Tensor>{f32({}, {0.5f}), f32({}, {4}), f32({}, {1.5f})});
  ASSERT_TRUE(sizes.ok()) << sizes.status().to_string();
  EXPECT_EQ(*sizes, (std::vector<int64_t>{3}));
  sizes = range->data_sizes({}, std::vector<Tensor>{i64({}, {10}), i64({}, {4}), i64({}, {-3})});
  ASSERT_TRUE(sizes.ok()) << sizes.status().to_string();
  EXPECT_EQ(*sizes, (std::vector<int64_t>{2}));
  sizes = range->data_sizes({}, std::vector<Tensor>{i64({}, {0}), i64({}, {4}), i64({}, {0})});
  EXPECT_TRUE(contains(sizes.status(), "delta must be nonzero"));
  // Known operands keep their compile-time length even when data_dim could answer.
  args.constants = {&zero, nullptr, &one};
  args.values = {nullptr, nullptr, nullptr};
  const std::vector<DimExpr> limit = {N};
  args.values[1] = &limit;
  ASSERT_TRUE(range->infer(args).ok());
  EXPECT_EQ(args.outputs[0].shape, (Shape{N}));
}

TEST(RangeKernel, RejectsBadInputs) {
  auto y = run_op("Range", {{i64({}, {0}), true}, {i64({}, {4}), true}, {i64({}, {0}), true}});
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(contains(y.status(), "delta must be nonzero"));
  y = run_op("Range", {{f32({}, {0}), true}, {f32({}, {INFINITY}), true}, {f32({}, {1}), true}});
  ASSERT_FALSE(y.ok());
  // A start computed at run time makes the length data-dependent: planning needs its bound size.
  y = run_op("Range", {{f32({}, {0})}, {f32({}, {4}), true}, {f32({}, {1}), true}});
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(contains(y.status(), "needs data-dependent size 0")) << y.status().to_string();
  y = run_op("Range", {{i64({}, {0}), true}, {i32({}, {4}), true}, {i64({}, {1}), true}});
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(contains(y.status(), "input 1 'limit' must have dtype i64"));
  y = run_op("Range", {{i64({2}, {0, 1}), true}, {i64({}, {4}), true}, {i64({}, {1}), true}});
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(contains(y.status(), "must be a scalar"));
  y = run_op("Range",
             {{i64({}, {INT64_MIN}), true}, {i64({}, {INT64_MAX}), true}, {i64({}, {1}), true}});
  ASSERT_FALSE(y.ok());
}

TEST(ConstantOfShapeKernel, SymbolicShapeAndFill) {
  EXPECT_EQ(find_op_def("ConstantOfShape")->compile_time_inputs, 1u);
  Inferred r = infer_op("ConstantOfShape", {{{DType::kI64, {2}}, nullptr, {N, 4}}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.outputs[0].dtype, DType::kF32);
  EXPECT_EQ(r.outputs[0].shape, (Shape{N, 4}));
  Attributes a;
  a.set("value", int64_t{7});
  a.set("kiln_value_dtype", std::string("i32"));
  auto y = run_op("ConstantOfShape", {{i64({2}, {2, 2}), true}}, a);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].dtype(), DType::kI32);
  EXPECT_EQ(values_of<int32_t>((*y)[0]), (std::vector<int32_t>(4, 7)));
  Attributes h;
  h.set("value", 1.5);
  h.set("kiln_value_dtype", std::string("f16"));
  y = run_op("ConstantOfShape", {{i64({1}, {2}), true}}, h);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<uint16_t>((*y)[0]), (std::vector<uint16_t>{0x3e00, 0x3e00}));
  // An empty shape gives a scalar (default f32 0).
  y = run_op("ConstantOfShape", {{i64({0}, {}), true}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), ConcreteShape{});
  EXPECT_EQ(values_of<float>((*y)[0]), (std::vector<float>{0.f}));
}

TEST(ConstantOfShapeKernel, RejectsBadInputs) {
  auto y = run_op("ConstantOfShape", {{i64({2}, {2, -1}), true}});
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(contains(y.status(), "element 1 = -1 is negative"));
  y = run_op("ConstantOfShape", {{i64({2}, {INT64_MAX, 4}), true}});
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(contains(y.status(), "too many elements"));
  y = run_op("ConstantOfShape", {{i64({2}, {2, 2})}});
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(contains(y.status(), "must be known at compile time"));
  Attributes a;
  a.set("value", 1.0);
  a.set("kiln_value_dtype", std::string("i8"));
  y = run_op("ConstantOfShape", {{i64({1}, {2}), true}}, a);
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(contains(y.status(), "'kiln_value_dtype' is i8"));
  Attributes b;
  b.set("kiln_value_dtype", std::string("f99"));
  y = run_op("ConstantOfShape", {{i64({1}, {2}), true}}, b);
  ASSERT_FALSE(y.ok());
}

Tensor boolean(ConcreteShape dims, std::vector<uint8_t> v) { return make(DType::kBool, dims, v); }

TEST(NonZeroKernel, CoordinatesOfAConstantInRowMajorOrder) {
  EXPECT_EQ(find_op_def("NonZero")->compile_time_inputs, 0u);
  // Spec example: [[1, 0], [1, 1]] -> [[0, 1, 1], [0, 0, 1]].
  auto y = run_op("NonZero", {{boolean({2, 2}, {1, 0, 1, 1}), true}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{2, 3}));
  EXPECT_EQ(values_of<int64_t>((*y)[0]), (std::vector<int64_t>{0, 1, 1, 0, 0, 1}));
  // NaN is nonzero, -0 is zero.
  y = run_op("NonZero", {{f32({3}, {NAN, -0.f, 2.f}), true}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<int64_t>((*y)[0]), (std::vector<int64_t>{0, 2}));
}

TEST(NonZeroKernel, DataDependentSizeIsBoundFromTheData) {
  // Nobody to bind the count: the data must be constant.
  Inferred r = infer_op("NonZero", {{{DType::kF32, {N}}}});
  EXPECT_EQ(r.status.code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(r.status, "depends on the data of input 0 'X'"));
  // With data_dim the count is a fresh size.
  const OpDef* nonzero = find_op_def("NonZero");
  const Attributes none;
  InferArgs args{none, {}, {}, 1, {}, {}, {}, {}};
  args.inputs = {ValueType{DType::kF32, {N, 3}}};
  args.constants = {nullptr};
  args.data_dim = [](size_t i) -> StatusOr<DimExpr> {
    return DimExpr::symbol(fmt::format("c{}", i));
  };
  ASSERT_TRUE(nonzero->infer(args).ok());
  EXPECT_EQ(args.outputs[0].shape, (Shape{DimExpr(2), DimExpr::symbol("c0")}));
  // data_sizes counts the nonzero elements (NaN counts, -0 does not).
  auto sizes = nonzero->data_sizes({}, std::vector<Tensor>{f32({2, 2}, {NAN, -0.f, 0.f, 3.f})});
  ASSERT_TRUE(sizes.ok()) << sizes.status().to_string();
  EXPECT_EQ(*sizes, (std::vector<int64_t>{2}));
  // Data that differs from what the kernel was made for is an error, not an overrun.
  const OpDef* k = find_op_def("NonZero");
  Tensor planned = boolean({3}, {1, 0, 0});
  Tensor other = boolean({3}, {1, 1, 1});
  std::vector<ConcreteInput> inputs = {{true, DType::kBool, {3}, &planned}};
  auto p = plan_concrete(*k, {}, inputs, 1, nullptr);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Tensor out = Tensor::create(DType::kI64, {1, 1}).value();
  ConstBuffer in{DType::kBool, other.shape(), other.data()};
  MutableBuffer o{DType::kI64, out.shape(), out.mutable_data()};
  Status s = p->kernel->run({&in, 1}, {&o, 1});
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(out.values<int64_t>()[0], 0);
}

TEST(CompressKernel, AxisAndFlattened) {
  EXPECT_EQ(find_op_def("Compress")->compile_time_inputs, 0u);
  Tensor x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  Attributes a;
  a.set("axis", int64_t{0});
  auto y = run_op("Compress", {{x}, {boolean({3}, {0, 1, 1}), true}}, a);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (ConcreteShape{2, 2}));
  EXPECT_EQ(values_of<float>((*y)[0]), (std::vector<float>{3, 4, 5, 6}));
  Attributes b;
  b.set("axis", int64_t{-1});
  y = run_op("Compress", {{x}, {boolean({2}, {0, 1}), true}}, b);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<float>((*y)[0]), (std::vector<float>{2, 4, 6}));
  // No axis: the flattened input; a shorter condition leaves the rest out.
  y = run_op("Compress", {{x}, {boolean({5}, {0, 1, 0, 0, 1}), true}});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values_of<float>((*y)[0]), (std::vector<float>{2, 5}));
}

TEST(CompressKernel, RejectsBadInputs) {
  Tensor x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  // A runtime condition needs its count bound first (plan_concrete has none here).
  auto y = run_op("Compress", {{x}, {boolean({3}, {0, 1, 1})}});
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(contains(y.status(), "data-dependent size 0"));
  Attributes a;
  a.set("axis", int64_t{1});
  y = run_op("Compress", {{x}, {boolean({3}, {0, 1, 1}), true}}, a);
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(contains(y.status(), "has 3 elements, more than the 2"));
  y = run_op("Compress", {{x}, {i64({3}, {0, 1, 1}), true}}, a);
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(contains(y.status(), "input 1 'condition' must have dtype bool"));
}

TEST(CompressKernel, DataSizesCountTheSelectedSlices) {
  const OpDef* k = find_op_def("Compress");
  ASSERT_NE(k->data_sizes, nullptr);
  Tensor x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  Attributes a;
  a.set("axis", int64_t{0});
  auto sizes = k->data_sizes(a, std::vector<Tensor>{x, boolean({2}, {1, 1})});
  ASSERT_TRUE(sizes.ok()) << sizes.status().to_string();
  EXPECT_EQ(*sizes, (std::vector<int64_t>{2}));
  // No axis: the flattened input.
  sizes = k->data_sizes({}, std::vector<Tensor>{x, boolean({6}, {1, 0, 1, 0, 1, 1})});
  ASSERT_TRUE(sizes.ok()) << sizes.status().to_string();
  EXPECT_EQ(*sizes, (std::vector<int64_t>{4}));
  // A condition longer than the axis is an error, as at compile time.
  Attributes b;
  b.set("axis", int64_t{1});
  auto long_condition = k->data_sizes(b, std::vector<Tensor>{x, boolean({3}, {1, 1, 1})});
  ASSERT_FALSE(long_condition.ok());
  EXPECT_TRUE(contains(long_condition.status(), "has 3 elements, more than the 2"));
}

}  // namespace
}  // namespace kiln::kernels
