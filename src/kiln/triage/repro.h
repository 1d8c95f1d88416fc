// The minimal repro of a diverging dispatch: its ONNX nodes as a standalone model, the
// reference's inputs and expected outputs for it, the module compiled from it, and the exact
// `kiln run` command that shows the divergence.
//
// Files in `dir`: repro.onnx (passes the ONNX checker), input_<i>.npy (the subgraph's inputs in
// its graph-input order), expected_<i>.npy, repro.kmod, repro.sh (compile + run, runnable from
// any directory), README.txt (what was found, and the command).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/ir/graph.h"
#include "kiln/module/module.h"
#include "kiln/tooling/comparator.h"
#include "kiln/triage/fault_spec.h"
#include "kiln/triage/reference.h"

namespace kiln::triage {

struct ReproFiles {
  std::string dir, onnx, kmod, script;
  std::vector<std::string> inputs, expected;
  std::string command;  // the `kiln run` command line, KILN_FAULT prefix included when active
};

struct ReproRequest {
  const ir::Graph* graph = nullptr;                // the unoptimized import
  const module::ModuleContents* module = nullptr;  // the module that diverged
  int32_t dispatch = 0;
  const ReferenceValues* reference = nullptr;
  std::span<const Tensor> model_inputs;  // graph inputs (graph.inputs() order)
  std::vector<Tolerance> tolerances;     // per dispatch output
  std::string dir;
  std::string kiln = "kiln";       // how the command names the kiln binary
  std::string summary;             // a line for README.txt
  std::optional<FaultSpec> fault;  // planted in the run that diverged
  std::string device = "cpu";      // the device that diverged (the command's --device)
};

// Writes the files above. Errors: an origin that is not a node of the graph, a subgraph input or
// output the reference lacks, export or compile failures, file system errors (naming the path).
StatusOr<ReproFiles> write_repro(const ReproRequest& request);

// `fault` as a KILN_FAULT value, rewritten to select the dispatch by its first ONNX node name (so
// that it also applies in the repro's own module); nullopt when there is no fault or it selects
// another dispatch.
std::optional<std::string> fault_for_repro(const std::optional<FaultSpec>& fault,
                                           const module::ModuleContents& module, int32_t dispatch);

}  // namespace kiln::triage
