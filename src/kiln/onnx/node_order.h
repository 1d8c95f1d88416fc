// Topological order of an ONNX graph's nodes. Internal to kiln_onnx; the importer runs it after
// inlining If and before any other check, so that everything downstream (the version converter,
// kiln's graph builder and shape inference) sees each value defined before it is read.
//
// ONNX requires nodes in topological order, but ONNX Runtime sorts them itself and some
// exporters (fp16 converters among them) ship graphs whose nodes are out of order.
#pragma once

#include "onnx/onnx_pb.h"

#include "kiln/base/status.h"

namespace kiln::onnx_import {

// Reorders `graph`'s nodes so that each comes after the nodes producing its inputs. The order is
// stable: a node moves only when it reads a value produced later, and a graph already in order
// is left untouched (node names generated from positions stay the same). Inputs that no node
// produces (graph inputs, initializers, or undefined names, which the importer reports later)
// impose no order. A value produced twice orders its readers after its first producer; the
// importer refuses such graphs later. Bodies (the graph attributes of Loop, Scan and If) are
// sorted likewise, and a node comes after the producers of the outer values its bodies read.
//
// Errors: InvalidArgument when the nodes form a cycle, naming one cycle node by node with the
// values that connect them ("node 'a' (Add) reads 'v' from node 'b' (Mul), which reads 'w' from
// node 'a' (Add)"); unnamed nodes are named by their position ("#3").
Status sort_nodes_topologically(onnx::GraphProto& graph);

}  // namespace kiln::onnx_import
