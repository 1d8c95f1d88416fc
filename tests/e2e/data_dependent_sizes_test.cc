// Ops whose output size depends on data (NonZero, Compress, TopK with a k given at run time),
// compiled once and run through the staged session: the sizes are bound from the data before each
// such op, every run may give different sizes, and a module file keeps what it needs for that.
// Expected values are worked out by hand from the ONNX spec; random runs are checked against the
// reference evaluator.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "kiln/compiler/pipeline.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/module/module.h"
#include "kiln/runtime/session.h"

namespace kiln {
namespace {

Tensor f32(ConcreteShape dims, std::vector<float> v) {
  Tensor t = Tensor::create(DType::kF32, std::move(dims)).value();
  std::copy(v.begin(), v.end(), t.mutable_values<float>().begin());
  return t;
}
Tensor i64(ConcreteShape dims, std::vector<int64_t> v) {
  Tensor t = Tensor::create(DType::kI64, std::move(dims)).value();
  std::copy(v.begin(), v.end(), t.mutable_values<int64_t>().begin());
  return t;
}
Tensor boolean(ConcreteShape dims, std::vector<uint8_t> v) {
  Tensor t = Tensor::create(DType::kBool, std::move(dims)).value();
  std::copy(v.begin(), v.end(), reinterpret_cast<uint8_t*>(t.mutable_data()));
  return t;
}
template <typename T>
std::vector<T> values_of(const Tensor& t) {
  auto v = t.values<T>();
  return {v.begin(), v.end()};
}

// x[N,4] f32, rows[N] bool, k[1] i64:
//   coords = Transpose(NonZero(Greater(x, 0)))   [P, 2]  positive entries of x
//   positives = GatherND(x, coords)              [P]
//   kept = Compress(x, rows, axis=0)             [R, 4]
//   top, top_index = TopK(kept, k, axis=1)       [R, K]
//   doubled = Add(top, top)                      [R, K]  (work after the last data-dependent op)
ir::Graph selection_graph() {
  ir::Graph g;
  g.name = "selections";
  const DimExpr n = DimExpr::symbol("N");
  const ir::ValueId x = g.add_input("x", DType::kF32, {n, DimExpr(4)});
  const ir::ValueId rows = g.add_input("rows", DType::kBool, {n});
  const ir::ValueId k = g.add_input("k", DType::kI64, {DimExpr(1)});
  const ir::ValueId zero = g.add_constant("zero", f32({}, {0.f}));
  auto value = [&](const std::string& name) {
    return g.add_value(ir::Value{name, DType::kF32, {}, std::nullopt, std::nullopt, {}});
  };
  const ir::ValueId mask = value("mask"), nz = value("nz"), coords = value("coords"),
                    positives = value("positives"), kept = value("kept"), top = value("top"),
                    top_index = value("top_index"), doubled = value("doubled");
  g.add_node(ir::Node{"greater", "Greater", {x, zero}, {mask}, {}, {}, {}});
  g.add_node(ir::Node{"nonzero", "NonZero", {mask}, {nz}, {}, {}, {}});
  ir::Node transpose{"transpose", "Transpose", {nz}, {coords}, {}, {}, {}};
  transpose.attributes.set("perm", std::vector<int64_t>{1, 0});
  g.add_node(std::move(transpose));
  g.add_node(ir::Node{"gather", "GatherND", {x, coords}, {positives}, {}, {}, {}});
  ir::Node compress{"compress", "Compress", {x, rows}, {kept}, {}, {}, {}};
  compress.attributes.set("axis", int64_t{0});
  g.add_node(std::move(compress));
  g.add_node(ir::Node{"topk", "TopK", {kept, k}, {top, top_index}, {}, {}, {}});
  g.add_node(ir::Node{"double", "Add", {top, top}, {doubled}, {}, {}, {}});
  g.add_output(positives);
  g.add_output(doubled);
  g.add_output(top_index);
  Status inferred = graph_eval::infer_graph(g);
  KILN_CHECK(inferred.ok());
  return g;
}

std::shared_ptr<const module::ModuleContents> compile_selection() {
  auto contents = compiler::compile(selection_graph(), {});
  EXPECT_TRUE(contents.ok()) << contents.status().to_string();
  return std::make_shared<const module::ModuleContents>(std::move(contents).value());
}

std::unique_ptr<runtime::Session> open_session(std::shared_ptr<const module::ModuleContents> m) {
  auto session = runtime::Session::create(std::move(m), {"cpu", 1});
  EXPECT_TRUE(session.ok()) << session.status().to_string();
  return std::move(session).value();
}

TEST(DataDependentSizes, ShapeInferenceGivesFreshSymbolsNamedAfterTheNode) {
  ir::Graph g = selection_graph();
  const ir::Value& nz = g.value(*g.find_value("nz"));
  EXPECT_EQ(nz.shape, (Shape{DimExpr(2), DimExpr::symbol("nonzero.size0")}));
  EXPECT_EQ(g.value(*g.find_value("doubled")).shape,
            (Shape{DimExpr::symbol("compress.size0"), DimExpr::symbol("topk.size0")}));
  EXPECT_EQ(g.node(1).data_symbols, (std::vector<std::string>{"nonzero.size0"}));
  auto m = compile_selection();
  std::vector<std::string> binders;
  for (const module::Dispatch& d : m->dispatches) {
    if (!d.data_symbols.empty()) binders.push_back(d.op_type + ":" + d.data_symbols[0]);
  }
  EXPECT_EQ(binders, (std::vector<std::string>{"NonZero:nonzero.size0", "Compress:compress.size0",
                                               "TopK:topk.size0"}));
}

TEST(DataDependentSizes, EachRunBindsItsOwnSizes) {
  auto session = open_session(compile_selection());
  // Run 1: N=2; positives 1, 3, 2 (row-major); row 1 kept; k=2.
  std::vector<Tensor> in1 = {f32({2, 4}, {1, -1, 3, 0, -2, 2, -5, -4}), boolean({2}, {0, 1}),
                             i64({1}, {2})};
  Bindings bound;
  auto out = session->run(in1, nullptr, &bound);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values_of<float>((*out)[0]), (std::vector<float>{1, 3, 2}));
  EXPECT_EQ((*out)[1].shape(), (ConcreteShape{1, 2}));
  EXPECT_EQ(values_of<float>((*out)[1]), (std::vector<float>{4, -4}));  // 2*2, 2*-2
  EXPECT_EQ(values_of<int64_t>((*out)[2]), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(bound,
            (Bindings{{"N", 2}, {"nonzero.size0", 3}, {"compress.size0", 1}, {"topk.size0", 2}}));

  // Run 2 on the same session: N=3, no positive entry, every row kept, k=0 and then k=4.
  std::vector<Tensor> in2 = {f32({3, 4}, {-1, -2, -3, -4, -5, -6, -7, -8, 0, 0, 0, 0}),
                             boolean({3}, {1, 1, 1}), i64({1}, {0})};
  out = session->run(in2);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].shape(), (ConcreteShape{0}));
  EXPECT_EQ((*out)[1].shape(), (ConcreteShape{3, 0}));
  in2[2] = i64({1}, {4});
  out = session->run(in2);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values_of<float>((*out)[1]),
            (std::vector<float>{-2, -4, -6, -8, -10, -12, -14, -16, 0, 0, 0, 0}));
  EXPECT_EQ(values_of<int64_t>((*out)[2]),
            (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));

  // Run 1 again: the same answer as the first time.
  out = session->run(in1);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values_of<float>((*out)[0]), (std::vector<float>{1, 3, 2}));
}

TEST(DataDependentSizes, RandomRunsMatchTheReferenceEvaluator) {
  const ir::Graph graph = selection_graph();
  auto session = open_session(compile_selection());
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (int run = 0; run < 20; ++run) {
    const int64_t n = 1 + run % 6;
    Tensor x = Tensor::create(DType::kF32, {n, 4}).value();
    for (float& v : x.mutable_values<float>()) v = normal(rng);
    Tensor rows = Tensor::create(DType::kBool, {n}).value();
    for (int64_t i = 0; i < n; ++i) reinterpret_cast<uint8_t*>(rows.mutable_data())[i] = rng() % 2;
    std::vector<Tensor> inputs = {x, rows, i64({1}, {static_cast<int64_t>(rng() % 5)})};
    auto expected = graph_eval::evaluate_graph(graph, inputs);
    ASSERT_TRUE(expected.ok()) << expected.status().to_string();
    auto actual = session->run(inputs);
    ASSERT_TRUE(actual.ok()) << actual.status().to_string();
    for (size_t o = 0; o < actual->size(); ++o) {
      ASSERT_EQ((*actual)[o].shape(), (*expected)[o].shape()) << "run " << run << " output " << o;
      ASSERT_EQ((*actual)[o].dtype(), (*expected)[o].dtype());
      const auto bytes =
          static_cast<size_t>((*actual)[o].element_count()) * dtype_size((*actual)[o].dtype());
      EXPECT_EQ(std::memcmp((*actual)[o].data(), (*expected)[o].data(), bytes), 0)
          << "run " << run << " output " << o;
    }
  }
}

TEST(DataDependentSizes, BadDataIsAnErrorNamingTheDispatch) {
  auto session = open_session(compile_selection());
  std::vector<Tensor> inputs = {f32({1, 4}, {1, 2, 3, 4}), boolean({1}, {1}), i64({1}, {5})};
  auto out = session->run(inputs);
  ASSERT_FALSE(out.ok());
  const std::string message = out.status().to_string();
  EXPECT_NE(message.find("'K' = 5 is out of range [0, 4]"), std::string::npos) << message;
  EXPECT_NE(message.find("(TopK)"), std::string::npos) << message;
  inputs[2] = i64({1}, {-1});
  out = session->run(inputs);
  ASSERT_FALSE(out.ok());
  // The session still runs good data afterwards.
  inputs[2] = i64({1}, {1});
  out = session->run(inputs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values_of<float>((*out)[1]), (std::vector<float>{8}));
}

// A damaged or crafted module: data symbols on an op that has none, or more than its op binds.
TEST(DataDependentSizes, DataSymbolsTheOpCannotBindAreRefusedWhenTheModuleRuns) {
  std::vector<Tensor> inputs = {f32({1, 4}, {1, 2, 3, 4}), boolean({1}, {1}), i64({1}, {1})};
  module::ModuleContents greater = *compile_selection();
  ASSERT_EQ(greater.dispatches[0].op_type, "Greater");
  greater.dispatches[0].data_symbols = {"bogus"};
  ASSERT_TRUE(module::verify_contents(greater).ok());
  auto out = open_session(std::make_shared<const module::ModuleContents>(greater))->run(inputs);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().to_string().find("op type 'Greater' has no data-dependent sizes"),
            std::string::npos)
      << out.status().to_string();

  module::ModuleContents nonzero = *compile_selection();
  ASSERT_EQ(nonzero.dispatches[1].op_type, "NonZero");
  nonzero.dispatches[1].data_symbols.push_back("extra");
  ASSERT_TRUE(module::verify_contents(nonzero).ok());
  out = open_session(std::make_shared<const module::ModuleContents>(nonzero))->run(inputs);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().to_string().find("gave 1 data-dependent sizes for its 2 symbols"),
            std::string::npos)
      << out.status().to_string();
}

// Records the dispatch numbers an observer sees.
class Recorder : public hal::RunObserver {
 public:
  bool wants_outputs(int32_t dispatch) override { return true; }
  Status after_dispatch(int32_t dispatch, double, std::span<const Tensor> outputs) override {
    seen.push_back(dispatch);
    shapes.push_back(outputs.empty() ? "" : shape_to_string(outputs[0].shape()));
    return ok_status();
  }
  std::vector<int32_t> seen;
  std::vector<std::string> shapes;
};

TEST(DataDependentSizes, ObserversSeeModuleDispatchNumbersAcrossStages) {
  auto module = compile_selection();
  auto session = open_session(module);
  Recorder recorder;
  std::vector<Tensor> inputs = {f32({2, 4}, {1, -1, 3, 0, -2, 2, -5, -4}), boolean({2}, {1, 1}),
                                i64({1}, {3})};
  Bindings bound;
  ASSERT_TRUE(session->run(inputs, &recorder, &bound).ok());
  std::vector<int32_t> all(module->dispatches.size());
  for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int32_t>(d);
  EXPECT_EQ(recorder.seen, all);
  // Shapes and kernels can be described with the run's bindings, data symbols included.
  auto shapes = session->value_shapes(bound);
  ASSERT_TRUE(shapes.ok()) << shapes.status().to_string();
  auto described = session->describe_dispatches(bound);
  ASSERT_TRUE(described.ok()) << described.status().to_string();
  EXPECT_EQ(described->size(), module->dispatches.size());
  // Without them, the error names the unbound symbol.
  auto partial = session->value_shapes(Bindings{{"N", 2}});
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.status().to_string().find("nonzero.size0"), std::string::npos);
}

TEST(DataDependentSizes, TheModuleFileKeepsTheDataSymbols) {
  auto module = compile_selection();
  const std::string path =
      (std::filesystem::temp_directory_path() / "kiln_data_dependent_sizes_test.kmod").string();
  ASSERT_TRUE(module::write_module(*module, path).ok());
  auto loaded = module::load_module(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  for (size_t d = 0; d < module->dispatches.size(); ++d) {
    EXPECT_EQ((*loaded)->dispatches[d].data_symbols, module->dispatches[d].data_symbols);
  }
  auto session = open_session(*loaded);
  std::vector<Tensor> inputs = {f32({1, 4}, {4, 3, 2, 1}), boolean({1}, {1}), i64({1}, {2})};
  auto out = session->run(inputs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values_of<float>((*out)[1]), (std::vector<float>{8, 6}));
}

}  // namespace
}  // namespace kiln
