// The host semantics of the sequence and optional ops (base/sequence_ops.h), op by op, with bad
// inputs. Expected values are worked out by hand from the ONNX reference implementation
// (onnx/reference/ops/op_sequence_*.py, op_split_to_sequence.py, op_concat_from_sequence.py,
// op_optional*.py).
#include "kiln/base/sequence_ops.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::sequence_ops {
namespace {

using ::testing::HasSubstr;

Tensor f32(ConcreteShape dims, std::vector<float> v) {
  Tensor t = Tensor::create(DType::kF32, std::move(dims)).value();
  std::copy(v.begin(), v.end(), t.mutable_values<float>().begin());
  return t;
}
template <typename T>
Tensor scalar(DType dtype, T v) {
  Tensor t = Tensor::create(dtype, {}).value();
  t.mutable_values<T>()[0] = v;
  return t;
}
Tensor i64(int64_t v) { return scalar<int64_t>(DType::kI64, v); }
Tensor i32(int32_t v) { return scalar<int32_t>(DType::kI32, v); }
std::vector<float> floats(const Tensor& t) {
  auto v = t.values<float>();
  return {v.begin(), v.end()};
}
HostValue seq(std::vector<Tensor> elements) {
  return HostValue::sequence(DType::kF32, std::move(elements)).value();
}

StatusOr<std::vector<HostValue>> run_op(std::string_view op, std::vector<HostValue> inputs,
                                        const Attributes& attributes = {}) {
  OpArgs args;
  args.where = fmt::format("node 'n' ({})", op);
  args.attributes = &attributes;
  return run(op, inputs, args);
}

// The floats of every tensor of a sequence, one list each.
std::vector<std::vector<float>> all_floats(const HostValue& value) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : value.elements()) out.push_back(floats(t));
  return out;
}

TEST(SequenceOps, ConstructAtInsertEraseLength) {
  const Tensor a = f32({2}, {1, 2}), b = f32({1}, {3}), c = f32({3}, {4, 5, 6});
  auto made = run_op("SequenceConstruct", {a, b});
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  const HostValue s = (*made)[0];
  EXPECT_EQ(s.form(), ValueForm::kSequence);
  EXPECT_EQ(all_floats(s), (std::vector<std::vector<float>>{{1, 2}, {3}}));
  // SequenceAt: negative positions count from the back; i32 positions are taken.
  EXPECT_EQ(floats((*run_op("SequenceAt", {s, i64(-1)}))[0].tensor()), std::vector<float>{3});
  EXPECT_EQ(floats((*run_op("SequenceAt", {s, i32(0)}))[0].tensor()), (std::vector<float>{1, 2}));
  // SequenceInsert: at the back without a position, before `position` with one ([-n, n]).
  EXPECT_EQ(all_floats((*run_op("SequenceInsert", {s, c}))[0]),
            (std::vector<std::vector<float>>{{1, 2}, {3}, {4, 5, 6}}));
  EXPECT_EQ(all_floats((*run_op("SequenceInsert", {s, c, i64(-2)}))[0]),
            (std::vector<std::vector<float>>{{4, 5, 6}, {1, 2}, {3}}));
  EXPECT_EQ(all_floats((*run_op("SequenceInsert", {s, c, i64(2)}))[0]).size(), 3u);
  // SequenceErase: the last without a position.
  EXPECT_EQ(all_floats((*run_op("SequenceErase", {s}))[0]),
            (std::vector<std::vector<float>>{{1, 2}}));
  EXPECT_EQ(all_floats((*run_op("SequenceErase", {s, i64(-2)}))[0]),
            (std::vector<std::vector<float>>{{3}}));
  auto length = run_op("SequenceLength", {s});
  ASSERT_TRUE(length.ok());
  EXPECT_EQ((*length)[0].tensor().dtype(), DType::kI64);
  EXPECT_EQ((*length)[0].tensor().values<int64_t>()[0], 2);
  // The input sequence is unchanged (values, not references).
  EXPECT_EQ(s.elements().size(), 2u);
  Attributes empty_i32;
  empty_i32.set(kDtypeAttribute, std::string("i32"));
  auto empty = run_op("SequenceEmpty", {}, empty_i32);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)[0].dtype(), DType::kI32);
  EXPECT_TRUE((*empty)[0].elements().empty());
}

TEST(SequenceOps, BadPositionsAndDtypesAreErrorsNamingTheNode) {
  const HostValue s = seq({f32({1}, {1}), f32({1}, {2})});
  EXPECT_THAT(run_op("SequenceAt", {s, i64(2)}).status().message(),
              HasSubstr("node 'n' (SequenceAt): position 2 is out of range [-2, 1] for a "
                        "sequence of 2"));
  EXPECT_THAT(run_op("SequenceAt", {s, i64(-3)}).status().message(), HasSubstr("out of range"));
  EXPECT_THAT(run_op("SequenceAt", {s, f32({1}, {0})}).status().message(),
              HasSubstr("the position must be one i32 or i64 element, got f32 [1]"));
  EXPECT_THAT(
      run_op("SequenceInsert", {s, i64(1)}).status().message(),
      HasSubstr("node 'n' (SequenceInsert): the tensor is i64, but the sequence holds f32"));
  EXPECT_THAT(run_op("SequenceInsert", {s, f32({1}, {0}), i64(3)}).status().message(),
              HasSubstr("position 3 is out of range [-2, 2]"));
  EXPECT_THAT(run_op("SequenceErase", {seq({})}).status().message(),
              HasSubstr("the sequence is empty"));
  EXPECT_THAT(run_op("SequenceConstruct", {f32({1}, {1}), i64(1)}).status().message(),
              HasSubstr("input 1 is i64, but input 0 is f32"));
  EXPECT_THAT(run_op("SequenceAt", {f32({1}, {1}), i64(0)}).status().message(),
              HasSubstr("input 0 must be a sequence, got f32 [1]"));
}

TEST(SequenceOps, SplitToSequence) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Attributes axis1;
  axis1.set("axis", int64_t{1});
  // No split: slices of 1, kept as [2,1] (keepdims 1).
  auto parts = run_op("SplitToSequence", {x}, axis1);
  ASSERT_TRUE(parts.ok()) << parts.status().to_string();
  ASSERT_EQ((*parts)[0].elements().size(), 3u);
  EXPECT_EQ((*parts)[0].elements()[1].shape(), (ConcreteShape{2, 1}));
  EXPECT_EQ(all_floats((*parts)[0]), (std::vector<std::vector<float>>{{1, 4}, {2, 5}, {3, 6}}));
  // keepdims 0 drops the axis.
  Attributes squeeze = axis1;
  squeeze.set("keepdims", int64_t{0});
  EXPECT_EQ((*run_op("SplitToSequence", {x}, squeeze))[0].elements()[0].shape(),
            (ConcreteShape{2}));
  // A scalar split: chunks of 2, the last shorter.
  auto chunks = run_op("SplitToSequence", {x, i64(2)}, axis1);
  ASSERT_TRUE(chunks.ok());
  EXPECT_EQ(all_floats((*chunks)[0]), (std::vector<std::vector<float>>{{1, 2, 4, 5}, {3, 6}}));
  // A 1-D split: the lengths, which must sum to the axis' length.
  Tensor lengths = Tensor::create(DType::kI64, {2}).value();
  lengths.mutable_values<int64_t>()[0] = 1;
  lengths.mutable_values<int64_t>()[1] = 2;
  auto listed = run_op("SplitToSequence", {x, lengths}, axis1);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(all_floats((*listed)[0]), (std::vector<std::vector<float>>{{1, 4}, {2, 3, 5, 6}}));
  lengths.mutable_values<int64_t>()[1] = 1;
  EXPECT_THAT(run_op("SplitToSequence", {x, lengths}, axis1).status().message(),
              HasSubstr("split [1,1] sums to 2, but axis 1 has length 3"));
  EXPECT_THAT(run_op("SplitToSequence", {x, i64(0)}, axis1).status().message(),
              HasSubstr("split 0 must be positive"));
}

TEST(SequenceOps, ConcatFromSequence) {
  const HostValue s = seq({f32({2, 1}, {1, 2}), f32({2, 2}, {3, 4, 5, 6})});
  Attributes axis1;
  axis1.set("axis", int64_t{1});
  auto joined = run_op("ConcatFromSequence", {s}, axis1);
  ASSERT_TRUE(joined.ok()) << joined.status().to_string();
  EXPECT_EQ((*joined)[0].tensor().shape(), (ConcreteShape{2, 3}));
  EXPECT_EQ(floats((*joined)[0].tensor()), (std::vector<float>{1, 3, 4, 2, 5, 6}));
  // new_axis 1 stacks (here along a new last axis, axis -1).
  Attributes stack;
  stack.set("axis", int64_t{-1});
  stack.set("new_axis", int64_t{1});
  auto stacked = run_op("ConcatFromSequence", {seq({f32({2}, {1, 2}), f32({2}, {3, 4})})}, stack);
  ASSERT_TRUE(stacked.ok()) << stacked.status().to_string();
  EXPECT_EQ((*stacked)[0].tensor().shape(), (ConcreteShape{2, 2}));
  EXPECT_EQ(floats((*stacked)[0].tensor()), (std::vector<float>{1, 3, 2, 4}));
  EXPECT_THAT(run_op("ConcatFromSequence", {seq({})}, axis1).status().message(),
              HasSubstr("node 'n' (ConcatFromSequence): the sequence is empty"));
  EXPECT_THAT(run_op("ConcatFromSequence", {s}, stack).status().message(),
              HasSubstr("element 1 has dims [2,2], but element 0 has [2,1]"));
  EXPECT_THAT(run_op("ConcatFromSequence", {s}).status().message(),
              HasSubstr("attribute 'axis' is required"));
}

TEST(SequenceOps, Optionals) {
  const Tensor x = f32({2}, {1, 2});
  auto wrapped = run_op("Optional", {x});
  ASSERT_TRUE(wrapped.ok());
  EXPECT_EQ((*wrapped)[0].form(), ValueForm::kOptionalTensor);
  auto has = run_op("OptionalHasElement", {(*wrapped)[0]});
  EXPECT_EQ((*has)[0].tensor().values<uint8_t>()[0], 1);
  EXPECT_EQ(floats((*run_op("OptionalGetElement", {(*wrapped)[0]}))[0].tensor()),
            (std::vector<float>{1, 2}));
  Attributes none_type;
  none_type.set(kDtypeAttribute, std::string("f32"));
  none_type.set(kFormAttribute, static_cast<int64_t>(ValueForm::kOptionalSequence));
  auto none = run_op("Optional", {}, none_type);
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_EQ((*none)[0].form(), ValueForm::kOptionalSequence);
  EXPECT_FALSE((*none)[0].has_element());
  EXPECT_EQ((*run_op("OptionalHasElement", {(*none)[0]}))[0].tensor().values<uint8_t>()[0], 0);
  // An absent input has no element either.
  EXPECT_EQ((*run_op("OptionalHasElement", {HostValue()}))[0].tensor().values<uint8_t>()[0], 0);
  EXPECT_THAT(run_op("OptionalGetElement", {(*none)[0]}).status().message(),
              HasSubstr("node 'n' (OptionalGetElement): the optional is empty"));
  // An optional of a sequence gives the sequence; Identity passes any form.
  const HostValue s = seq({x});
  auto of_seq = run_op("Optional", {s});
  EXPECT_EQ((*of_seq)[0].form(), ValueForm::kOptionalSequence);
  EXPECT_EQ((*run_op("OptionalGetElement", {(*of_seq)[0]}))[0].form(), ValueForm::kSequence);
  EXPECT_EQ((*run_op("Identity", {(*of_seq)[0]}))[0].form(), ValueForm::kOptionalSequence);
  EXPECT_THAT(run_op("Optional", {(*of_seq)[0]}).status().message(),
              HasSubstr("already an optional"));
}

TEST(SequenceOps, SequenceMapRunsTheBodyPerElement) {
  // Body (a, b) -> a + b with `b` a tensor taken whole (ONNX's sequence_map
  // add_1_sequence_1_tensor).
  OpArgs args;
  args.where = "node 'map' (SequenceMap)";
  Attributes attributes;
  args.attributes = &attributes;
  args.output_dtypes = {DType::kF32};
  args.body = [](std::vector<HostValue> in) -> StatusOr<std::vector<HostValue>> {
    Tensor sum = in[0].tensor().clone();
    for (size_t i = 0; i < sum.values<float>().size(); ++i) {
      sum.mutable_values<float>()[i] += in[1].tensor().values<float>()[i];
    }
    return std::vector<HostValue>{sum};
  };
  const std::vector<HostValue> inputs = {seq({f32({2}, {1, 2}), f32({2}, {3, 4})}),
                                         f32({2}, {10, 20})};
  auto out = run("SequenceMap", inputs, args);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(all_floats((*out)[0]), (std::vector<std::vector<float>>{{11, 22}, {13, 24}}));
  // An empty sequence maps to an empty sequence of the output's dtype.
  const std::vector<HostValue> none = {seq({}), f32({2}, {10, 20})};
  out = run("SequenceMap", none, args);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE((*out)[0].elements().empty());
  // Sequence inputs of different lengths.
  const std::vector<HostValue> uneven = {seq({f32({2}, {1, 2})}), seq({})};
  EXPECT_THAT(run("SequenceMap", uneven, args).status().message(),
              HasSubstr("input 1 holds 0 elements, but input 0 holds 1"));
  // A body output of another dtype.
  args.output_dtypes = {DType::kI64};
  EXPECT_THAT(run("SequenceMap", inputs, args).status().message(),
              HasSubstr("body output 0 is f32 [2] at element 0, expected a i64 tensor"));
}

}  // namespace
}  // namespace kiln::sequence_ops
