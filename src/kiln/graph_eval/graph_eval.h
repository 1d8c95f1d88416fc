// IR glue for the op definitions (kiln/kernels/kernel.h): shape inference over a graph
// (infer_node, infer_graph) and its float64 reference evaluation (evaluate_graph, evaluate_node),
// through a registry that finds each node's definition at the graph's opset. No op is defined
// here; each is defined once, in kernels/.
//
// kiln extensions to ONNX ops produced by the fusion passes (documented per op in kernels/):
//   Conv: optional 4th input "residual" (same shape as the output) added after bias, and
//         attribute "kiln_activation" ("relu", or "clip" with kiln_activation_min/max; see
//         kernels/activation.h) applied last: y = act(conv(x,w)+b+residual).
//   BatchNormalization: attribute "kiln_activation" = "relu" applied last.
// kiln's form of an ONNX attribute that kiln's Attributes cannot hold (set by the importer):
//   ConstantOfShape: ONNX's one-element tensor `value` becomes attribute "value" (an int for
//         integer and bool dtypes, u64 as its two's-complement int64; a float otherwise) and
//         "kiln_value_dtype" (the dtype name, e.g. "i32"). Absent: f32 0.
// ONNX models may not use attribute names starting with "kiln_" (the importer rejects them).
//
// Versioning: an op whose semantics changed across ONNX opsets (Softmax, LogSoftmax and Hardmax
// at 13) has one definition per version (kernels::OpDef::since_version); lookups that know the
// graph's opset pick the newest definition with since_version <= opset.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/host_value.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/ir/graph.h"
#include "kiln/kernels/kernel.h"

namespace kiln::graph_eval {

using ValueType = kernels::ValueType;
using kernels::OpDef;

// The symbol infer_node gives node `node_name`'s data-dependent size `index`.
std::string data_symbol_name(std::string_view node_name, size_t index);

// Op definitions by op type and version.
class Registry {
 public:
  // Adds a definition; replaces one with the same op_type and since_version.
  void add(const OpDef& def);
  // The newest definition of `op_type` (any opset); nullptr when unknown.
  const OpDef* find(std::string_view op_type) const;
  // The definition that applies at `opset`: the largest since_version <= opset; nullptr when none.
  const OpDef* find(std::string_view op_type, int64_t opset) const;
  // Distinct op types, sorted.
  std::vector<std::string> op_types() const;

 private:
  std::map<std::string, std::map<int64_t, OpDef>, std::less<>> defs_;
};

// The process-wide registry: every definition of kernels::all_op_defs() (built on first use,
// thread-safe).
const Registry& default_registry();

// Runs inference for one node and writes dtypes/shapes onto its output values (absent outputs,
// kAbsent, are skipped), and adds what it assumed to graph.assumptions (kiln/shape/assumption.h)
// with the node as origin. Ops are looked up at graph.opset. Errors carry "in node 'X' (Op)".
Status infer_node(ir::Graph& graph, ir::NodeId id, const Registry& registry = default_registry());
// Runs inference for every node in order, rebuilding graph.assumptions. Errors carry
// "in node 'X' (Op)".
Status infer_graph(ir::Graph& graph, const Registry& registry = default_registry());
// Lists every op type in the graph that the registry lacks, as "Op (node 'a', node 'b')"; empty
// if all are supported.
std::vector<std::string> unsupported_ops(const ir::Graph& graph,
                                         const Registry& registry = default_registry());

// Reference evaluation of the whole graph. `inputs` are in graph.inputs() order; each must have
// its graph input's dtype and rank, constant dims must match, and symbolic dims must bind
// consistently (N is the same wherever it occurs). Constants come from Value::constant. Returns
// the graph outputs. When `intermediates` is non-null, every tensor computed is stored there by
// id. Errors carry "in node 'X' (Op)"; a graph with a sequence or optional input or output is an
// error here (evaluate_graph_values takes them).
StatusOr<std::vector<Tensor>> evaluate_graph(const ir::Graph& graph, std::span<const Tensor> inputs,
                                             std::map<ir::ValueId, Tensor>* intermediates = nullptr,
                                             const Registry& registry = default_registry());
// evaluate_graph for a graph whose inputs or outputs may be sequences or optionals
// (ir::Value::form): each input must have its graph input's form and dtype (and a tensor its
// dims, as above). Returns the graph outputs.
StatusOr<std::vector<HostValue>> evaluate_graph_values(
    const ir::Graph& graph, std::span<const HostValue> inputs,
    const Registry& registry = default_registry());
// Evaluates a single node given its input tensors (one per node input; a default-constructed
// Tensor for an absent optional input). Every op re-checks its inputs' concrete shapes with its
// infer function first, so bad tensors give a Status, never a crash.
StatusOr<std::vector<Tensor>> evaluate_node(const ir::Graph& graph, ir::NodeId id,
                                            std::span<const Tensor> inputs,
                                            const Registry& registry = default_registry());

}  // namespace kiln::graph_eval
