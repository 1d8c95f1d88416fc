// Descriptions of a module's dispatches, as files a person can read: what `kiln compile
// --dump-dispatches=DIR` writes (symbolic shapes, ONNX origins, fused ops) and what `kiln run
// --trace=DIR` writes on top (concrete shapes, the kernels and oneDNN primitives chosen for them,
// timings and value statistics).
//
// Layout of DIR:
//   index.txt              one line per dispatch: index, name, op, output shapes, origins
//   index.json             {"model", "symbols", "bindings", "dispatches": [{"index", "name",
//                           "op_type", "origins", "file"}]}
//   <stem>.json            one per dispatch (stem from dispatch_file_stem): index, name, op_type,
//                          origins [{"name", "op_type"?}], fused [text], attributes, inputs and
//                          outputs [{"name", "kind", "dtype", "shape", "concrete"?}], kernels
//                          [text] (after a run), bindings (after a run), plus any extra fields
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/base/status.h"
#include "kiln/module/module.h"

namespace kiln::triage {

// ONNX node name -> op type, for origins (from the imported graph); may be empty.
using OriginOps = std::map<std::string, std::string>;

// What a run at concrete shapes adds to the symbolic description.
struct DispatchRunInfo {
  Bindings bindings;
  std::vector<ConcreteShape> value_shapes;        // per module value
  std::vector<std::vector<std::string>> kernels;  // per dispatch (Session::describe_dispatches)
  std::vector<nlohmann::ordered_json> extra;      // per dispatch, merged into its object; optional
};

// "d012_resnetv17_stage1_conv0_fwd": the zero-padded index and the dispatch's first origin (or
// name), with characters outside [A-Za-z0-9._-] replaced by '_'.
std::string dispatch_file_stem(const module::ModuleContents& module, size_t dispatch);

// The JSON object described above for dispatch `d`; `run` may be null (compile time).
nlohmann::ordered_json describe_dispatch(const module::ModuleContents& module, size_t d,
                                         const OriginOps& origin_ops, const DispatchRunInfo* run);

// Creates `dir` (and parents) if needed and writes the files above, each atomically. Errors name
// the path.
Status write_dispatch_dump(const std::string& dir, const module::ModuleContents& module,
                           const OriginOps& origin_ops, const DispatchRunInfo* run);

}  // namespace kiln::triage
