// How triage lines kiln's dispatches up with a reference: which reference tensor each dispatch
// output corresponds to, and the tolerance each layer is held to.
//
// Mapping through fusion: a dispatch stands for the ONNX nodes in its origins, in order; its
// output is the output of the LAST origin node (a Conv+BatchNormalization+Add+Relu dispatch
// yields the Relu's output). Outputs of the other origins are never materialized by kiln and are
// not compared.
//
// Per-layer tolerance: activations differ in scale by orders of magnitude between layers, so a
// fixed atol is either blind early or noisy late. Each layer gets
//   atol = atol_floor + scale * max|expected| (over finite expected values),   rtol = rtol
// and the strict comparator (tooling/comparator.h) applies |a - e| <= atol + rtol * |e| per
// element, with NaN/Inf in kiln's output where the reference is finite always failing.
#pragma once

#include <string>
#include <vector>

#include "kiln/base/tensor.h"
#include "kiln/ir/graph.h"
#include "kiln/module/module.h"
#include "kiln/tooling/comparator.h"

namespace kiln::triage {

struct LayerTolerance {
  double atol_floor = 1e-5;
  double rtol = 1e-4;
  double scale = 1e-4;  // fraction of the layer's largest |expected| added to atol
};

// The tolerance for one layer whose reference output's largest finite |value| is
// `expected_max_abs` (TensorStats::max_abs). Errors (invalid argument) for a negative or NaN
// setting.
StatusOr<Tolerance> layer_tolerance(const LayerTolerance& settings, double expected_max_abs);

// Per module value: the name of the reference tensor it corresponds to. For a dispatch output,
// the matching output of the last origin node when `graph` (the unoptimized import) has that
// node, else the value's own name; for any other value, its own name.
std::vector<std::string> reference_names(const module::ModuleContents& module,
                                         const ir::Graph* graph);

// Checks that `module` was compiled from `graph`: the same graph inputs (names, dtypes, ranks) and
// outputs (names), and every dispatch origin a node of `graph`. `what` names the module in the
// error (e.g. "--against module 'x.kmod'").
Status check_module_matches_graph(const module::ModuleContents& module, const ir::Graph& graph,
                                  const std::string& what);

}  // namespace kiln::triage
