// Control flow (Loop, Scan, a large If) end to end, and sequences and optionals, which live on the
// host and cross Loops and If branches: ONNX models built in memory, imported with
// their bodies, compiled to a module whose control-flow dispatches carry nested programs, written
// and loaded back, and run by the Session on the CPU, each body as a nested program on the same
// device. Expected values are worked out by hand from the ONNX spec, and every run is also
// checked against the float64 reference evaluator (which runs the bodies by recursion).
#include <gtest/gtest.h>

#include <gmock/gmock.h>

#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "kiln/compiler/pipeline.h"
#include "kiln/graph_eval/graph_eval.h"
#include "kiln/module/module.h"
#include "kiln/onnx/importer.h"
#include "kiln/runtime/session.h"
#include "tests/support/onnx/test_models.h"

namespace kiln {
namespace {

using onnx_import::testing::attr_int;
using onnx_import::testing::attr_ints;
using onnx_import::testing::ModelBuilder;
using ::testing::HasSubstr;

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
constexpr int32_t kInt64 = onnx::TensorProto::INT64;
constexpr int32_t kBool = onnx::TensorProto::BOOL;

Tensor f32(ConcreteShape dims, std::vector<float> v) {
  Tensor t = Tensor::create(DType::kF32, std::move(dims)).value();
  std::copy(v.begin(), v.end(), t.mutable_values<float>().begin());
  return t;
}
Tensor i64(int64_t v) {
  Tensor t = Tensor::create(DType::kI64, {}).value();
  t.mutable_values<int64_t>()[0] = v;
  return t;
}
Tensor boolean(bool v) {
  Tensor t = Tensor::create(DType::kBool, {}).value();
  t.mutable_values<uint8_t>()[0] = v ? 1 : 0;
  return t;
}
std::vector<float> floats(const Tensor& t) {
  auto v = t.values<float>();
  return {v.begin(), v.end()};
}

// A body graph: inputs without declared types (ONNX lets a body leave them to the node).
struct Body {
  ModelBuilder builder{17, "body"};
  onnx::GraphProto& graph() { return builder.graph(); }
  void input(const std::string& name) { graph().add_input()->set_name(name); }
  void output(const std::string& name) { graph().add_output()->set_name(name); }
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in,
                        const std::vector<std::string>& out) {
    return builder.node(op, in, out, out.front());
  }
  // A 1-element f32 of iteration `i` (i64 []): Reshape(Cast(i), [1]).
  void iteration_as_float(const std::string& iter, const std::string& out) {
    builder.initializer_i64(out + "_shape", {1}, {1});
    attr_int(node("Cast", {iter}, {out + "_f"}), "to", kFloat);
    node("Reshape", {out + "_f", out + "_shape"}, {out});
  }
};

void set_body(onnx::NodeProto* node, const std::string& name, Body& body) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = body.graph();
}

// A module and the IR it came from (for the reference), through a module file's bytes.
struct Compiled {
  ir::Graph graph;
  std::shared_ptr<const module::ModuleContents> module;
};

StatusOr<Compiled> compile(const ModelBuilder& model) {
  const std::string bytes = model.bytes();
  KILN_ASSIGN_OR_RETURN(ir::Graph graph, onnx_import::import_bytes(bytes.data(), bytes.size(), ""));
  KILN_ASSIGN_OR_RETURN(module::ModuleContents contents, compiler::compile(graph, {}));
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> file, module::serialize_module(contents));
  KILN_ASSIGN_OR_RETURN(auto loaded, module::load_module_from_bytes(file.data(), file.size()));
  return Compiled{std::move(graph), std::move(loaded)};
}

// Records the dispatches of every program the wrapped device prepares, and counts runs.
class RecordingDevice : public hal::Device {
 public:
  explicit RecordingDevice(std::unique_ptr<hal::Device> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  Status supports(const hal::DispatchSpec& d, std::span<const hal::ValueSpec> v) const override {
    return inner_->supports(d, v);
  }
  StatusOr<std::unique_ptr<hal::Executable>> prepare(const hal::ProgramSpec& spec) override {
    for (const hal::DispatchSpec& d : spec.dispatches) prepared->push_back(d.op_type);
    return inner_->prepare(spec);
  }
  StatusOr<std::vector<int64_t>> data_sizes(const hal::DispatchSpec& d,
                                            std::span<const Tensor> inputs) override {
    return inner_->data_sizes(d, inputs);
  }
  hal::Allocator& allocator() override { return inner_->allocator(); }
  hal::Queue& queue() override { return inner_->queue(); }

  std::shared_ptr<std::vector<std::string>> prepared = std::make_shared<std::vector<std::string>>();

 private:
  std::unique_ptr<hal::Device> inner_;
};

// Counts the dispatches a run reports (a control-flow dispatch counts once).
class CountingObserver : public hal::RunObserver {
 public:
  Status after_dispatch(int32_t dispatch, double, std::span<const Tensor>) override {
    seen.push_back(dispatch);
    return ok_status();
  }
  std::vector<int32_t> seen;
};

std::unique_ptr<runtime::Session> open(
    const Compiled& compiled, std::shared_ptr<std::vector<std::string>>* prepared = nullptr) {
  runtime::SessionOptions options;
  options.threads = 1;
  if (prepared != nullptr) {
    options.decorate_device =
        [prepared](std::unique_ptr<hal::Device> inner) -> StatusOr<std::unique_ptr<hal::Device>> {
      auto device = std::make_unique<RecordingDevice>(std::move(inner));
      *prepared = device->prepared;
      return std::unique_ptr<hal::Device>(std::move(device));
    };
  }
  auto session = runtime::Session::create(compiled.module, options);
  KILN_CHECK(session.ok());
  return std::move(session).value();
}

// The session's outputs, also checked against the float64 reference.
std::vector<Tensor> run_checked(runtime::Session& session, const ir::Graph& graph,
                                const std::vector<Tensor>& inputs) {
  auto outputs = session.run(inputs);
  EXPECT_TRUE(outputs.ok()) << outputs.status().to_string();
  if (!outputs.ok()) return {};
  auto reference = graph_eval::evaluate_graph(graph, inputs);
  EXPECT_TRUE(reference.ok()) << reference.status().to_string();
  if (!reference.ok()) return *outputs;
  EXPECT_EQ(reference->size(), outputs->size());
  for (size_t i = 0; i < outputs->size() && i < reference->size(); ++i) {
    EXPECT_EQ((*outputs)[i].shape(), (*reference)[i].shape()) << "output " << i;
    if ((*outputs)[i].dtype() == DType::kF32 && (*reference)[i].dtype() == DType::kF32) {
      EXPECT_EQ(floats((*outputs)[i]), floats((*reference)[i])) << "output " << i;
    }
  }
  return *outputs;
}

// Loop(M, cond, y[1]): y += i each iteration, scan output y after each. With `limit` (a graph
// input the body captures) the body's condition is i < limit, so the loop stops early.
ModelBuilder counting_loop(bool with_condition) {
  ModelBuilder m;
  m.input("M", kInt64, {});
  if (with_condition) {
    m.input("cond", kBool, {});
    m.input("limit", kInt64, {});
  }
  m.input("y", kFloat, {1});
  Body body;
  body.input("i");
  body.input("cond_in");
  body.input("y_in");
  body.iteration_as_float("i", "i_f");
  body.node("Add", {"y_in", "i_f"}, {"y_out"});
  body.node("Identity", {"y_out"}, {"scan"});
  if (with_condition) {
    body.node("Less", {"i", "limit"}, {"cond_out"});
  } else {
    body.node("Identity", {"cond_in"}, {"cond_out"});
  }
  body.output("cond_out");
  body.output("y_out");
  body.output("scan");
  onnx::NodeProto* loop =
      m.node("Loop", {"M", with_condition ? "cond" : "", "y"}, {"y_final", "ys"}, "loop");
  set_body(loop, "body", body);
  m.output("y_final");
  m.output("ys");
  return m;
}

TEST(ControlFlow, LoopTripCountComesFromAnInputAtRunTime) {
  auto compiled = compile(counting_loop(false));
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  // The body is a nested program of the Loop dispatch, its capture-free inputs (i, cond, y).
  const module::Dispatch& loop = compiled->module->dispatches.back();
  ASSERT_EQ(loop.op_type, "Loop");
  ASSERT_EQ(loop.bodies.size(), 1u);
  EXPECT_EQ(loop.bodies[0]->inputs.size(), 3u);
  auto session = open(*compiled);
  for (int64_t m : {3, 0, 5, 1}) {
    auto out = run_checked(*session, compiled->graph, {i64(m), f32({1}, {10})});
    ASSERT_EQ(out.size(), 2u);
    float y = 10;
    std::vector<float> ys;
    for (int64_t i = 0; i < m; ++i) ys.push_back(y += static_cast<float>(i));
    EXPECT_EQ(floats(out[0]), std::vector<float>{y}) << "M=" << m;
    EXPECT_EQ(out[1].shape(), (ConcreteShape{m, 1})) << "M=" << m;
    EXPECT_EQ(floats(out[1]), ys) << "M=" << m;
  }
}

TEST(ControlFlow, LoopShapesAreInferredOverSymbolicDims) {
  // Loop(M, x[N,4]): x += 1, scan output x after each. Unchanged dims keep the outer symbol; the
  // iteration count is the Loop's data-dependent size.
  ModelBuilder m;
  m.input("M", kInt64, {});
  m.input("x", kFloat, {std::string("N"), int64_t{4}});
  Body body;
  body.input("i");
  body.input("cond_in");
  body.input("x_in");
  body.builder.initializer("one", {}, {1});
  body.node("Add", {"x_in", "one"}, {"x_out"});
  body.node("Identity", {"x_out"}, {"scan"});
  body.node("Identity", {"cond_in"}, {"cond_out"});
  body.output("cond_out");
  body.output("x_out");
  body.output("scan");
  set_body(m.node("Loop", {"M", "", "x"}, {"x_final", "xs"}, "loop"), "body", body);
  m.output("x_final");
  m.output("xs");
  auto compiled = compile(m);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  const ir::Graph& g = compiled->graph;
  ASSERT_EQ(g.nodes().size(), 1u);
  ASSERT_EQ(g.nodes()[0].data_symbols, std::vector<std::string>{"loop.size0"});
  EXPECT_EQ(shape_to_string(g.value(g.outputs()[0]).shape), "[N,4]");
  EXPECT_EQ(g.value(g.outputs()[1]).shape,
            (Shape{DimExpr::symbol("loop.size0"), DimExpr::symbol("N"), DimExpr(4)}));
  // The body's inputs: the iteration number holds its symbol; x keeps [N,4].
  const ir::Graph& loop_body = *g.nodes()[0].bodies[0];
  EXPECT_EQ(loop_body.value(loop_body.inputs()[0]).dim_values,
            std::vector<DimExpr>{DimExpr::symbol("loop.iteration")});
  EXPECT_EQ(shape_to_string(loop_body.value(loop_body.inputs()[2]).shape), "[N,4]");
  auto session = open(*compiled);
  auto out = run_checked(*session, g, {i64(3), f32({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(floats(out[0]), (std::vector<float>{3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(out[1].shape(), (ConcreteShape{3, 2, 4}));
}

TEST(ControlFlow, LoopConditionComputedByTheBodyStopsEarly) {
  auto compiled = compile(counting_loop(true));
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto session = open(*compiled);
  // i = 0, 1, 2 run; at i = 2 the body says 2 < 2 is false.
  auto out =
      run_checked(*session, compiled->graph, {i64(10), boolean(true), i64(2), f32({1}, {0})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(floats(out[0]), std::vector<float>{3});
  EXPECT_EQ(floats(out[1]), (std::vector<float>{0, 1, 3}));
  // The trip count bounds it first; a false initial condition runs nothing.
  out = run_checked(*session, compiled->graph, {i64(2), boolean(true), i64(7), f32({1}, {0})});
  EXPECT_EQ(floats(out[1]), (std::vector<float>{0, 1}));
  out = run_checked(*session, compiled->graph, {i64(4), boolean(false), i64(7), f32({1}, {5})});
  EXPECT_EQ(floats(out[0]), std::vector<float>{5});
  EXPECT_EQ(out[1].shape(), (ConcreteShape{0, 1}));
}

TEST(ControlFlow, LoopCarriedValueGrowsEachIteration) {
  ModelBuilder m;
  m.input("M", kInt64, {});
  m.input("v", kFloat, {1});
  Body body;
  body.input("i");
  body.input("cond_in");
  body.input("v_in");
  body.iteration_as_float("i", "i_f");
  attr_int(body.node("Concat", {"v_in", "i_f"}, {"v_out"}), "axis", 0);
  body.node("Identity", {"cond_in"}, {"cond_out"});
  body.output("cond_out");
  body.output("v_out");
  set_body(m.node("Loop", {"M", "", "v"}, {"v_final"}, "grow"), "body", body);
  m.output("v_final");
  auto compiled = compile(m);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  // The carried dim changes in the body: the output's dim is a data symbol of the Loop.
  const ir::Value& out_value = compiled->graph.value(compiled->graph.outputs()[0]);
  ASSERT_EQ(out_value.shape.size(), 1u);
  EXPECT_TRUE(out_value.shape[0].is_symbol()) << shape_to_string(out_value.shape);
  auto session = open(*compiled);
  for (int64_t trips : {4, 1, 6}) {
    auto out = run_checked(*session, compiled->graph, {i64(trips), f32({1}, {-1})});
    ASSERT_EQ(out.size(), 1u);
    std::vector<float> expected{-1};
    for (int64_t i = 0; i < trips; ++i) expected.push_back(static_cast<float>(i));
    EXPECT_EQ(floats(out[0]), expected);
  }
}

TEST(ControlFlow, ScanReversedAlongAnAxisWithScanOutputsOnAnotherAxis) {
  // Scan(sum[2], x[2,T]) over axis 1 backwards; scan output stacked on axis 1, forwards.
  ModelBuilder m;
  m.input("sum", kFloat, {2});
  m.input("x", kFloat, {2, std::string("T")});
  Body body;
  body.input("sum_in");
  body.input("column");
  body.node("Add", {"sum_in", "column"}, {"sum_out"});
  body.node("Identity", {"sum_out"}, {"partial"});
  body.output("sum_out");
  body.output("partial");
  onnx::NodeProto* scan = m.node("Scan", {"sum", "x"}, {"total", "partials"}, "scan");
  set_body(scan, "body", body);
  attr_int(scan, "num_scan_inputs", 1);
  attr_ints(scan, "scan_input_axes", {1});
  attr_ints(scan, "scan_input_directions", {1});
  attr_ints(scan, "scan_output_axes", {-1});
  m.output("total");
  m.output("partials");
  auto compiled = compile(m);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  // The scan output's iteration dim is the scan input's length T, known from the inputs.
  EXPECT_EQ(shape_to_string(compiled->graph.value(compiled->graph.outputs()[1]).shape), "[2,T]");
  auto session = open(*compiled);
  // x = [[1, 2, 3], [10, 20, 30]]: columns visited 3, 2, 1.
  auto out = run_checked(*session, compiled->graph,
                         {f32({2}, {0, 100}), f32({2, 3}, {1, 2, 3, 10, 20, 30})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(floats(out[0]), (std::vector<float>{6, 160}));
  EXPECT_EQ(out[1].shape(), (ConcreteShape{2, 3}));
  EXPECT_EQ(floats(out[1]), (std::vector<float>{3, 5, 6, 130, 150, 160}));
}

// A branch of `count` nodes: y = ((x op c) op c) ... ; too large to inline (inline_if.h).
void chain(Body& branch, const std::string& op, float c, int count, const std::string& x,
           const std::string& y) {
  branch.builder.initializer(y + "_c", {}, {c});
  std::string at = x;
  for (int k = 0; k < count; ++k) {
    const std::string next = k + 1 == count ? y : y + "_" + std::to_string(k);
    branch.node(op, {at, y + "_c"}, {next});
    at = next;
  }
  branch.output(y);
}

TEST(ControlFlow, LargeIfRunsOnlyTheTakenBranch) {
  ModelBuilder m;
  m.input("c", kBool, {});
  m.input("x", kFloat, {std::string("N")});
  Body then_branch, else_branch;
  chain(then_branch, "Add", 1, 9, "x", "t");
  chain(else_branch, "Mul", 2, 9, "x", "e");
  onnx::NodeProto* node = m.node("If", {"c"}, {"y"}, "choose");
  set_body(node, "then_branch", then_branch);
  set_body(node, "else_branch", else_branch);
  m.output("y");
  auto compiled = compile(m);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  ASSERT_EQ(compiled->module->dispatches.size(), 1u) << "kept as one If, not inlined";
  std::shared_ptr<std::vector<std::string>> prepared;
  auto session = open(*compiled, &prepared);
  CountingObserver observer;
  auto out = session->run(std::vector<Tensor>{boolean(true), f32({2}, {1, -3})}, &observer);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(floats((*out)[0]), (std::vector<float>{10, 6}));
  EXPECT_EQ(observer.seen, std::vector<int32_t>{0});
  EXPECT_EQ(*prepared, std::vector<std::string>(9, "Add")) << "only the then branch is prepared";
  prepared->clear();
  out = session->run(std::vector<Tensor>{boolean(false), f32({2}, {1, -3})});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(floats((*out)[0]), (std::vector<float>{512, -1536}));
  EXPECT_EQ(*prepared, std::vector<std::string>(9, "Mul")) << "only the else branch is prepared";
  prepared->clear();
  // The then branch's plan is cached: running it again prepares nothing.
  run_checked(*session, compiled->graph, {boolean(true), f32({2}, {1, -3})});
  EXPECT_TRUE(prepared->empty());
}

TEST(ControlFlow, LargeIfNestedInALoopCapturesAcrossTwoLevels) {
  // Loop M: y = (i even) ? y + scale (9 times) : y * 2 (9 times); `scale` is a graph input read
  // in the then branch, inside the loop body.
  ModelBuilder m;
  m.input("M", kInt64, {});
  m.input("scale", kFloat, {1});
  m.input("y", kFloat, {1});
  Body body;
  body.input("i");
  body.input("cond_in");
  body.input("y_in");
  body.builder.initializer_i64("two", {}, {2});
  body.builder.initializer_i64("zero", {}, {0});
  body.node("Mod", {"i", "two"}, {"parity"});
  body.node("Equal", {"parity", "zero"}, {"even"});
  Body then_branch, else_branch;
  std::string at = "y_in";
  for (int k = 0; k < 9; ++k) {
    const std::string next = k == 8 ? "t" : "t_" + std::to_string(k);
    then_branch.node("Add", {at, "scale"}, {next});
    at = next;
  }
  then_branch.output("t");
  chain(else_branch, "Mul", 2, 9, "y_in", "e");
  onnx::NodeProto* branch = body.node("If", {"even"}, {"y_out"});
  set_body(branch, "then_branch", then_branch);
  set_body(branch, "else_branch", else_branch);
  body.node("Identity", {"cond_in"}, {"cond_out"});
  body.output("cond_out");
  body.output("y_out");
  set_body(m.node("Loop", {"M", "", "y"}, {"y_final"}, "loop"), "body", body);
  m.output("y_final");
  auto compiled = compile(m);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  const module::Dispatch& loop = compiled->module->dispatches.back();
  ASSERT_EQ(loop.bodies.size(), 1u);
  EXPECT_EQ(loop.attributes.get_int("kiln_captures", -1).value(), 1) << "scale";
  auto session = open(*compiled);
  // i=0: 1 + 9*0.5 = 5.5; i=1: 5.5 * 512 = 2816; i=2: 2816 + 4.5 = 2820.5.
  auto out = run_checked(*session, compiled->graph, {i64(3), f32({1}, {0.5f}), f32({1}, {1})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(floats(out[0]), std::vector<float>{2820.5f});
}

TEST(ControlFlow, BadTripCountsAreErrorsNamingTheDispatch) {
  auto compiled = compile(counting_loop(false));
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto session = open(*compiled);
  auto negative = session->run(std::vector<Tensor>{i64(-1), f32({1}, {0})});
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(negative.status().message(), HasSubstr("the trip count M is -1; it must be >= 0"));
  EXPECT_THAT(negative.status().message(), HasSubstr("(Loop)"));
  auto huge = session->run(std::vector<Tensor>{i64(int64_t{1} << 40), f32({1}, {0})});
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(), HasSubstr("over kiln's limit of 2147483648 iterations"));
  // The reference says the same.
  auto reference =
      graph_eval::evaluate_graph(compiled->graph, std::vector<Tensor>{i64(-1), f32({1}, {0})});
  ASSERT_FALSE(reference.ok());
  EXPECT_THAT(reference.status().message(), HasSubstr("the trip count M is -1"));
}

TEST(ControlFlow, BodyOutputCountMismatchIsAnImportError) {
  ModelBuilder m = counting_loop(false);
  // The body returns cond and y but no scan output, while the node has two outputs.
  onnx::GraphProto* body = m.graph().mutable_node(0)->mutable_attribute(0)->mutable_g();
  body->mutable_output()->RemoveLast();
  auto compiled = compile(m);
  ASSERT_FALSE(compiled.ok());
  EXPECT_THAT(compiled.status().to_string(), HasSubstr("body 0 has 2 outputs; the node needs 3"));
  EXPECT_THAT(compiled.status().to_string(), HasSubstr("node 'loop' (Loop)"));
}

TEST(ControlFlow, AnUnboundedLoopIsRefused) {
  ModelBuilder m = counting_loop(false);
  m.graph().mutable_node(0)->set_input(0, "");
  auto compiled = compile(m);
  ASSERT_FALSE(compiled.ok());
  EXPECT_THAT(compiled.status().to_string(), HasSubstr("neither a trip count nor a condition"));
}

// A module whose Loop bodies nest `depth` deep (each body a Loop over the next).
module::ModuleContents nested_loops(int depth) {
  module::ModuleContents leaf;
  leaf.values = {{"i", DType::kI64, {}, module::ValueKind::kInput, {}, {}},
                 {"c", DType::kBool, {}, module::ValueKind::kInput, {}, {}}};
  leaf.inputs = {0, 1};
  leaf.outputs = {1};
  module::ModuleContents current = leaf;
  for (int level = 0; level < depth; ++level) {
    module::ModuleContents outer = leaf;
    module::Dispatch loop;
    loop.name = "loop" + std::to_string(level);
    loop.op_type = "Loop";
    loop.inputs = {0, 1};
    loop.outputs = {};
    loop.bodies.push_back(std::make_shared<const module::ModuleContents>(current));
    // The body (i, cond) -> (cond): no carried values, no scan outputs.
    outer.dispatches.push_back(loop);
    current = outer;
  }
  return current;
}

TEST(ControlFlow, ModulesNestingBodiesTooDeepAreRefused) {
  EXPECT_TRUE(module::verify_contents(nested_loops(module::kMaxBodyDepth)).ok());
  Status deep = module::verify_contents(nested_loops(module::kMaxBodyDepth + 1));
  ASSERT_FALSE(deep.ok());
  EXPECT_THAT(deep.message(), HasSubstr("bodies nested more than 16 deep"));
  EXPECT_FALSE(module::serialize_module(nested_loops(module::kMaxBodyDepth + 1)).ok());
  // A body whose input count does not fit its dispatch.
  module::ModuleContents bad = nested_loops(1);
  auto body = std::make_shared<module::ModuleContents>(*bad.dispatches[0].bodies[0]);
  body->outputs.push_back(0);
  bad.dispatches[0].bodies[0] = body;
  Status mismatch = module::verify_contents(bad);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_THAT(mismatch.message(), HasSubstr("body 0 has 2 inputs and 2 outputs"));
  // A round trip keeps the nesting.
  auto bytes = module::serialize_module(nested_loops(3));
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto loaded = module::load_module_from_bytes(bytes->data(), bytes->size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->dispatches[0].bodies[0]->dispatches[0].bodies[0]->dispatches[0].name,
            "loop0");
}

// A graph input that is a sequence of f32 tensors of rank 1.
void sequence_input(ModelBuilder& m, const std::string& name) {
  onnx::ValueInfoProto* in = m.graph().add_input();
  in->set_name(name);
  auto* tensor =
      in->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type();
  tensor->set_elem_type(kFloat);
  tensor->mutable_shape()->add_dim()->set_dim_param("L");
}

HostValue f32_sequence(std::vector<Tensor> elements) {
  return HostValue::sequence(DType::kF32, std::move(elements)).value();
}

// seq = Loop(M) { s = SequenceInsert(s, [float(i)]) } from SequenceEmpty, and
// joined = ConcatFromSequence(seq, axis 0): a sequence whose length, and a tensor whose dim, only
// the run knows.
ModelBuilder sequence_loop() {
  ModelBuilder m;
  m.input("M", kInt64, {});
  attr_int(m.node("SequenceEmpty", {}, {"empty"}, "empty"), "dtype", kFloat);
  Body body;
  body.input("i");
  body.input("cond_in");
  body.input("s_in");
  body.iteration_as_float("i", "i_f");
  body.node("SequenceInsert", {"s_in", "i_f"}, {"s_out"});
  body.node("Identity", {"cond_in"}, {"cond_out"});
  body.output("cond_out");
  body.output("s_out");
  set_body(m.node("Loop", {"M", "", "empty"}, {"seq"}, "loop"), "body", body);
  attr_int(m.node("ConcatFromSequence", {"seq"}, {"joined"}, "concat"), "axis", 0);
  m.graph().add_output()->set_name("seq");
  m.output("joined");
  return m;
}

TEST(Sequences, OneModuleRunsASequenceCarryingLoopAtAnyTripCount) {
  auto compiled = compile(sequence_loop());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  // The forms survive the module file: the loop carries a sequence, the first output is one.
  const module::ModuleContents& module = *compiled->module;
  EXPECT_EQ(module.values[module.outputs[0]].form, ValueForm::kSequence);
  EXPECT_EQ(module.values[module.outputs[1]].form, ValueForm::kTensor);
  const module::Dispatch& loop = module.dispatches[1];
  ASSERT_EQ(loop.op_type, "Loop");
  EXPECT_EQ(loop.bodies[0]->values[loop.bodies[0]->inputs[2]].form, ValueForm::kSequence);
  auto session = open(*compiled);
  for (int64_t m : {3, 5, 1}) {
    const std::vector<HostValue> inputs = {i64(m)};
    auto out = session->run_values(inputs);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    ASSERT_EQ(out->size(), 2u);
    const HostValue& seq = (*out)[0];
    ASSERT_EQ(seq.form(), ValueForm::kSequence);
    ASSERT_EQ(seq.elements().size(), static_cast<size_t>(m)) << "M=" << m;
    std::vector<float> expected;
    for (int64_t i = 0; i < m; ++i) {
      EXPECT_EQ(floats(seq.elements()[i]), std::vector<float>{static_cast<float>(i)});
      expected.push_back(static_cast<float>(i));
    }
    EXPECT_EQ((*out)[1].tensor().shape(), (ConcreteShape{m})) << "M=" << m;
    EXPECT_EQ(floats((*out)[1].tensor()), expected) << "M=" << m;
    // The float64 reference agrees.
    auto reference = graph_eval::evaluate_graph_values(compiled->graph, inputs);
    ASSERT_TRUE(reference.ok()) << reference.status().to_string();
    EXPECT_EQ((*reference)[0].elements().size(), static_cast<size_t>(m));
    EXPECT_EQ(floats((*reference)[1].tensor()), expected);
  }
  // Zero iterations leave an empty sequence, which ConcatFromSequence refuses by name.
  const std::vector<HostValue> zero = {i64(0)};
  auto empty = session->run_values(zero);
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(),
              HasSubstr("dispatch 'd2_concat' (ConcatFromSequence): the sequence is empty"));
  // The tensor-only interfaces refuse the sequence output by name.
  auto tensors = session->run(std::vector<Tensor>{i64(2)});
  ASSERT_FALSE(tensors.ok());
  EXPECT_THAT(tensors.status().message(), HasSubstr("output 0 'seq' is a sequence"));
  EXPECT_FALSE(session->output_shapes(std::vector<Tensor>{i64(2)}).ok());
  std::vector<Tensor> into = {Tensor::create(DType::kF32, {2}).value(),
                              Tensor::create(DType::kF32, {2}).value()};
  EXPECT_THAT(session->run_into(std::vector<Tensor>{i64(2)}, into).message(),
              HasSubstr("output 0 'seq' is a sequence"));
}

TEST(Sequences, SequenceAtOutOfRangeAndWrongFormsAreRunTimeErrors) {
  ModelBuilder m;
  sequence_input(m, "s");
  m.input("p", kInt64, {});
  m.node("SequenceAt", {"s", "p"}, {"y"}, "at");
  m.output("y");
  auto compiled = compile(m);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto session = open(*compiled);
  const HostValue s = f32_sequence({f32({2}, {1, 2}), f32({3}, {3, 4, 5})});
  // The element's dims are bound from the data: [3] here.
  auto out = session->run_values(std::vector<HostValue>{s, i64(-1)});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].tensor().shape(), (ConcreteShape{3}));
  EXPECT_EQ(floats((*out)[0].tensor()), (std::vector<float>{3, 4, 5}));
  auto beyond = session->run_values(std::vector<HostValue>{s, i64(2)});
  ASSERT_FALSE(beyond.ok());
  EXPECT_THAT(beyond.status().message(),
              HasSubstr("(SequenceAt): position 2 is out of range [-2, 1] for a sequence of 2"));
  auto tensor_for_sequence = session->run_values(std::vector<HostValue>{f32({2}, {1, 2}), i64(0)});
  ASSERT_FALSE(tensor_for_sequence.ok());
  EXPECT_THAT(tensor_for_sequence.status().message(),
              HasSubstr("input 0 's': expected a sequence of f32, got f32 [2]"));
  auto wrong_dtype = session->run_values(
      std::vector<HostValue>{HostValue::sequence(DType::kI64, {}).value(), i64(0)});
  ASSERT_FALSE(wrong_dtype.ok());
  EXPECT_THAT(wrong_dtype.status().message(), HasSubstr("got sequence of 0 i64 tensors"));

  // The verifier: a sequence read by a device dispatch, and an unknown form code.
  module::ModuleContents bad = *compiled->module;
  bad.dispatches[0].op_type = "Relu";
  Status device = module::verify_contents(bad);
  ASSERT_FALSE(device.ok());
  EXPECT_THAT(device.message(), HasSubstr("Relu reads or writes a sequence or optional"));
  bad = *compiled->module;
  bad.values[bad.inputs[0]].form = static_cast<ValueForm>(9);
  EXPECT_THAT(module::verify_contents(bad).message(), HasSubstr("invalid form code 9"));
}

}  // namespace
}  // namespace kiln
