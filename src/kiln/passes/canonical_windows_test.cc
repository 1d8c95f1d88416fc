// Window geometry: symbolic output dims checked against brute force, auto_pad resolution, and the
// compiler-facing canonicalization.
#include "kiln/passes/canonical_windows.h"

#include <gtest/gtest.h>

#include "kiln/graph_eval/graph_eval.h"
#include "tests/support/expect.h"
#include "tests/support/graph_eval/op_graph.h"

namespace kiln::passes {
namespace {

using kernels::AutoPad;
using kernels::explicit_pads;  // both overloads: on a geometry, and on a node
using kernels::window_output_dims;
using kernels::WindowGeometry;
using passes::explicit_pads;

using testing::f32;
using testing::has_error;
using testing::OpGraph;
using testing::pattern;
using testing::sym;
using Ints = std::vector<int64_t>;

WindowGeometry geometry(int64_t k, int64_t s, int64_t d, Ints pads, AutoPad auto_pad,
                        bool ceil_mode = false) {
  return WindowGeometry{{k}, {s}, {d}, std::move(pads), auto_pad, ceil_mode};
}

// Number of window positions by enumeration (the definition, independent of the formulas).
int64_t brute_force_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                        bool ceil_mode) {
  int64_t k_eff = d * (k - 1) + 1;
  int64_t count = 0;
  // Floor mode: windows that fit inside the padded input.
  for (int64_t start = -pb; start + k_eff <= in + pe; start += s) ++count;
  if (!ceil_mode) return count;
  // Ceil mode: one more partial window if it starts inside input + begin padding and some
  // padded extent is left uncovered.
  int64_t next = -pb + count * s;
  int64_t covered_end = next - s + k_eff;
  if (covered_end < in + pe && next < in) ++count;
  return count;
}

TEST(WindowGeometry, SymbolicOutputDimsMatchBruteForce) {
  for (int64_t k = 1; k <= 4; ++k) {
    for (int64_t s = 1; s <= 3; ++s) {
      for (int64_t d = 1; d <= 2; ++d) {
        for (int64_t pb = 0; pb < k; ++pb) {
          for (int64_t pe = 0; pe < k; ++pe) {
            for (bool ceil_mode : {false, true}) {
              WindowGeometry g = geometry(k, s, d, {pb, pe}, AutoPad::kNotSet, ceil_mode);
              Shape in{sym("H")};
              auto out = window_output_dims(g, in);
              if (!out.ok()) {
                // Only the ceil-mode case whose size depends on H may refuse a symbol.
                EXPECT_TRUE(ceil_mode && s > d * (k - 1) + 1 - pe) << out.status().to_string();
              }
              for (int64_t h = d * (k - 1) + 1; h <= 15; ++h) {
                int64_t expected = brute_force_out(h, k, s, d, pb, pe, ceil_mode);
                Shape concrete{DimExpr(h)};
                ASSERT_EQ(window_output_dims(g, concrete).value()[0].to_string(),
                          DimExpr(expected).to_string())
                    << "k=" << k << " s=" << s << " d=" << d << " pads=" << pb << "," << pe
                    << " ceil=" << ceil_mode << " h=" << h;
                if (out.ok()) {
                  ASSERT_EQ((*out)[0].evaluate({{"H", h}}).value(), expected)
                      << "k=" << k << " s=" << s << " d=" << d << " pads=" << pb << "," << pe
                      << " ceil=" << ceil_mode << " h=" << h << " expr=" << (*out)[0].to_string();
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(WindowGeometry, ExplicitPadsForSame) {
  Shape five{DimExpr(5)}, six{DimExpr(6)};
  EXPECT_EQ(explicit_pads(geometry(3, 2, 1, {0, 0}, AutoPad::kSameUpper), five).value(),
            (Ints{1, 1}));
  EXPECT_EQ(explicit_pads(geometry(3, 2, 1, {0, 0}, AutoPad::kSameUpper), six).value(),
            (Ints{0, 1}));
  EXPECT_EQ(explicit_pads(geometry(3, 2, 1, {0, 0}, AutoPad::kSameLower), six).value(),
            (Ints{1, 0}));
  EXPECT_EQ(explicit_pads(geometry(3, 1, 2, {0, 0}, AutoPad::kSameUpper), six).value(),
            (Ints{2, 2}));
  EXPECT_EQ(explicit_pads(geometry(1, 4, 1, {0, 0}, AutoPad::kSameUpper), six).value(),
            (Ints{0, 0}));  // total would be negative: clamped to 0
  EXPECT_EQ(explicit_pads(geometry(3, 2, 1, {0, 0}, AutoPad::kValid), six).value(), (Ints{0, 0}));
  EXPECT_EQ(explicit_pads(geometry(3, 2, 1, {2, 1}, AutoPad::kNotSet), six).value(), (Ints{2, 1}));
  // Stride 1: the total pad is k_eff - 1 whatever H is.
  Shape h{sym("H")};
  EXPECT_EQ(explicit_pads(geometry(4, 1, 1, {0, 0}, AutoPad::kSameUpper), h).value(), (Ints{1, 2}));
  EXPECT_EQ(explicit_pads(geometry(4, 1, 1, {0, 0}, AutoPad::kSameLower), h).value(), (Ints{2, 1}));
  // Stride 2: the pad depends on H's parity.
  EXPECT_TRUE(has_error(explicit_pads(geometry(3, 2, 1, {0, 0}, AutoPad::kSameUpper), h).status(),
                        StatusCode::kUnimplemented, {"attribute 'auto_pad' = SAME_UPPER", "'H'"}));
}

TEST(WindowGeometry, SameEqualsFloorModeWithExplicitPads) {
  for (int64_t in = 1; in <= 12; ++in) {
    for (int64_t k = 1; k <= 4; ++k) {
      for (int64_t s = 1; s <= 3; ++s) {
        for (int64_t d = 1; d <= 2; ++d) {
          for (AutoPad mode : {AutoPad::kSameUpper, AutoPad::kSameLower}) {
            Shape dims{DimExpr(in)};
            WindowGeometry same = geometry(k, s, d, {0, 0}, mode);
            Ints pads = explicit_pads(same, dims).value();
            WindowGeometry expl = geometry(k, s, d, pads, AutoPad::kNotSet);
            EXPECT_EQ(window_output_dims(same, dims).value(),
                      window_output_dims(expl, dims).value())
                << in << " " << k << " " << s << " " << d;
          }
        }
      }
    }
  }
}

TEST(WindowGeometry, NodeEntryPoints) {
  ir::Node conv{"c", "Conv", {}, {}, {}, {}};
  conv.attributes.set("auto_pad", std::string("SAME_LOWER"));
  conv.attributes.set("strides", Ints{2, 2});
  Shape x{sym("N"), 3, 6, 5};
  Shape w{8, 3, 3, 3};
  EXPECT_EQ(explicit_pads(conv, x, &w).value(), (Ints{1, 1, 0, 1}));
  EXPECT_TRUE(
      has_error(explicit_pads(conv, x).status(), StatusCode::kInvalidArgument, {"kernel_shape"}));
  conv.attributes.set("kernel_shape", Ints{3, 3});
  EXPECT_EQ(explicit_pads(conv, x).value(), (Ints{1, 1, 0, 1}));
  ir::Node pool{"p", "MaxPool", {}, {}, {}, {}};
  pool.attributes.set("kernel_shape", Ints{2});
  pool.attributes.set("pads", Ints{1, 0});
  Shape x1{1, 2, 9};
  EXPECT_EQ(explicit_pads(pool, x1).value(), (Ints{1, 0}));
  ir::Node relu{"r", "Relu", {}, {}, {}, {}};
  EXPECT_TRUE(has_error(explicit_pads(relu, x1).status(), StatusCode::kInvalidArgument,
                        {"Relu has no window geometry"}));
}

TEST(WindowGeometry, CanonicalizeKeepsShapesAndResults) {
  auto make = [] {
    OpGraph g("Conv");
    g.input("X", DType::kF32, {sym("N"), 2, 7, 6})
        .constant("W", f32({3, 2, 3, 2}, pattern(36, 5, 1, 7, 3)))
        .attr("auto_pad", std::string("SAME_UPPER"))
        .attr("strides", Ints{2, 1});
    return g;
  };
  OpGraph original = make();
  OpGraph canonical = make();
  ASSERT_TRUE(canonicalize_window_attributes(canonical.graph(), 0).ok());
  const Attributes& attrs = canonical.node().attributes;
  EXPECT_EQ(attrs.get_string("auto_pad", "").value(), "NOTSET");
  EXPECT_EQ(attrs.get_ints("pads", {}).value(), (Ints{1, 0, 1, 1}));
  EXPECT_EQ(attrs.get_ints("kernel_shape", {}).value(), (Ints{3, 2}));
  Tensor x = f32({2, 2, 7, 6}, pattern(168, 7, 3, 11, 4));
  Tensor a = original.run1({x});
  Tensor b = canonical.run1({x});
  EXPECT_EQ(shape_to_string(original.output_shape()), shape_to_string(canonical.output_shape()));
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.element_count(); ++i) {
    ASSERT_EQ(a.values<float>()[i], b.values<float>()[i]) << i;
  }

  OpGraph pool("MaxPool");
  pool.input("X", DType::kF32, {1, 1, 5, 5})
      .attr("kernel_shape", Ints{1, 1})
      .attr("strides", Ints{4, 4})
      .attr("ceil_mode", int64_t{1})
      .attr("auto_pad", std::string("SAME_UPPER"));
  ASSERT_TRUE(pool.infer().ok());
  Shape before = pool.output_shape();
  ASSERT_TRUE(canonicalize_window_attributes(pool.graph(), 0).ok());
  EXPECT_EQ(pool.node().attributes.get_int("ceil_mode", 1).value(), 0);
  ASSERT_TRUE(graph_eval::infer_graph(pool.graph()).ok());
  EXPECT_EQ(shape_to_string(pool.output_shape()), shape_to_string(before));

  OpGraph symbolic("AveragePool");
  symbolic.input("X", DType::kF32, {1, 1, sym("H"), 5})
      .attr("kernel_shape", Ints{3, 3})
      .attr("strides", Ints{2, 2})
      .attr("auto_pad", std::string("SAME_UPPER"));
  // The padding depends on H's value: auto_pad stays for the backend to resolve from the
  // concrete dims; the output shape is ceil(H/2) either way.
  ASSERT_TRUE(symbolic.infer().ok());
  ASSERT_TRUE(canonicalize_window_attributes(symbolic.graph(), 0).ok());
  EXPECT_EQ(symbolic.node().attributes.get_string("auto_pad", "").value(), "SAME_UPPER");
  ASSERT_TRUE(graph_eval::infer_graph(symbolic.graph()).ok());
  EXPECT_EQ(shape_to_string(symbolic.output_shape()), "[1,1,floor((H + 1)/2),3]");
}

}  // namespace
}  // namespace kiln::passes
