// Data movement kernels (movement.cc, slicing.cc, layout.cc, strided_copy.cc): semantics from the
// ONNX operator spec and hand calculation, symbolic inference and value propagation through shape
// computations, and the bad inputs each rejects.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "kiln/base/half.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/kernel.h"

namespace kiln::kernels {
namespace {

// A tensor of `dtype` holding `values` (converted from double).
Tensor make(DType dtype, ConcreteShape dims, const std::vector<double>& values) {
  Tensor t = Tensor::create(dtype, std::move(dims)).value();
  EXPECT_EQ(static_cast<size_t>(t.element_count()), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    switch (dtype) {
      case DType::kF32: t.mutable_values<float>()[i] = static_cast<float>(v); break;
      case DType::kF64: t.mutable_values<double>()[i] = v; break;
      case DType::kF16:
        t.mutable_values<uint16_t>()[i] = float_to_half_bits(static_cast<float>(v));
        break;
      case DType::kI64: t.mutable_values<int64_t>()[i] = static_cast<int64_t>(v); break;
      case DType::kI32: t.mutable_values<int32_t>()[i] = static_cast<int32_t>(v); break;
      case DType::kI8: t.mutable_values<int8_t>()[i] = static_cast<int8_t>(v); break;
      case DType::kU8: t.mutable_values<uint8_t>()[i] = static_cast<uint8_t>(v); break;
      case DType::kBool: t.mutable_values<uint8_t>()[i] = v != 0; break;
      default: ADD_FAILURE() << "test helper lacks dtype " << dtype_name(dtype);
    }
  }
  return t;
}
Tensor f32(ConcreteShape dims, std::vector<double> v) { return make(DType::kF32, dims, v); }
Tensor i64(ConcreteShape dims, std::vector<double> v) { return make(DType::kI64, dims, v); }
std::vector<double> iota(int64_t n) {
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<double>(i));
  return out;
}
std::vector<double> values_of(const Tensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.element_count(); ++i) out.push_back(element_as_double(t, i));
  return out;
}

struct In {
  In(Tensor t, bool is_constant = true, bool is_absent = false)  // NOLINT: implicit
      : tensor(std::move(t)), constant(is_constant), absent(is_absent) {}
  Tensor tensor;
  bool constant = true;
  bool absent = false;
};
In runtime(Tensor t) { return In(std::move(t), false); }
In absent() { return In(Tensor(), false, true); }

// Plans `op` on concrete inputs (constants unless marked runtime) and runs it.
StatusOr<std::vector<Tensor>> run_op(std::string_view op, std::vector<In> ins,
                                     const Attributes& attributes = {}, size_t outputs = 1) {
  const OpDef* k = find_op_def(op);
  if (k == nullptr) return not_found("no kernel {}", op);
  std::vector<ConcreteInput> inputs;
  for (const In& in : ins) {
    if (in.absent) {
      inputs.push_back({});
    } else {
      inputs.push_back(
          {true, in.tensor.dtype(), in.tensor.shape(), in.constant ? &in.tensor : nullptr});
    }
  }
  KILN_ASSIGN_OR_RETURN(Planned p, plan_concrete(*k, attributes, inputs, outputs, nullptr));
  std::vector<ConstBuffer> in_buffers;
  for (const In& in : ins) {
    in_buffers.push_back(
        {in.tensor.dtype(), in.tensor.shape(), in.absent ? nullptr : in.tensor.data()});
  }
  std::vector<Tensor> out;
  std::vector<MutableBuffer> out_buffers;
  for (const ConcreteOutput& o : p.outputs) {
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(o.dtype, o.dims));
    out.push_back(std::move(t));
  }
  for (Tensor& t : out) out_buffers.push_back({t.dtype(), t.shape(), t.mutable_data()});
  KILN_RETURN_IF_ERROR(p.kernel->run(in_buffers, out_buffers));
  return out;
}

StatusOr<Tensor> run1(std::string_view op, std::vector<In> ins, const Attributes& a = {}) {
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> out, run_op(op, std::move(ins), a));
  return std::move(out[0]);
}

void expect_tensor(const StatusOr<Tensor>& got, ConcreteShape dims, std::vector<double> values) {
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->shape(), dims);
  EXPECT_EQ(values_of(*got), values);
}

bool has_error(const Status& s, StatusCode code, std::vector<std::string> parts) {
  if (s.ok() || s.code() != code) {
    ADD_FAILURE() << "expected code " << static_cast<int>(code) << ", got " << s.to_string();
    return false;
  }
  for (const std::string& p : parts) {
    if (s.to_string().find(p) == std::string::npos) {
      ADD_FAILURE() << "'" << p << "' not in: " << s.to_string();
      return false;
    }
  }
  return true;
}

Attributes attrs(std::initializer_list<std::pair<std::string, Attribute>> list) {
  Attributes a;
  for (const auto& [k, v] : list) a.set(k, v);
  return a;
}

// Symbolic inference: types and (optional) element values per input.
struct SymIn {
  ValueType type;
  std::vector<DimExpr> values;  // empty: unknown
};
struct Inferred {
  Status status;
  std::vector<ValueType> outputs;
  std::vector<std::optional<std::vector<DimExpr>>> values;
};
Inferred infer(std::string_view op, const std::vector<SymIn>& ins, const Attributes& a = {},
               size_t outputs = 1) {
  InferArgs args{a, {}, {}, outputs, {}, {}, {}, {}, {}, {}};
  for (const SymIn& in : ins) {
    args.inputs.emplace_back(in.type);
    args.constants.push_back(nullptr);
    args.values.push_back(&in.values);
  }
  Status s = find_op_def(op)->infer(args);
  return {s, args.outputs, args.output_values};
}
const DimExpr N = DimExpr::symbol("N");
SymIn sym(DType dtype, Shape shape, std::vector<DimExpr> values = {}) {
  return {ValueType{dtype, std::move(shape)}, std::move(values)};
}

TEST(ReverseSequence, ReversesEachEntrysLeadingSteps) {
  // The ONNX operator spec's two examples: time-major [T=4, B=4] with lens [4, 3, 2, 1], and
  // batch-major [B=4, T=4] with lens [1, 2, 3, 4].
  expect_tensor(run1("ReverseSequence", {f32({4, 4}, iota(16)), i64({4}, {4, 3, 2, 1})},
                     attrs({{"time_axis", int64_t{0}}, {"batch_axis", int64_t{1}}})),
                {4, 4}, {12, 9, 6, 3, 8, 5, 2, 7, 4, 1, 10, 11, 0, 13, 14, 15});
  expect_tensor(run1("ReverseSequence", {f32({4, 4}, iota(16)), i64({4}, {1, 2, 3, 4})},
                     attrs({{"time_axis", int64_t{1}}, {"batch_axis", int64_t{0}}})),
                {4, 4}, {0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12});
  // Trailing dims move as a whole: [T=2, B=2, 2], entry 0 reversed over both steps, entry 1 (length
  // 1) and zero-length sequences unchanged; any dtype.
  expect_tensor(run1("ReverseSequence", {make(DType::kI8, {2, 2, 2}, iota(8)), i64({2}, {2, 1})}),
                {2, 2, 2}, {4, 5, 2, 3, 0, 1, 6, 7});
  expect_tensor(run1("ReverseSequence", {f32({2, 2, 2}, iota(8)), i64({2}, {0, 0})}), {2, 2, 2},
                iota(8));
}

TEST(ReverseSequence, SymbolicAndBadInputs) {
  Inferred r = infer("ReverseSequence",
                     {sym(DType::kF32, {DimExpr::symbol("T"), N, 3}), sym(DType::kI64, {N})});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(shape_to_string(r.outputs[0].shape), "[T,N,3]");
  EXPECT_TRUE(has_error(run1("ReverseSequence", {f32({2, 2}, iota(4)), i64({2}, {1, 3})}).status(),
                        StatusCode::kInvalidArgument,
                        {"'sequence_lens' element 1 is 3", "outside [0, 2]"}));
  EXPECT_TRUE(has_error(run1("ReverseSequence", {f32({2, 2}, iota(4)), i64({2}, {-1, 0})}).status(),
                        StatusCode::kInvalidArgument, {"element 0 is -1"}));
  EXPECT_TRUE(has_error(run1("ReverseSequence", {f32({2, 3}, iota(6)), i64({2}, {1, 1})}).status(),
                        StatusCode::kInvalidArgument, {"'sequence_lens' length"}));
  EXPECT_TRUE(has_error(run1("ReverseSequence", {f32({2, 2}, iota(4)), i64({2}, {1, 1})},
                             attrs({{"batch_axis", int64_t{0}}}))
                            .status(),
                        StatusCode::kInvalidArgument, {"'batch_axis' = 0", "'time_axis' = 0"}));
  EXPECT_TRUE(
      has_error(run1("ReverseSequence", {f32({4}, iota(4)), i64({4}, {1, 1, 1, 1})}).status(),
                StatusCode::kInvalidArgument, {"input 0 'input'", "rank"}));
}

// Shape values of rank 2 (PyTorch's F.pad amounts): Reshape keeps the row-major order, Transpose
// permutes it, a reversing Slice picks rows; values of rank > 1 with symbolic dims stay unknown.
TEST(ShapeValues, Rank2ThroughReshapeTransposeAndSlice) {
  const DimExpr a = N - DimExpr(1), b = N + DimExpr(2);
  Inferred t = infer("Transpose", {sym(DType::kI64, {2, 2}, {a, DimExpr(0), b, DimExpr(7)})},
                     attrs({{"perm", std::vector<int64_t>{1, 0}}}));
  ASSERT_TRUE(t.status.ok()) << t.status.to_string();
  ASSERT_TRUE(!t.values.empty() && t.values[0].has_value());
  EXPECT_EQ(*t.values[0], (std::vector<DimExpr>{a, b, DimExpr(0), DimExpr(7)}));
  Inferred reshaped = infer("Reshape", {sym(DType::kI64, {4}, {a, DimExpr(0), b, DimExpr(7)}),
                                        sym(DType::kI64, {2}, {DimExpr(-1), DimExpr(2)})});
  ASSERT_TRUE(reshaped.status.ok()) << reshaped.status.to_string();
  EXPECT_EQ(shape_to_string(reshaped.outputs[0].shape), "[2,2]");
  ASSERT_TRUE(!reshaped.values.empty() && reshaped.values[0].has_value());
  EXPECT_EQ(*reshaped.values[0], (std::vector<DimExpr>{a, DimExpr(0), b, DimExpr(7)}));
  const int64_t open = std::numeric_limits<int64_t>::max();
  Inferred rows =
      infer("Slice", {sym(DType::kI64, {2, 2}, {a, DimExpr(0), b, DimExpr(7)}),
                      sym(DType::kI64, {1}, {DimExpr(-1)}), sym(DType::kI64, {1}, {DimExpr(-open)}),
                      sym(DType::kI64, {1}, {DimExpr(0)}), sym(DType::kI64, {1}, {DimExpr(-1)})});
  ASSERT_TRUE(rows.status.ok()) << rows.status.to_string();
  ASSERT_TRUE(!rows.values.empty() && rows.values[0].has_value());
  EXPECT_EQ(*rows.values[0], (std::vector<DimExpr>{b, DimExpr(7), a, DimExpr(0)}));
  Inferred symbolic = infer("Transpose", {sym(DType::kI64, {N, 2}, {a, b})});
  ASSERT_TRUE(symbolic.status.ok()) << symbolic.status.to_string();
  EXPECT_TRUE(symbolic.values.empty() || !symbolic.values[0].has_value());
}

TEST(Transpose, DefaultReversesAndPermMovesAxes) {
  expect_tensor(run1("Transpose", {f32({2, 3}, iota(6))}), {3, 2}, {0, 3, 1, 4, 2, 5});
  // y[j][i][k] = x[i][j][k] for x of [2,2,2] = 0..7.
  expect_tensor(run1("Transpose", {make(DType::kI8, {2, 2, 2}, iota(8))},
                     attrs({{"perm", std::vector<int64_t>{1, 0, 2}}})),
                {2, 2, 2}, {0, 1, 4, 5, 2, 3, 6, 7});
}

TEST(Transpose, LargeMatricesInEveryElementSize) {
  // Big enough for the tiled path and the parallel loop; y[j][i] = x[i][j].
  const int64_t rows = 300, cols = 257;
  for (DType dtype : {DType::kU8, DType::kF16, DType::kF32, DType::kI64}) {
    std::vector<double> x, want(rows * cols);
    for (int64_t i = 0; i < rows * cols; ++i) x.push_back(static_cast<double>(i % 251));
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) want[j * rows + i] = x[i * cols + j];
    }
    expect_tensor(run1("Transpose", {make(dtype, {rows, cols}, x)}), {cols, rows}, want);
  }
}

TEST(Transpose, SymbolicAndBadPerm) {
  Inferred r = infer("Transpose", {sym(DType::kF32, {N, 3, 4})},
                     attrs({{"perm", std::vector<int64_t>{2, 0, 1}}}));
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(shape_to_string(r.outputs[0].shape), "[4,N,3]");
  EXPECT_TRUE(has_error(
      run1("Transpose", {f32({2, 3}, iota(6))}, attrs({{"perm", std::vector<int64_t>{0, 0}}}))
          .status(),
      StatusCode::kInvalidArgument, {"not a permutation"}));
  EXPECT_TRUE(has_error(
      run1("Transpose", {f32({2, 3}, iota(6))}, attrs({{"perm", std::vector<int64_t>{0}}}))
          .status(),
      StatusCode::kInvalidArgument, {"1 elements", "rank 2"}));
}

TEST(Concat, AxisNegativeAndEmptyInputs) {
  expect_tensor(run1("Concat", {f32({2, 1}, {1, 2}), f32({2, 0}, {}), f32({2, 2}, {3, 4, 5, 6})},
                     attrs({{"axis", int64_t{-1}}})),
                {2, 3}, {1, 3, 4, 2, 5, 6});
  expect_tensor(
      run1("Concat", {make(DType::kBool, {1, 2}, {1, 0}), make(DType::kBool, {1, 2}, {0, 1})},
           attrs({{"axis", int64_t{0}}})),
      {2, 2}, {1, 0, 0, 1});
}

TEST(Concat, SymbolicDimsAndErrors) {
  Inferred r = infer("Concat", {sym(DType::kF32, {N, 2}), sym(DType::kF32, {N, 3})},
                     attrs({{"axis", int64_t{1}}}));
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(shape_to_string(r.outputs[0].shape), "[N,5]");
  // N against 3 cannot be proven: assumed (N must be 3 when bound), and refused once it is not.
  Inferred assumed = infer("Concat", {sym(DType::kF32, {N, 2}), sym(DType::kF32, {3, 3})},
                           attrs({{"axis", int64_t{1}}}));
  ASSERT_TRUE(assumed.status.ok()) << assumed.status.to_string();
  EXPECT_EQ(shape_to_string(assumed.outputs[0].shape), "[N,5]");
  EXPECT_TRUE(has_error(infer("Concat", {sym(DType::kF32, {2, 2}), sym(DType::kF32, {3, 3})},
                              attrs({{"axis", int64_t{1}}}))
                            .status,
                        StatusCode::kInvalidArgument, {"dim 0 of input 1 'inputs'"}));
  EXPECT_TRUE(has_error(
      run1("Concat", {f32({2, 2}, iota(4)), f32({3, 2}, iota(6))}, attrs({{"axis", int64_t{1}}}))
          .status(),
      StatusCode::kInvalidArgument, {"dim 0 of input 1 'inputs'", "must be 2, got 3"}));
  EXPECT_TRUE(has_error(
      run1("Concat", {f32({2}, {1, 2}), i64({2}, {1, 2})}, attrs({{"axis", int64_t{0}}})).status(),
      StatusCode::kInvalidArgument, {"input 1 'inputs' must have dtype f32"}));
  EXPECT_TRUE(has_error(run1("Concat", {f32({2}, {1, 2})}).status(), StatusCode::kInvalidArgument,
                        {"attribute 'axis' is required"}));
  EXPECT_TRUE(has_error(run1("Concat", {f32({2}, {1, 2})}, attrs({{"axis", int64_t{1}}})).status(),
                        StatusCode::kInvalidArgument, {"attribute 'axis' = 1 is out of range"}));
}

// Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0), [0]), [-1])) keeps the batch symbolic: the
// Gather result {N} is fed as values, as the index family would give it.
TEST(ShapeComputation, ReshapeOfConcatOfUnsqueezeStaysSymbolic) {
  Inferred u = infer("Unsqueeze", {sym(DType::kI64, {}, {N}), sym(DType::kI64, {1}, {0})});
  ASSERT_TRUE(u.status.ok()) << u.status.to_string();
  EXPECT_EQ(shape_to_string(u.outputs[0].shape), "[1]");
  ASSERT_EQ(u.values.size(), 1u);
  ASSERT_TRUE(u.values[0].has_value());
  EXPECT_EQ(*u.values[0], std::vector<DimExpr>{N});

  Inferred c = infer("Concat", {sym(DType::kI64, {1}, *u.values[0]), sym(DType::kI64, {1}, {-1})},
                     attrs({{"axis", int64_t{0}}}));
  ASSERT_TRUE(c.status.ok()) << c.status.to_string();
  ASSERT_TRUE(c.values[0].has_value());
  EXPECT_EQ(*c.values[0], (std::vector<DimExpr>{N, DimExpr(-1)}));

  Inferred r = infer("Reshape", {sym(DType::kF32, {N, 3, 4}), sym(DType::kI64, {2}, *c.values[0])});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(shape_to_string(r.outputs[0].shape), "[N,12]");

  // A symbolic element is the dim itself: [N*3, 4] from values {3*N, 4}.
  Inferred s = infer("Reshape", {sym(DType::kF32, {N, 3, 4}), sym(DType::kI64, {2}, {N * 3, 4})});
  ASSERT_TRUE(s.status.ok()) << s.status.to_string();
  EXPECT_EQ(shape_to_string(s.outputs[0].shape), "[3*N,4]");

  // Slice and Squeeze of a shape vector pass values too: Shape(x)[1:] = {3, 4}; [N] -> N.
  Inferred sl = infer("Slice", {sym(DType::kI64, {3}, {N, 3, 4}), sym(DType::kI64, {1}, {1}),
                                sym(DType::kI64, {1}, {100})});
  ASSERT_TRUE(sl.status.ok()) << sl.status.to_string();
  ASSERT_TRUE(sl.values[0].has_value());
  EXPECT_EQ(*sl.values[0], (std::vector<DimExpr>{3, 4}));
  Inferred sq = infer("Squeeze", {sym(DType::kI64, {1}, {N})});
  ASSERT_TRUE(sq.status.ok()) << sq.status.to_string();
  EXPECT_TRUE(sq.outputs[0].shape.empty());
  ASSERT_TRUE(sq.values[0].has_value());
  EXPECT_EQ(*sq.values[0], std::vector<DimExpr>{N});
}

TEST(Reshape, ZeroMinusOneAllowZeroAndDtypes) {
  Tensor x = make(DType::kI32, {2, 3, 4}, iota(24));
  expect_tensor(run1("Reshape", {x, i64({3}, {0, -1, 2})}), {2, 6, 2}, iota(24));
  // allowzero keeps a literal 0 (the input has no elements).
  expect_tensor(run1("Reshape", {f32({0, 3, 4}, {}), i64({3}, {3, 4, 0})},
                     attrs({{"allowzero", int64_t{1}}})),
                {3, 4, 0}, {});
  Inferred r = infer("Reshape", {sym(DType::kF32, {N, 6}), sym(DType::kI64, {2}, {-1, 3})});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(shape_to_string(r.outputs[0].shape), "[2*N,3]");
}

TEST(Reshape, BadInputs) {
  auto reshape = [](ConcreteShape in, std::vector<double> target) {
    const int64_t n = static_cast<int64_t>(target.size());
    return run1("Reshape", {f32(in, std::vector<double>(product(in), 0.0)), i64({n}, target)})
        .status();
  };
  EXPECT_TRUE(
      has_error(reshape({2, 3}, {-1, -1}), StatusCode::kInvalidArgument, {"more than one -1"}));
  EXPECT_TRUE(has_error(reshape({2, 3}, {4, -1}), StatusCode::kInvalidArgument,
                        {"element count 6 is not a multiple of 4"}));
  EXPECT_TRUE(has_error(reshape({2, 3}, {5}), StatusCode::kInvalidArgument, {"must be 6, got 5"}));
  EXPECT_TRUE(
      has_error(reshape({2, 3}, {-2, 3}), StatusCode::kInvalidArgument, {"invalid dim -2"}));
  EXPECT_TRUE(has_error(reshape({6}, {0, 0}), StatusCode::kInvalidArgument, {"copies dim 1"}));
  // 2^62 * 4 overflows int64.
  EXPECT_TRUE(has_error(reshape({2}, {4611686018427387904.0, 4}), StatusCode::kInvalidArgument,
                        {"more than 2^63 elements"}));
  {
    // 3*N elements into [-1, 2]: assumed even.
    AssumptionRecorder recorder;
    Inferred r = infer("Reshape", {sym(DType::kF32, {N, 3}), sym(DType::kI64, {2}, {-1, 2})});
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_EQ(shape_to_string(r.outputs[0].shape), "[N + floor(N/2),2]");
    ASSERT_EQ(recorder.assumptions().size(), 1u);
    EXPECT_EQ(recorder.assumptions()[0].to_string(), "(3*N) % 2 == 0");
    // A symbolic divisor that does not divide: still refused.
    DimExpr S = DimExpr::symbol("S");
    EXPECT_TRUE(has_error(
        infer("Reshape", {sym(DType::kF32, {N, S}), sym(DType::kI64, {2}, {-1, S + 1})}).status,
        StatusCode::kUnimplemented, {"cannot infer -1", "not provably a multiple"}));
  }
  EXPECT_TRUE(has_error(run1("Reshape", {f32({2}, {1, 2}), runtime(i64({1}, {2}))}).status(),
                        StatusCode::kUnimplemented, {"input 1 'shape'", "compile time"}));
  EXPECT_TRUE(has_error(run1("Reshape", {f32({2}, {1, 2}), f32({1}, {2})}).status(),
                        StatusCode::kInvalidArgument, {"input 1 'shape' must have dtype i64"}));
}

TEST(Split, EqualVariableAndZeroParts) {
  auto out = run_op("Split", {f32({2, 4}, iota(8))}, attrs({{"axis", int64_t{1}}}), 2);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values_of((*out)[0]), (std::vector<double>{0, 1, 4, 5}));
  EXPECT_EQ(values_of((*out)[1]), (std::vector<double>{2, 3, 6, 7}));
  out = run_op("Split", {f32({5}, iota(5)), i64({3}, {2, 0, 3})}, {}, 3);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values_of((*out)[0]), (std::vector<double>{0, 1}));
  EXPECT_EQ((*out)[1].shape(), ConcreteShape{0});
  EXPECT_EQ(values_of((*out)[2]), (std::vector<double>{2, 3, 4}));
  EXPECT_TRUE(has_error(run_op("Split", {f32({5}, iota(5))}, {}, 2).status(),
                        StatusCode::kInvalidArgument, {"does not split into 2 equal parts"}));
  EXPECT_TRUE(has_error(run_op("Split", {f32({5}, iota(5)), i64({2}, {2, 2})}, {}, 2).status(),
                        StatusCode::kInvalidArgument,
                        {"sum of input 1 'split'", "must be 5, got 4"}));
  EXPECT_TRUE(has_error(run_op("Split", {f32({5}, iota(5)), i64({2}, {6, -1})}, {}, 2).status(),
                        StatusCode::kInvalidArgument, {"negative"}));
  EXPECT_TRUE(has_error(
      run_op("Split", {f32({4}, iota(4))}, attrs({{"num_outputs", int64_t{2}}}), 2).status(),
      StatusCode::kUnimplemented, {"attribute 'num_outputs'"}));
  Inferred r = infer("Split", {sym(DType::kF32, {N * 2, 3})}, {}, 2);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(shape_to_string(r.outputs[1].shape), "[N,3]");
  // N may be odd: the halves are floor(N/2) under the assumption N % 2 == 0.
  AssumptionRecorder recorder;
  r = infer("Split", {sym(DType::kF32, {N, 3})}, {}, 2);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(shape_to_string(r.outputs[0].shape), "[floor(N/2),3]");
  ASSERT_EQ(recorder.assumptions().size(), 1u);
  EXPECT_EQ(recorder.assumptions()[0].to_string(), "N % 2 == 0");
}

TEST(Slice, StepsClampingAndDefaults) {
  // x = 0..11 as [3,4]; rows 0..1 (end 1000 clamps), columns 3,1 (step -2 from the end).
  Tensor x = f32({3, 4}, iota(12));
  expect_tensor(run1("Slice", {x, i64({2}, {-10, -1}), i64({2}, {2, -1000}), i64({2}, {0, 1}),
                               i64({2}, {1, -2})}),
                {2, 2}, {3, 1, 7, 5});
  // Default axes and steps: [1:, 1:3].
  expect_tensor(run1("Slice", {x, i64({2}, {1, 1}), i64({2}, {1000, 3})}), {2, 2}, {5, 6, 9, 10});
  // Start beyond the end gives an empty slice; a reversed whole axis.
  expect_tensor(run1("Slice", {x, i64({1}, {5}), i64({1}, {10}), i64({1}, {1})}), {3, 0}, {});
  expect_tensor(run1("Slice", {make(DType::kU8, {4}, {1, 2, 3, 4}), i64({1}, {-1}),
                               i64({1}, {-9223372036854775807.0}), i64({1}, {0}), i64({1}, {-1})}),
                {4}, {4, 3, 2, 1});
  // i32 indices; step larger than the dim.
  expect_tensor(run1("Slice", {x, make(DType::kI32, {1}, {1}), make(DType::kI32, {1}, {4}),
                               make(DType::kI32, {1}, {1}), make(DType::kI32, {1}, {1000})}),
                {3, 1}, {1, 5, 9});
}

TEST(Slice, SymbolicDimsAndErrors) {
  Inferred r = infer("Slice", {sym(DType::kF32, {N, 6}), sym(DType::kI64, {2}, {0, 1}),
                               sym(DType::kI64, {2}, {int64_t{9223372036854775807}, 5})});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(shape_to_string(r.outputs[0].shape), "[N,4]");
  Tensor x = f32({4}, iota(4));
  EXPECT_TRUE(has_error(
      run1("Slice", {x, i64({1}, {0}), i64({1}, {4}), i64({1}, {0}), i64({1}, {0})}).status(),
      StatusCode::kInvalidArgument, {"input 4 'steps' element 0 is 0"}));
  EXPECT_TRUE(has_error(run1("Slice", {x, i64({1}, {0}), i64({2}, {4, 4})}).status(),
                        StatusCode::kInvalidArgument, {"input 2 'ends' has 2 elements"}));
  EXPECT_TRUE(has_error(run1("Slice", {x, i64({1}, {0}), i64({1}, {4}), i64({1}, {1})}).status(),
                        StatusCode::kInvalidArgument, {"axes"}));
  EXPECT_TRUE(has_error(run1("Slice", {x, runtime(i64({1}, {0})), i64({1}, {4})}).status(),
                        StatusCode::kUnimplemented, {"input 1 'starts'", "compile time"}));
}

// Every start/end/step on a symbolic dim gives an expression that, at each size, is the length
// the concrete rule gives (ONNX's clamping of negative and out-of-range bounds).
TEST(Slice, SymbolicLengthsMatchConcreteAtEverySize) {
  const int64_t open = INT64_MAX;
  const std::vector<int64_t> bounds = {0, 1, 2, 4, -1, -3, open, -open};
  for (int64_t step : {1, 2, 3, -1, -2}) {
    for (int64_t start : bounds) {
      for (int64_t end : bounds) {
        Inferred r = infer("Slice", {sym(DType::kF32, {N}), sym(DType::kI64, {1}, {start}),
                                     sym(DType::kI64, {1}, {end}), sym(DType::kI64, {1}, {0}),
                                     sym(DType::kI64, {1}, {step})});
        ASSERT_TRUE(r.status.ok()) << r.status.to_string();
        for (int64_t n = 0; n <= 9; ++n) {
          Inferred c = infer("Slice", {sym(DType::kF32, {n}), sym(DType::kI64, {1}, {start}),
                                       sym(DType::kI64, {1}, {end}), sym(DType::kI64, {1}, {0}),
                                       sym(DType::kI64, {1}, {step})});
          ASSERT_TRUE(c.status.ok()) << c.status.to_string();
          EXPECT_EQ(r.outputs[0].shape[0].evaluate({{"N", n}}).value(),
                    c.outputs[0].shape[0].constant_value().value_or(-99))
              << "x[" << start << ":" << end << ":" << step << "] of " << n
              << " elements: " << r.outputs[0].shape[0].to_string();
        }
      }
    }
  }
  // A bound computed from shapes (x[:, S//2:]) and an end past a constant dim (mask[:S]).
  Inferred half = infer("Slice", {sym(DType::kF32, {N}), sym(DType::kI64, {1}, {N.floor_div(2)}),
                                  sym(DType::kI64, {1}, {open})});
  ASSERT_TRUE(half.status.ok()) << half.status.to_string();
  EXPECT_EQ(shape_to_string(half.outputs[0].shape), "[N - floor(N/2)]");
  AssumptionRecorder recorder;
  Inferred mask = infer(
      "Slice", {sym(DType::kF32, {1024}), sym(DType::kI64, {1}, {0}), sym(DType::kI64, {1}, {N})});
  ASSERT_TRUE(mask.status.ok()) << mask.status.to_string();
  EXPECT_EQ(shape_to_string(mask.outputs[0].shape), "[N]");
  ASSERT_EQ(recorder.assumptions().size(), 1u);
  EXPECT_EQ(recorder.assumptions()[0].to_string(), "-N + 1024 >= 0");
}

TEST(SqueezeUnsqueezeFlatten, AxesAndErrors) {
  Tensor x = make(DType::kI64, {1, 3, 1}, {7, 8, 9});
  expect_tensor(run1("Squeeze", {x}), {3}, {7, 8, 9});
  expect_tensor(run1("Squeeze", {x, i64({1}, {-1})}), {1, 3}, {7, 8, 9});
  EXPECT_TRUE(has_error(run1("Squeeze", {x, i64({1}, {1})}).status(), StatusCode::kInvalidArgument,
                        {"squeezed dim 1", "must be 1, got 3"}));
  EXPECT_TRUE(has_error(infer("Squeeze", {sym(DType::kF32, {N, 1})}).status,
                        StatusCode::kUnimplemented, {"cannot tell whether dim 0"}));
  expect_tensor(run1("Unsqueeze", {f32({2}, {1, 2}), i64({2}, {-1, 0})}), {1, 2, 1}, {1, 2});
  EXPECT_TRUE(has_error(run1("Unsqueeze", {f32({2}, {1, 2}), i64({2}, {0, -3})}).status(),
                        StatusCode::kInvalidArgument, {"lists axis 0 twice"}));
  EXPECT_TRUE(has_error(run1("Unsqueeze", {f32({2}, {1, 2}), i64({1}, {3})}).status(),
                        StatusCode::kInvalidArgument, {"out of range"}));
  expect_tensor(run1("Flatten", {make(DType::kBool, {2, 1, 2}, {1, 0, 0, 1})},
                     attrs({{"axis", int64_t{-1}}})),
                {2, 2}, {1, 0, 0, 1});
  Inferred f = infer("Flatten", {sym(DType::kF32, {N, 2, 3})}, attrs({{"axis", int64_t{2}}}));
  ASSERT_TRUE(f.status.ok());
  EXPECT_EQ(shape_to_string(f.outputs[0].shape), "[2*N,3]");
}

TEST(IdentityDropout, CopyMaskAndTraining) {
  expect_tensor(run1("Identity", {make(DType::kI8, {3}, {-1, 0, 5})}), {3}, {-1, 0, 5});
  Inferred id = infer("Identity", {sym(DType::kI64, {2}, {N, 3})});
  ASSERT_TRUE(id.status.ok());
  ASSERT_TRUE(id.values[0].has_value());
  EXPECT_EQ(*id.values[0], (std::vector<DimExpr>{N, 3}));
  auto out = run_op("Dropout", {f32({2}, {1, -2}), f32({}, {0.5})}, {}, 2);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values_of((*out)[0]), (std::vector<double>{1, -2}));
  EXPECT_EQ((*out)[1].dtype(), DType::kBool);
  EXPECT_EQ(values_of((*out)[1]), (std::vector<double>{1, 1}));
  expect_tensor(run1("Dropout", {f32({2}, {1, 2}), absent(), runtime(make(DType::kBool, {}, {0}))}),
                {2}, {1, 2});
}

// Training mode: ratio 0 is the identity with an all-true mask; otherwise each element is either
// dropped (0, mask false) or scaled by 1 / (1 - ratio) (mask true), the same on every run for one
// seed.
TEST(IdentityDropout, Training) {
  const Tensor on = make(DType::kBool, {}, {1});
  auto zero = run_op("Dropout", {f32({3}, {1, -2, 3}), f32({}, {0}), on}, {}, 2);
  ASSERT_TRUE(zero.ok()) << zero.status().to_string();
  EXPECT_EQ(values_of((*zero)[0]), (std::vector<double>{1, -2, 3}));
  EXPECT_EQ(values_of((*zero)[1]), (std::vector<double>{1, 1, 1}));

  std::vector<double> xs = iota(256);
  const Attributes seed7 = attrs({{"seed", int64_t{7}}});
  auto a = run_op("Dropout", {f32({256}, xs), f32({}, {0.75}), on}, seed7, 2);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  const std::vector<double> y = values_of((*a)[0]), mask = values_of((*a)[1]);
  int kept = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_EQ(y[i], mask[i] != 0 ? xs[i] * 4 : 0.0) << "element " << i;
    kept += mask[i] != 0;
  }
  // 64 expected of 256; far outside [32, 96] would mean a broken draw.
  EXPECT_GT(kept, 32);
  EXPECT_LT(kept, 96);
  // The same seed draws the same mask (a runtime ratio too); another seed another one.
  auto again = run_op("Dropout", {f32({256}, xs), runtime(f32({}, {0.75})), runtime(on)}, seed7, 2);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(values_of((*again)[1]), mask);
  auto other =
      run_op("Dropout", {f32({256}, xs), f32({}, {0.75}), on}, attrs({{"seed", int64_t{8}}}), 2);
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  EXPECT_NE(values_of((*other)[1]), mask);
  // Default ratio 0.5: kept elements double.
  auto half = run_op("Dropout", {f32({4}, {1, 2, 3, 4}), absent(), on}, seed7, 2);
  ASSERT_TRUE(half.ok()) << half.status().to_string();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(element_as_double((*half)[0], i),
              element_as_double((*half)[1], i) != 0 ? 2.0 * (i + 1) : 0.0);
  }
  // ratio must lie in [0, 1): a constant at inference, a runtime one when the kernel runs.
  EXPECT_TRUE(has_error(run_op("Dropout", {f32({2}, {1, 2}), f32({}, {1}), on}).status(),
                        StatusCode::kInvalidArgument,
                        {"input 1 'ratio' must be in [0, 1) in training mode, got 1"}));
  EXPECT_TRUE(has_error(
      run_op("Dropout", {f32({2}, {1, 2}), runtime(f32({}, {-0.5})), runtime(on)}).status(),
      StatusCode::kInvalidArgument, {"input 1 'ratio' must be in [0, 1)"}));
  // Out of training mode the ratio is not used.
  expect_tensor(run1("Dropout", {f32({2}, {1, 2}), f32({}, {1}), make(DType::kBool, {}, {0})}), {2},
                {1, 2});
}

TEST(Expand, BidirectionalBroadcast) {
  // [3,1] to [2,1,6]: result [2,3,6], each row repeats its value.
  auto y = run1("Expand", {f32({3, 1}, {1, 2, 3}), i64({3}, {2, 1, 6})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->shape(), (ConcreteShape{2, 3, 6}));
  for (int64_t i = 0; i < 36; ++i) EXPECT_EQ(values_of(*y)[i], 1 + (i / 6) % 3) << i;
  // A shape of lower rank than the input keeps the input's dims.
  expect_tensor(run1("Expand", {f32({2, 2}, {1, 2, 3, 4}), i64({1}, {1})}), {2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(has_error(run1("Expand", {f32({3}, {1, 2, 3}), i64({1}, {4})}).status(),
                        StatusCode::kInvalidArgument, {"cannot broadcast"}));
  EXPECT_TRUE(has_error(run1("Expand", {f32({1}, {1}), i64({1}, {-2})}).status(),
                        StatusCode::kInvalidArgument, {"negative dim -2"}));
  Inferred r = infer("Expand", {sym(DType::kF32, {1, 3}), sym(DType::kI64, {2}, {N, 1})});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(shape_to_string(r.outputs[0].shape), "[N,3]");
}

TEST(Tile, RepeatsAndHostileRepeats) {
  expect_tensor(run1("Tile", {f32({2, 2}, {1, 2, 3, 4}), i64({2}, {2, 2})}), {4, 4},
                {1, 2, 1, 2, 3, 4, 3, 4, 1, 2, 1, 2, 3, 4, 3, 4});
  expect_tensor(run1("Tile", {make(DType::kF16, {3}, {1, 2, 3}), i64({1}, {0})}), {0}, {});
  EXPECT_TRUE(has_error(run1("Tile", {f32({2}, {1, 2}), i64({1}, {-1})}).status(),
                        StatusCode::kInvalidArgument, {"negative"}));
  EXPECT_TRUE(has_error(run1("Tile", {f32({4}, {1, 2, 3, 4}), i64({1}, {3e18})}).status(),
                        StatusCode::kInvalidArgument, {"overflows"}));
  EXPECT_TRUE(has_error(run1("Tile", {f32({2, 2}, {1, 2, 3, 4}), i64({2}, {1e10, 1e10})}).status(),
                        StatusCode::kInvalidArgument, {"more than 2^63 elements"}));
  EXPECT_TRUE(has_error(run1("Tile", {f32({2}, {1, 2}), i64({2}, {1, 1})}).status(),
                        StatusCode::kInvalidArgument, {"2 elements", "rank 1"}));
  Inferred r = infer("Tile", {sym(DType::kF32, {N, 3}), sym(DType::kI64, {2}, {2, 1})});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(shape_to_string(r.outputs[0].shape), "[2*N,3]");
}

TEST(Pad, ModesAndCrops) {
  // [[1,2,3],[4,5,6]] padded by one column on each side and one row below.
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor pads = i64({4}, {0, 1, 1, 1});
  expect_tensor(run1("Pad", {x, pads, runtime(f32({}, {9}))}), {3, 5},
                {9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9, 9, 9, 9, 9});
  expect_tensor(run1("Pad", {x, pads}, attrs({{"mode", std::string("edge")}})), {3, 5},
                {1, 1, 2, 3, 3, 4, 4, 5, 6, 6, 4, 4, 5, 6, 6});
  expect_tensor(run1("Pad", {x, pads}, attrs({{"mode", std::string("reflect")}})), {3, 5},
                {2, 1, 2, 3, 2, 5, 4, 5, 6, 5, 2, 1, 2, 3, 2});
  // numpy's reflect repeats past the edge: [1,2,3] padded by 5 on the right.
  expect_tensor(run1("Pad", {make(DType::kI32, {3}, {1, 2, 3}), i64({2}, {0, 5})},
                     attrs({{"mode", std::string("reflect")}})),
                {8}, {1, 2, 3, 2, 1, 2, 3, 2});
  // Negative pads crop; the constant defaults to 0.
  expect_tensor(run1("Pad", {x, i64({4}, {0, -1, 1, 1})}), {3, 3}, {2, 3, 0, 5, 6, 0, 0, 0, 0});
}

TEST(Pad, BadInputs) {
  Tensor x = f32({2, 3}, iota(6));
  EXPECT_TRUE(has_error(run1("Pad", {x, i64({2}, {1, 1})}).status(), StatusCode::kInvalidArgument,
                        {"'pads' has 2 elements", "needs 4"}));
  EXPECT_TRUE(has_error(run1("Pad", {x, i64({4}, {0, -4, 0, 0})}).status(),
                        StatusCode::kInvalidArgument, {"gives -1"}));
  EXPECT_TRUE(has_error(run1("Pad", {x, i64({4}, {0, 9e18, 0, 9e18})}).status(),
                        StatusCode::kInvalidArgument, {"overflow"}));
  EXPECT_TRUE(has_error(
      run1("Pad", {x, i64({4}, {0, 1, 0, 0})}, attrs({{"mode", std::string("wrap")}})).status(),
      StatusCode::kUnimplemented, {"'wrap'"}));
  EXPECT_TRUE(has_error(
      run1("Pad", {f32({0}, {}), i64({2}, {1, 0})}, attrs({{"mode", std::string("edge")}}))
          .status(),
      StatusCode::kInvalidArgument, {"empty"}));
  EXPECT_TRUE(has_error(run1("Pad", {x, i64({4}, {0, 1, 0, 0}), i64({}, {1})}).status(),
                        StatusCode::kInvalidArgument,
                        {"input 2 'constant_value' must have dtype f32"}));
  Inferred r = infer("Pad", {sym(DType::kF32, {N, 3}), sym(DType::kI64, {4}, {1, 0, 2, 0})});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(shape_to_string(r.outputs[0].shape), "[N + 3,3]");
}

// The examples of the ONNX DepthToSpace spec: x = 0..47 as [1, 8, 2, 3], blocksize 2.
TEST(DepthToSpace, SpecExamplesAndInverse) {
  Tensor x = f32({1, 8, 2, 3}, iota(48));
  const std::vector<double> dcr = {0,  12, 1,  13, 2,  14, 24, 36, 25, 37, 26, 38, 3,  15, 4,  16,
                                   5,  17, 27, 39, 28, 40, 29, 41, 6,  18, 7,  19, 8,  20, 30, 42,
                                   31, 43, 32, 44, 9,  21, 10, 22, 11, 23, 33, 45, 34, 46, 35, 47};
  const std::vector<double> crd = {0,  6,  1,  7,  2,  8,  12, 18, 13, 19, 14, 20, 3,  9,  4,  10,
                                   5,  11, 15, 21, 16, 22, 17, 23, 24, 30, 25, 31, 26, 32, 36, 42,
                                   37, 43, 38, 44, 27, 33, 28, 34, 29, 35, 39, 45, 40, 46, 41, 47};
  expect_tensor(run1("DepthToSpace", {x}, attrs({{"blocksize", int64_t{2}}})), {1, 2, 4, 6}, dcr);
  expect_tensor(
      run1("DepthToSpace", {x}, attrs({{"blocksize", int64_t{2}}, {"mode", std::string("CRD")}})),
      {1, 2, 4, 6}, crd);
  // SpaceToDepth undoes DCR DepthToSpace.
  expect_tensor(run1("SpaceToDepth", {f32({1, 2, 4, 6}, dcr)}, attrs({{"blocksize", int64_t{2}}})),
                {1, 8, 2, 3}, iota(48));
  EXPECT_TRUE(has_error(
      run1("DepthToSpace", {f32({1, 6, 1, 1}, iota(6))}, attrs({{"blocksize", int64_t{2}}}))
          .status(),
      StatusCode::kInvalidArgument, {"not a multiple of blocksize^2 = 4"}));
  EXPECT_TRUE(has_error(
      run1("SpaceToDepth", {f32({1, 1, 3, 2}, iota(6))}, attrs({{"blocksize", int64_t{2}}}))
          .status(),
      StatusCode::kInvalidArgument, {"dim 2", "not a multiple of blocksize 2"}));
  EXPECT_TRUE(has_error(
      run1("DepthToSpace", {f32({1, 4, 1, 1}, iota(4))}, attrs({{"blocksize", int64_t{0}}}))
          .status(),
      StatusCode::kInvalidArgument, {"'blocksize' = 0"}));
  Inferred r =
      infer("DepthToSpace", {sym(DType::kF32, {N, 8, 2, 3})}, attrs({{"blocksize", int64_t{2}}}));
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(shape_to_string(r.outputs[0].shape), "[N,2,4,6]");
}

TEST(Trilu, UpperLowerAndRuntimeK) {
  // x = 1..12 as [3, 4].
  std::vector<double> v;
  for (int i = 1; i <= 12; ++i) v.push_back(i);
  Tensor x = f32({3, 4}, v);
  expect_tensor(run1("Trilu", {x}), {3, 4}, {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
  expect_tensor(run1("Trilu", {x, i64({}, {1})}), {3, 4}, {0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12});
  expect_tensor(run1("Trilu", {x, runtime(i64({}, {-1}))}, attrs({{"upper", int64_t{0}}})), {3, 4},
                {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0});
  expect_tensor(run1("Trilu", {x, i64({}, {-9e18})}, attrs({{"upper", int64_t{0}}})), {3, 4},
                std::vector<double>(12, 0.0));
  EXPECT_TRUE(has_error(run1("Trilu", {f32({3}, {1, 2, 3})}).status(), StatusCode::kInvalidArgument,
                        {"rank >= 2"}));
}

}  // namespace
}  // namespace kiln::kernels
