#include "kiln/shape/dim_expr.h"

#include <gtest/gtest.h>

#include <limits>

#include "kiln/shape/shape.h"

namespace kiln {
namespace {

DimExpr N = DimExpr::symbol("N");

TEST(DimExpr, ConstantsFold) {
  DimExpr e = DimExpr(3) * DimExpr(4) + DimExpr(2);
  EXPECT_EQ(e.constant_value(), 14);
  EXPECT_EQ(e.to_string(), "14");
}

TEST(DimExpr, PolynomialNormalForm) {
  EXPECT_EQ((N + N).to_string(), "2*N");
  EXPECT_EQ((N * 3 + 2 - N).to_string(), "2*N + 2");
  EXPECT_EQ(N - N, DimExpr(0));
  EXPECT_EQ((N + 1) * (N + 1), N * N + N * 2 + 1);
  EXPECT_TRUE(N.is_symbol());
  EXPECT_FALSE((N * 2).is_symbol());
}

TEST(DimExpr, FloorDivPullsOutMultiples) {
  // conv output: floor((H + 2*pad - kernel)/stride) + 1
  DimExpr h = DimExpr::symbol("H");
  DimExpr out = (h + 6 - 7).floor_div(2) + 1;
  EXPECT_EQ(out.evaluate({{"H", 224}}).value(), 112);
  EXPECT_EQ(out.evaluate({{"H", 225}}).value(), 113);
  EXPECT_EQ((N * 4 + 6).floor_div(2).to_string(), "2*N + 3");
  EXPECT_EQ((N * 4 + 7).floor_div(2).to_string(), "2*N + 3");
  EXPECT_EQ(DimExpr(-7).floor_div(2).constant_value(), -4);
  EXPECT_EQ((N + 1).ceil_div(2).evaluate({{"N", 4}}).value(), 3);
}

TEST(DimExpr, ExactDivForReshapeMinusOne) {
  DimExpr total = N * 2048;
  auto q = total.exact_div(N);
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(*q, DimExpr(2048));
  EXPECT_EQ(total.exact_div(DimExpr(1024)).value(), N * 2);
  EXPECT_FALSE(total.exact_div(DimExpr(3)).has_value());
  EXPECT_FALSE((N + 1).exact_div(N).has_value());
}

TEST(DimExpr, EvaluateRequiresBindings) {
  auto missing = (N * 2).evaluate({});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'N'"), std::string::npos);
  EXPECT_EQ((N * 2).evaluate({{"N", 8}}).value(), 16);
}

TEST(DimExpr, SubstituteBindsSymbols) {
  DimExpr e = (N * 3 + 1).floor_div(2);
  EXPECT_EQ(e.substitute({{"N", DimExpr(3)}}), DimExpr(5));
  EXPECT_EQ(N.substitute({{"N", DimExpr::symbol("B") * 2}}).to_string(), "2*B");
}

TEST(DimExpr, ParseRoundTrip) {
  for (const char* text : {"N", "2*N + 3", "floor((N + 1)/2)", "N*N - 4", "\"batch size\" + 1", "7",
                           "-3", "3*floor((H + 1)/2)*W + 1"}) {
    auto parsed = parse_dim_expr(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status().to_string();
    auto again = parse_dim_expr(parsed->to_string());
    ASSERT_TRUE(again.ok()) << parsed->to_string();
    EXPECT_EQ(*again, *parsed) << text;
  }
}

TEST(DimExpr, ParseRejectsGarbage) {
  for (const char* text :
       {"", "N +", "floor(N/0)", "floor(N/-2)", "(N", "3 $ 4", "99999999999999999999", "\"open"}) {
    EXPECT_FALSE(parse_dim_expr(text).ok()) << text;
  }
  std::string deep(1000, '(');
  EXPECT_FALSE(parse_dim_expr(deep).ok());
  // A long run of unary minus once recursed without a limit and overflowed the stack.
  EXPECT_FALSE(parse_dim_expr(std::string(1000000, '-') + "N").ok());
}

DimExpr S = DimExpr::symbol("S");
DimExpr T = DimExpr::symbol("T");

TEST(DimExpr, ExactDivByPolynomials) {
  // A ViT class token followed by a head split: 4*N*(S+1) elements reshaped to [2, -1].
  DimExpr total = N * S * 4 + N * 4;
  EXPECT_EQ(total.exact_div(N * S * 2 + N * 2).value(), DimExpr(2));
  EXPECT_EQ(total.exact_div(S + 1).value(), N * 4);
  EXPECT_EQ(((S + 1) * (S + T)).exact_div(S + T).value(), S + 1);
  EXPECT_EQ((S * S - 1).exact_div(S - 1).value(), S + 1);
  EXPECT_FALSE((S * S + 1).exact_div(S + 1).has_value());
  EXPECT_FALSE((N * 3 + 1).exact_div(N * 2).has_value());
  EXPECT_FALSE(total.exact_div(DimExpr(0)).has_value());
  EXPECT_EQ(DimExpr(0).exact_div(S + 1).value(), DimExpr(0));
  // A wrapped coefficient of INT64_MIN over -1 has no int64 quotient.
  const DimExpr lowest(std::numeric_limits<int64_t>::min());
  EXPECT_FALSE((S * lowest).exact_div(DimExpr(0) - S).has_value());
}

TEST(DimExpr, ProvablyNonnegative) {
  EXPECT_TRUE(DimExpr(0).provably_nonnegative());
  EXPECT_FALSE(DimExpr(-1).provably_nonnegative());
  EXPECT_TRUE((N * 8).provably_nonnegative());
  EXPECT_TRUE((N * S + 3).provably_nonnegative());
  EXPECT_FALSE((S - 1).provably_nonnegative());
  // floor(S/2) <= S/2: S - floor(S/2) >= 0, but S - 3*floor(S/2) is not.
  EXPECT_TRUE((S - S.floor_div(2)).provably_nonnegative());
  EXPECT_FALSE((S - S.floor_div(2) * 3).provably_nonnegative());
  EXPECT_TRUE((S - DimExpr::min(S, T)).provably_nonnegative());
  EXPECT_TRUE(DimExpr::max(S - 1, DimExpr(0)).provably_nonnegative());
}

TEST(DimExpr, MinMaxSimplifyWhenOrdered) {
  EXPECT_EQ(DimExpr::min(DimExpr(4), DimExpr(7)), DimExpr(4));
  EXPECT_EQ(DimExpr::max(S, S), S);
  EXPECT_EQ(DimExpr::max(S + 1, DimExpr(0)), S + 1);
  EXPECT_EQ(DimExpr::min(S, S + 2), S);
  EXPECT_EQ(DimExpr::min(S.floor_div(2), S), S.floor_div(2));
  // Unordered operands stay an atom, the same whichever comes first.
  DimExpr m = DimExpr::min(DimExpr(4), S);
  EXPECT_EQ(m, DimExpr::min(S, DimExpr(4)));
  EXPECT_EQ(m.to_string(), "min(4, S)");
  EXPECT_EQ(m.evaluate({{"S", 2}}).value(), 2);
  EXPECT_EQ(m.evaluate({{"S", 9}}).value(), 4);
  DimExpr len = DimExpr::max(S - 1, DimExpr(0));
  EXPECT_EQ(len.to_string(), "max(0, S - 1)");
  EXPECT_EQ(len.evaluate({{"S", 0}}).value(), 0);
  EXPECT_EQ(len.evaluate({{"S", 5}}).value(), 4);
  EXPECT_EQ(m.symbols(), std::vector<std::string>{"S"});
  // Substitution re-simplifies.
  EXPECT_EQ(m.substitute({{"S", DimExpr(3)}}), DimExpr(3));
  EXPECT_EQ((m * 2 + 1).substitute({{"S", T + 5}}), DimExpr(9));
}

TEST(DimExpr, MinMaxTextRoundTrips) {
  for (const DimExpr& e : {DimExpr::min(DimExpr(4), S), DimExpr::max(S - 1, DimExpr(0)) * N,
                           (DimExpr::max(S - 3, T) + 1).floor_div(2),
                           DimExpr::min(DimExpr::max(S - 1, DimExpr(0)), T + 2)}) {
    auto parsed = parse_dim_expr(e.to_string());
    ASSERT_TRUE(parsed.ok()) << e.to_string() << ": " << parsed.status().to_string();
    EXPECT_EQ(*parsed, e) << e.to_string();
  }
  auto shape = parse_shape("[N,min(4, S),max(0, S - 1)]");
  ASSERT_TRUE(shape.ok()) << shape.status().to_string();
  EXPECT_EQ(shape->size(), 3u);
  EXPECT_EQ(shape_to_string(*shape), "[N,min(4, S),max(0, S - 1)]");
  // A symbol named like the functions is quoted.
  EXPECT_EQ(DimExpr::symbol("min").to_string(), "\"min\"");
}

TEST(Shape, ParseAndEvaluate) {
  auto shape = parse_shape("[N,3,floor((N + 1)/2),224]");
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape_to_string(*shape), "[N,3,floor((N + 1)/2),224]");
  auto concrete = evaluate_shape(*shape, {{"N", 5}});
  ASSERT_TRUE(concrete.ok());
  EXPECT_EQ(*concrete, (ConcreteShape{5, 3, 3, 224}));
  EXPECT_FALSE(element_count({int64_t{1} << 62, 8}).ok());
  // A quoted symbol may hold an escaped quote followed by a comma.
  auto quoted = parse_shape(R"([N,"a\",b",3])");
  ASSERT_TRUE(quoted.ok()) << quoted.status().to_string();
  EXPECT_EQ(quoted->size(), 3u);
  EXPECT_EQ(symbolic_element_count(*shape).evaluate({{"N", 1}}).value(), 672);
}

}  // namespace
}  // namespace kiln
