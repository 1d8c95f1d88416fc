// Scan at opset 8, spelled out in ops that upgrade exactly. Internal to kiln_onnx; the importer
// runs it before opset conversion.
//
// Scan-8 has a batch axis: every state and scan input has a leading batch dim B, the scan axis is
// axis 1, and an optional sequence_lens input gives each batch entry its own length. ONNX's
// version converter adapts it to Scan-9 by rewriting the graph's declared inputs (dropping the
// batch dim), so the converted model no longer takes its own inputs. kiln writes each Scan-8
// node instead as two nested Loops (which upgrade as they are):
//
//   B = Gather(Shape(x_0), 0)
//   outer Loop over b < B, scan outputs (final states..., scan outputs...):
//     state_j[b], x_j[b] (Gather on axis 0); T = Gather(Shape(x_0[b]), 0)
//     inner Loop over t < T carrying the states: slice_j = x_j[b][t] (or [T-1-t] for direction
//       1), then the Scan's own body; scan outputs stacked on axis 0
//
// so the outputs are [B, ...] final states and [B, T, ...] scan outputs, as Scan-8 says. (Loop
// before opset 11 needs a carried value: each loop also carries an unused int64 scalar.)
// Unimplemented (naming the node): a given sequence_lens. InvalidArgument: a body whose input or
// output counts do not fit the node.
#pragma once

#include <cstdint>

#include "onnx/onnx_pb.h"

#include "kiln/base/status.h"

namespace kiln::onnx_import {

// Rewrites every default-domain Scan of `graph` (bodies included) when `opset` is 8; a no-op
// otherwise.
Status spell_out_legacy_scan(onnx::GraphProto& graph, int64_t opset);

}  // namespace kiln::onnx_import
