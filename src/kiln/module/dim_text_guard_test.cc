#include "kiln/module/dim_text_guard.h"

#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/shape/dim_expr.h"

namespace kiln::module {
namespace {

void expect_canonical_round_trip(const DimExpr& dim) {
  std::string text = dim.to_string();
  SCOPED_TRACE(text);
  Status canonical = check_canonical_dim_text(text);
  EXPECT_TRUE(canonical.ok()) << canonical.to_string();
  auto parsed = parse_dim_expr(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(*parsed, dim);
}

TEST(DimTextGuard, AcceptsWhatDimExprPrints) {
  DimExpr n = DimExpr::symbol("N");
  DimExpr h = DimExpr::symbol("H");
  DimExpr w = DimExpr::symbol("image width");
  DimExpr spatial = h;
  for (int i = 0; i < 12; ++i) spatial = (spatial + 2 - 3).floor_div(2) + 1;
  for (const DimExpr& dim :
       {DimExpr(0),
        DimExpr(7),
        DimExpr(-7),
        n,
        2 * n + 3,
        3 - n,
        n * h * w * 64,
        (n + 1) * (h + 1) * (w - 1),
        n * n * h - 5 * n,
        spatial,
        spatial * w.floor_div(2) * 512,
        (2 * n + 5).floor_div(4),
        (n * h + 7).floor_div(3) * (w + 1).ceil_div(2),
        DimExpr::symbol("floor") + DimExpr::symbol("a\"b\\c") + DimExpr::symbol(""),
        (DimExpr::symbol("x y") + 1).floor_div(2).floor_div(3),
        DimExpr::min(DimExpr(4), n),
        DimExpr::max(n - 1, DimExpr(0)) * h + 2,
        (DimExpr::max(n - 3, h) + 1).floor_div(2),
        DimExpr::min(DimExpr::max(n - 1, DimExpr(0)), h + 2),
        DimExpr::symbol("min")}) {
    expect_canonical_round_trip(dim);
  }
}

DimExpr random_dim(std::mt19937& random, int depth) {
  static const std::vector<DimExpr> leaves = {DimExpr::symbol("N"),
                                              DimExpr::symbol("M"),
                                              DimExpr::symbol("seq len"),
                                              DimExpr::symbol("_k9"),
                                              DimExpr(0),
                                              DimExpr(1),
                                              DimExpr(3),
                                              DimExpr(-2),
                                              DimExpr(64)};
  if (depth > 3 || random() % 4 == 0) return leaves[random() % leaves.size()];
  DimExpr a = random_dim(random, depth + 1);
  switch (random() % 5) {
    case 0: return a + random_dim(random, depth + 1);
    case 1: return a - random_dim(random, depth + 1);
    case 2: return a * random_dim(random, depth + 1);
    case 3: return a.floor_div(1 + static_cast<int64_t>(random() % 6));
    default: return a.ceil_div(1 + static_cast<int64_t>(random() % 6));
  }
}

TEST(DimTextGuard, AcceptsRandomDimExprs) {
  std::mt19937 random(3);
  for (int i = 0; i < 3000; ++i) expect_canonical_round_trip(random_dim(random, 0));
}

TEST(DimTextGuard, RefusesOtherForms) {
  for (const char* text : {"",
                           " ",
                           "N ",
                           " N",
                           "N+1",
                           "N  + 1",
                           "1 + N",
                           "b + a",
                           "a + a",
                           "1*a",
                           "b*a",
                           "007",
                           "-0",
                           "--N",
                           "N - -1",
                           "-(N)",
                           "(N)",
                           "(a + b)*(c + d)",
                           "\"a\"",
                           "\"x\\y\"",
                           "floor",
                           "floor(N/1)",
                           "floor((N)/2)",
                           "floor((3)/2)",
                           "floor((2*N + 1)/2)",
                           "floor((N - 1)/2)",
                           "floor((1 + N)/2)",
                           "floor((N + N)/4)",
                           "floor(N/2",
                           "floor(N/02)",
                           "N*",
                           "99999999999999999999",
                           "N $",
                           "min(N, N)",
                           "max(3, 5)",
                           "min(b, a)",
                           "min(a,b)",
                           "min(a, b",
                           "max(a)",
                           "floor(min(a, b)/2)"}) {
    SCOPED_TRACE(text);
    Status s = check_canonical_dim_text(text);
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.message(), ::testing::HasSubstr("canonical dim form"));
  }
}

TEST(DimTextGuard, RefusesDeepMinMaxNesting) {
  std::string nested = "N";
  for (int i = 0; i < 40; ++i) nested = "max(0, " + nested + ")";
  EXPECT_FALSE(check_canonical_dim_text(nested).ok());
}

TEST(DimTextGuard, RefusesExponentialExpansionsCheaply) {
  std::string product;
  for (int i = 0; i < 60; ++i) product += (i ? "*" : "") + std::string("(a + b + c + d)");
  EXPECT_FALSE(check_canonical_dim_text(product).ok());
  // Floors whose numerators would split into sums when parsed.
  std::string floors;
  for (int i = 0; i < 30; ++i) floors += (i ? "*" : "") + std::string("floor((2*a + 2*b + c)/2)");
  EXPECT_FALSE(check_canonical_dim_text(floors).ok());
}

std::string random_text(std::mt19937& random, int depth) {
  int choice = static_cast<int>(depth > 5 ? random() % 3 : random() % 10);
  switch (choice) {
    case 0: return std::to_string(random() % 8);
    case 1: return std::string(1, "abN"[random() % 3]);
    case 2: return "\"q x\"";
    case 3: return "(" + random_text(random, depth + 1) + ")";
    case 4: return random_text(random, depth + 1) + " + " + random_text(random, depth + 1);
    case 5: return random_text(random, depth + 1) + " - " + random_text(random, depth + 1);
    case 6: return random_text(random, depth + 1) + "*" + random_text(random, depth + 1);
    case 7:
      return "floor((" + random_text(random, depth + 1) + ")/" + std::to_string(random() % 5) + ")";
    case 8:
      return "floor(" + random_text(random, depth + 1) + "/" + std::to_string(random() % 5) + ")";
    default: return "-" + random_text(random, depth + 1);
  }
}

// Whatever the guard accepts is exactly what DimExpr prints: parsing it returns the same text.
TEST(DimTextGuard, AcceptedTextIsExactlyCanonical) {
  std::mt19937 random(11);
  int accepted = 0;
  for (int i = 0; i < 50000; ++i) {
    std::string text = random_text(random, 0);
    if (!check_canonical_dim_text(text).ok()) continue;
    ++accepted;
    auto parsed = parse_dim_expr(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status().to_string();
    EXPECT_EQ(parsed->to_string(), text);
  }
  EXPECT_GT(accepted, 1000);
}

}  // namespace
}  // namespace kiln::module
