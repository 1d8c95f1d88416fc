// The `.kir` IR file: what `kiln import -o model.kir` writes and `kiln compile model.kir` reads.
// A text header a person can read with `head`, then the constants' bytes in one binary blob:
//
//   kiln-ir 1
//   graph "resnet50"
//   opset 17
//   symbols N
//   input "data": f32[N,3,224,224]
//   const "conv0.w": f32[64,3,7,7] offset=0 size=37632
//   node "conv0" Conv in("data": f32[N,3,224,224], "conv0.w": f32[64,3,7,7], -) out("c0":
//   f32[N,64,112,112]) attrs(kernel_shape:ints=[7,7], pads:ints=[3,3,3,3]) origins("conv0") output
//   "y": f32[N,1000] blob 37632 <37632 raw bytes>
//
// Lines:
//   - names (graph, values, nodes, origins, string attributes) are double-quoted; `"` and `\` are
//     escaped with `\`, control bytes as \n \t \r or \xHH; other bytes (UTF-8) are kept;
//   - a type is a dtype name (dtype.h) followed by shape_to_string (shape.h): f32[N,floor((N +
//   1)/2)];
//   - `-` is an absent optional node input;
//   - op types and attribute names are bare when they are made of [A-Za-z0-9_.-], else quoted;
//   - attributes are name:kind=value with kind int, float, string, ints, floats or strings;
//     floats are printed in the shortest form that reads back to the same double ("inf", "nan"
//     included), lists as [a,b];
//   - `symbols` lists every symbol used by any shape, sorted; a shape may use only those;
//   - constants' offsets are relative to the blob's first byte and 64-byte aligned; `size` is
//     exactly the dtype size times the element count; the blob holds exactly `blob` bytes
//     (zero padding between constants) and nothing may follow it;
//   - blank lines and lines starting with `#` are ignored by the reader.
// Order: inputs in graph.inputs() order, constants in value-id order, nodes in node order (each
// value is defined before it is used), outputs in graph.outputs() order. Printing is
// deterministic, so print → parse → print gives identical text and identical constant bytes.
#pragma once

#include <string>
#include <string_view>

#include "kiln/base/status.h"
#include "kiln/ir/graph.h"

namespace kiln::ir {

// The format version this build writes and reads ("kiln-ir 1").
inline constexpr int kKirVersion = 1;

// The `.kir` text. With include_constant_data the result is the whole file (header, "blob N"
// line, raw bytes) as write_kir writes it; without, it ends with "blob N (data omitted)" and is
// for people and logs only (parse_kir refuses it). Works on any graph, even one verify_graph
// rejects (bad ids print as <invalid id K>); erased nodes not yet removed by remove_dead() are
// printed like live ones.
std::string print_graph_text(const Graph& graph, bool include_constant_data);

// Writes the full `.kir` atomically (a temporary file in the same directory, then rename): on
// any error no file, not even a partial one, is left at `path`. Refuses graphs the format cannot
// represent: verify_graph failures, duplicate value or node names, absent node outputs, nodes
// with bodies (control flow), and symbol names with control characters. Errors name the path.
Status write_kir(const Graph& graph, const std::string& path);

// Parses a whole `.kir` file held in memory. The input is untrusted: every error (kInvalidArgument
// for syntax, unknown dtypes, undefined or duplicate names, inconsistent types, bad offsets or
// sizes; kDataLoss for a truncated or overlong blob; kUnimplemented for another format version)
// names the line and what was expected. Constants are copied out of `bytes`.
StatusOr<Graph> parse_kir(std::string_view bytes);

// Reads and parses the file at `path`; errors carry a note naming the path.
StatusOr<Graph> read_kir(const std::string& path);

}  // namespace kiln::ir
