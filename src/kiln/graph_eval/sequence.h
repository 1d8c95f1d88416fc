// Internal to kiln_graph_eval: shape inference and reference evaluation of the sequence and
// optional ops (base/sequence_ops.h, whose semantics both the reference and the runtime run) and of
// Identity on a sequence or optional. SequenceMap, which has a body, is control flow
// (graph_eval/control_flow.h).
//
// Inference gives each output its form (ir::Value::form), dtype and, for a sequence or optional,
// its tensors' rank when known (ir::Value::element_rank). A tensor taken out of a sequence or an
// optional (SequenceAt, ConcatFromSequence, OptionalGetElement) has the rank the sequence's
// tensors have, which must be known (an error names the node otherwise), and every dim is a
// data-dependent size of the node (ir::Node::data_symbols): the runtime binds them from the
// tensor it gets. Errors name the node: an input of the wrong form or dtype, a position that is
// not one integer element, attributes out of range.
#pragma once

#include <span>
#include <vector>

#include "kiln/base/host_value.h"
#include "kiln/base/status.h"
#include "kiln/ir/graph.h"

namespace kiln::graph_eval {

// A value's type as inference gives it: a tensor's dtype and dims, or a sequence's or optional's
// form, dtype and element rank (ir::Value); shared with the control-flow inference.
struct FlowType {
  DType dtype = DType::kF32;
  Shape shape;
  ValueForm form = ValueForm::kTensor;
  int64_t element_rank = -1;
};
FlowType type_of(const ir::Value& v);
// Gives `v` the type `type`, with no known element values.
void set_type(ir::Value& v, FlowType type);

// ir::Value::element_rank of a sequence that holds nothing yet (SequenceEmpty, an empty optional):
// any rank its tensors later have fits.
inline constexpr int64_t kAnyRank = -2;
// The element rank of a sequence holding the tensors of two sequences of these element ranks.
int64_t merge_element_rank(int64_t a, int64_t b);

// Whether `node` runs as a sequence op: one of base/sequence_ops.h's without a body, or Identity
// on a sequence or optional.
bool is_sequence_node(const ir::Graph& graph, const ir::Node& node);

Status infer_sequence_node(ir::Graph& graph, ir::NodeId id);

StatusOr<std::vector<HostValue>> evaluate_sequence_node(const ir::Graph& graph, ir::NodeId id,
                                                        std::span<const HostValue> inputs);

}  // namespace kiln::graph_eval
