#include <functional>
#include <ostream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/module/module.h"
#include "tests/support/module/module_test_util.h"

namespace kiln::module {
namespace {

using test_util::sample_contents;
using ::testing::HasSubstr;

struct BadCase {
  const char* name;
  std::function<void(ModuleContents&)> damage;
  std::vector<const char*> fragments;
};

void PrintTo(const BadCase& bad_case, std::ostream* os) { *os << bad_case.name; }

class VerifyContentsTest : public ::testing::TestWithParam<BadCase> {};

TEST(VerifyContents, SampleIsValid) {
  Status s = verify_contents(sample_contents());
  EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST(VerifyContents, DataSymbolsMayShapeValuesFromTheirDispatchOn) {
  ModuleContents m = sample_contents();
  m.dispatches[1].data_symbols = {"count"};
  m.values[5].shape[0] = DimExpr::symbol("count");  // z, produced by dispatch 1
  m.values[8].shape[0] = DimExpr::symbol("count");  // odd, produced by dispatch 2
  Status s = verify_contents(m);
  EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST_P(VerifyContentsTest, RefusesWithItemNamed) {
  ModuleContents m = sample_contents();
  GetParam().damage(m);
  Status s = verify_contents(m);
  ASSERT_FALSE(s.ok()) << "accepted";
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  for (const char* fragment : GetParam().fragments) EXPECT_THAT(s.message(), HasSubstr(fragment));
}

std::vector<BadCase> bad_cases() {
  return {
      {"EmptySymbol", [](ModuleContents& m) { m.symbols.push_back(""); }, {"symbol 2"}},
      {"DuplicateSymbol",
       [](ModuleContents& m) { m.symbols.push_back("N"); },
       {"symbol 2 'N'", "twice"}},
      {"DataSymbolAlsoBoundByAnInput",
       [](ModuleContents& m) { m.dispatches[1].data_symbols = {"N"}; },
       {"dispatch 1 'd1_reshape'", "data symbol 'N'", "twice"}},
      {"DataSymbolUsedBeforeItsDispatch",
       [](ModuleContents& m) {
         m.dispatches[2].data_symbols = {"count"};
         m.values[3].shape[1] = DimExpr::symbol("count");
       },
       {"value 3 'y'", "data symbol 'count' before dispatch 2"}},
      {"DataSymbolOnAGraphInput",
       [](ModuleContents& m) {
         m.dispatches[0].data_symbols = {"count"};
         m.values[6].shape[0] = DimExpr::symbol("count");
       },
       {"value 6 'mask'", "data symbol 'count'"}},
      {"UndeclaredSymbol",
       [](ModuleContents& m) { m.symbols = {"N"}; },
       {"value 6 'mask'", "symbol 'seq len'"}},
      {"InvalidDtype",
       [](ModuleContents& m) { m.values[3].dtype = static_cast<DType>(77); },
       {"value 3 'y'", "dtype code 77"}},
      {"InvalidKind",
       [](ModuleContents& m) { m.values[3].kind = static_cast<ValueKind>(9); },
       {"value 3 'y'", "kind code 9"}},
      {"NegativeDim",
       [](ModuleContents& m) { m.values[3].shape[1] = -1; },
       {"value 3 'y'", "dim 1 is -1"}},
      {"DimTooLong",
       [](ModuleContents& m) {
         std::string name(2000, 'S');
         m.symbols.push_back(name);
         m.values[3].shape[1] = DimExpr::symbol(name);
       },
       {"value 3 'y'", "over the limit"}},
      {"ConstantDtypeMismatch",
       [](ModuleContents& m) { m.values[4].dtype = DType::kI32; },
       {"value 4 'shape'", "constant data is i64"}},
      {"ConstantShapeMismatch",
       [](ModuleContents& m) { m.values[1].shape = {6}; },
       {"value 1 'conv0_w'", "dims"}},
      {"ConstantSymbolicDims",
       [](ModuleContents& m) { m.values[2].shape = {DimExpr::symbol("N")}; },
       {"value 2 'conv0_b'", "static dims"}},
      {"ConstantWithoutData",
       [](ModuleContents& m) { m.values[2].constant = Tensor(); },
       {"value 2 'conv0_b'"}},
      {"IntermediateWithData",
       [](ModuleContents& m) { m.values[3].constant = test_util::make_f32({1}, 0); },
       {"value 3 'y'", "carries constant data"}},
      {"KnownValuesOnAConstant",
       [](ModuleContents& m) { m.values[1].known_values = {DimExpr(1)}; },
       {"value 1 'conv0_w'", "known element values are only allowed"}},
      {"KnownValuesOnAnActivation",
       [](ModuleContents& m) { m.values[3].known_values = {DimExpr(1)}; },
       {"value 3 'y'", "1 known element values for"}},
      {"KnownValuesDimsOverflow",  // (2^62 + 1) * 4 wraps to 4
       [](ModuleContents& m) {
         m.values.push_back({"k",
                             DType::kI64,
                             {DimExpr((int64_t{1} << 62) + 1), DimExpr(4)},
                             ValueKind::kIntermediate,
                             {}});
         m.values.back().known_values = {DimExpr(1), DimExpr(2), DimExpr(3), DimExpr(4)};
       },
       {"value 10 'k'", "overflow"}},
      {"KnownValuesCountMismatch",
       [](ModuleContents& m) {
         m.values.push_back({"k", DType::kI64, {2}, ValueKind::kIntermediate, {}});
         m.values.back().known_values = {DimExpr(1)};
       },
       {"value 10 'k'", "1 known element values for 2 elements"}},
      {"KnownValueUndeclaredSymbol",
       [](ModuleContents& m) {
         m.values.push_back({"k", DType::kI64, {1}, ValueKind::kIntermediate, {}});
         m.values.back().known_values = {DimExpr::symbol("Q")};
       },
       {"value 10 'k'", "uses symbol 'Q'"}},
      {"GraphInputOutOfRange",
       [](ModuleContents& m) { m.inputs.push_back(10); },
       {"graph input 2 is value 10, out of range (the module has 10 values)"}},
      {"GraphInputNotAnInput",
       [](ModuleContents& m) { m.inputs.push_back(1); },
       {"graph input 2", "value 1 'conv0_w'", "not an input value"}},
      {"GraphInputTwice",
       [](ModuleContents& m) { m.inputs.push_back(0); },
       {"graph input 2", "listed twice"}},
      {"GraphInputNameClash",
       [](ModuleContents& m) { m.values[6].name = "x"; },
       {"graph input 1", "same name"}},
      {"InputNotListed",
       [](ModuleContents& m) { m.inputs = {0}; },
       {"value 6 'mask'", "not listed as a graph input"}},
      {"GraphOutputOutOfRange",
       [](ModuleContents& m) { m.outputs.push_back(-1); },
       {"graph output 2 is value -1"}},
      {"DispatchInputOutOfRange",
       [](ModuleContents& m) { m.dispatches[2].inputs[4] = 10; },
       {"dispatch 2 'd2_custom' (kiln.Custom)", "input 4 is value 10"}},
      {"DispatchInputNegative",
       [](ModuleContents& m) { m.dispatches[0].inputs[0] = -2; },
       {"dispatch 0 'd0_conv0' (Conv)", "input 0 is value -2"}},
      {"DispatchOutputAbsent",
       [](ModuleContents& m) { m.dispatches[0].outputs[0] = kAbsentValue; },
       {"dispatch 0 'd0_conv0' (Conv)", "output 0 is value -1"}},
      {"ReadBeforeProduced",
       [](ModuleContents& m) { std::swap(m.dispatches[0], m.dispatches[1]); },
       {"dispatch 0 'd1_reshape' (Reshape)", "value 3 'y'", "before any dispatch produces it"}},
      {"ReadsOwnOutput",
       [](ModuleContents& m) { m.dispatches[1].inputs.push_back(5); },
       {"dispatch 1 'd1_reshape'", "value 5 'z'", "before"}},
      {"ProducedTwice",
       [](ModuleContents& m) { m.dispatches[2].outputs.push_back(3); },
       {"dispatch 2 'd2_custom'", "value 3 'y'", "already produced by dispatch 0"}},
      {"WritesAConstant",
       [](ModuleContents& m) { m.dispatches[2].outputs.push_back(1); },
       {"dispatch 2 'd2_custom'", "value 1 'conv0_w'", "a constant"}},
      {"WritesAnInput",
       [](ModuleContents& m) { m.dispatches[2].outputs.push_back(0); },
       {"dispatch 2 'd2_custom'", "value 0 'x'", "a graph input"}},
      {"NeverProduced",
       [](ModuleContents& m) { m.dispatches.pop_back(); },
       {"value 8 'odd'", "no dispatch produces"}},
      {"DuplicateDispatchName",
       [](ModuleContents& m) { m.dispatches[2].name = "d0_conv0"; },
       {"dispatch 2 'd0_conv0'", "already used by dispatch 0"}},
      {"EmptyOpType",
       [](ModuleContents& m) { m.dispatches[1].op_type = ""; },
       {"dispatch 1 'd1_reshape'", "empty op type"}},
      {"AssumptionOverAnUndeclaredSymbol",
       [](ModuleContents& m) {
         m.assumptions.push_back(Assumption{Assumption::Kind::kEqual, DimExpr::symbol("N"),
                                            DimExpr::symbol("T"), "node 'add' (Add)"});
       },
       {"assumption 0 'N == T'", "undeclared symbol 'T'"}},
  };
}

INSTANTIATE_TEST_SUITE_P(BadContents, VerifyContentsTest, ::testing::ValuesIn(bad_cases()),
                         [](const ::testing::TestParamInfo<BadCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace kiln::module
