// Small queries shared by the fusion passes.
#pragma once

#include <optional>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::passes {

// The single node that reads `value`, if exactly one does and the value is not a graph output.
std::optional<ir::NodeId> sole_consumer(const ir::Graph& graph,
                                        const std::vector<std::vector<ir::NodeId>>& consumers,
                                        ir::ValueId value);

// The sole_consumer of node `id`'s only output, when it has op type `op`.
std::optional<ir::NodeId> sole_consumer_of_type(
    const ir::Graph& graph, const std::vector<std::vector<ir::NodeId>>& consumers, ir::NodeId id,
    const char* op);

// Makes `into` produce `absorbed`'s (single) output instead of its own, records the absorbed
// node's origins, and erases `absorbed`. The caller has already moved any inputs it needs.
void absorb_successor(ir::Graph& graph, ir::NodeId into, ir::NodeId absorbed);

// The Add that is the only reader of `y`, with the other value it adds to y.
struct AddAfter {
  ir::NodeId add;
  ir::ValueId other;
};
std::optional<AddAfter> sole_add_after(const ir::Graph& graph,
                                       const std::vector<std::vector<ir::NodeId>>& consumers,
                                       ir::ValueId y);

// Node `id` (a Conv or MatMul with at most 3 inputs) takes `after`'s addend as its kiln residual
// (input 3, inputs 2 and up padded with absent ones) and the Add's place.
void take_residual(ir::Graph& graph, ir::NodeId id, const AddAfter& after);

// Puts `fused` in place of `nodes` (a matched pattern whose last node produces the fused
// output, so it follows everything the pattern reads and the graph stays in topological order):
// `fused` takes every node's origins, the last node's place, and the others are erased.
void replace_with_fused(ir::Graph& graph, const std::vector<ir::NodeId>& nodes, ir::Node fused);

// Dims equal as expressions, or assumed equal by shape inference (an FPN's lateral conv and the
// upsampled level above: the Add's broadcast recorded `2*floor(H/2) == H`), so the dynamic graph
// fuses where the graph with bound sizes, whose dims are equal numbers, does.
bool same_or_assumed_shape(const ir::Graph& graph, const Shape& a, const Shape& b);

}  // namespace kiln::passes
