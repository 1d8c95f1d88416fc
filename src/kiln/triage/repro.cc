#include "kiln/triage/repro.h"

#include <sys/stat.h>

#include <filesystem>
#include <map>

#include "kiln/base/file_util.h"
#include "kiln/compiler/pipeline.h"
#include "kiln/onnx/exporter.h"
#include "kiln/onnx/importer.h"
#include "kiln/tooling/tensor_io.h"

namespace kiln::triage {
namespace {

std::string shell_quote(const std::string& text) {
  const bool plain = std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("/._-=:@,+").find(c) != std::string_view::npos;
  });
  if (plain && !text.empty()) return text;
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::optional<std::string> fault_for_repro(const std::optional<FaultSpec>& fault,
                                           const module::ModuleContents& module, int32_t dispatch) {
  if (!fault) return std::nullopt;
  const module::Dispatch& d = module.dispatches[dispatch];
  hal::DispatchSpec spec{d.name,    d.op_type, &d.attributes, d.inputs,
                         d.outputs, dispatch,  d.origins,     {}};
  if (!fault->matches(spec, dispatch)) return std::nullopt;
  const std::string node = d.origins.empty() ? d.name : d.origins.front();
  return fmt::format("dispatch:{}:{}", node, fault->kind_text());
}

StatusOr<ReproFiles> write_repro(const ReproRequest& request) {
  namespace fs = std::filesystem;
  const ir::Graph& graph = *request.graph;
  const module::ModuleContents& module = *request.module;
  const module::Dispatch& dispatch = module.dispatches[request.dispatch];
  ReproFiles files;
  files.dir = fs::absolute(request.dir).lexically_normal().string();
  std::error_code ec;
  fs::create_directories(files.dir, ec);
  if (ec) return invalid_argument("cannot create '{}': {}", files.dir, ec.message());

  std::map<std::string, ir::NodeId> by_name;
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    by_name.emplace(graph.nodes()[n].name, static_cast<ir::NodeId>(n));
  std::vector<ir::NodeId> nodes;
  for (const std::string& origin : dispatch.origins) {
    auto it = by_name.find(origin);
    if (it == by_name.end()) {
      return not_found("dispatch '{}' comes from ONNX node '{}', which the model does not have",
                       dispatch.name, origin);
    }
    nodes.push_back(it->second);
  }
  if (nodes.empty()) return invalid_argument("dispatch '{}' records no ONNX nodes", dispatch.name);
  std::sort(nodes.begin(), nodes.end());
  const ir::Node& last = graph.node(by_name.at(dispatch.origins.back()));
  std::vector<ir::ValueId> outputs;
  for (size_t i = 0; i < dispatch.outputs.size() && i < last.outputs.size(); ++i)
    outputs.push_back(last.outputs[i]);

  files.onnx = files.dir + "/repro.onnx";
  const std::string name = fmt::format("repro_{}", dispatch.origins.front());
  KILN_RETURN_IF_ERROR(onnx_import::export_subgraph(graph, nodes, outputs, name, files.onnx));

  // The repro's inputs, in the order its import gives them.
  KILN_ASSIGN_OR_RETURN(ir::Graph sub, onnx_import::import_file(files.onnx));
  auto reference_value = [&](const std::string& value) -> StatusOr<Tensor> {
    if (auto it = request.reference->values.find(value); it != request.reference->values.end())
      return it->second;
    for (size_t i = 0; i < graph.inputs().size() && i < request.model_inputs.size(); ++i) {
      if (graph.value(graph.inputs()[i]).name == value) return request.model_inputs[i];
    }
    return not_found("the reference has no tensor '{}' for the repro", value);
  };
  std::string command = fmt::format("{} run {}", shell_quote(request.kiln),
                                    shell_quote("--module=" + files.dir + "/repro.kmod"));
  if (request.device != "cpu") command += " " + shell_quote("--device=" + request.device);
  for (size_t i = 0; i < sub.inputs().size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Tensor tensor, reference_value(sub.value(sub.inputs()[i]).name));
    files.inputs.push_back(fmt::format("{}/input_{}.npy", files.dir, i));
    KILN_RETURN_IF_ERROR(write_tensor_file(files.inputs.back(), tensor));
    command += " " + shell_quote("--input=@" + files.inputs.back());
  }
  for (size_t i = 0; i < sub.outputs().size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Tensor tensor, reference_value(sub.value(sub.outputs()[i]).name));
    files.expected.push_back(fmt::format("{}/expected_{}.npy", files.dir, i));
    KILN_RETURN_IF_ERROR(write_tensor_file(files.expected.back(), tensor));
    command += " " + shell_quote("--expected_output=@" + files.expected.back());
  }
  // `kiln run` takes one tolerance for all outputs: the loosest of the layers', so that the
  // command fails only where the triage did.
  Tolerance loosest = request.tolerances.empty() ? Tolerance{} : request.tolerances.front();
  for (const Tolerance& t : request.tolerances) {
    loosest.atol = std::max(loosest.atol, t.atol);
    loosest.rtol = std::max(loosest.rtol, t.rtol);
  }
  command += fmt::format(" --atol={:.6g} --rtol={:.6g}", loosest.atol, loosest.rtol);
  if (auto fault = fault_for_repro(request.fault, module, request.dispatch)) {
    command = fmt::format("KILN_FAULT={} {}", shell_quote(*fault), command);
  }
  files.command = command;

  files.kmod = files.dir + "/repro.kmod";
  auto contents = compiler::compile(std::move(sub), {});
  if (!contents.ok()) return std::move(contents).status().with_note("compiling the repro");
  KILN_RETURN_IF_ERROR(module::write_module(*contents, files.kmod));

  files.script = files.dir + "/repro.sh";
  const std::string script = fmt::format("#!/bin/sh\n# {}\nset -e\n{} compile {} -o {}\n{}\n",
                                         request.summary, shell_quote(request.kiln),
                                         shell_quote(files.onnx), shell_quote(files.kmod), command);
  KILN_RETURN_IF_ERROR(write_file_atomically(files.script, script));
  ::chmod(files.script.c_str(), 0755);
  KILN_RETURN_IF_ERROR(write_file_atomically(
      files.dir + "/README.txt",
      fmt::format("{}\n\nONNX nodes: {}\nThe divergence, standalone:\n  {}\n", request.summary,
                  fmt::join(dispatch.origins, ", "), command)));
  return files;
}

}  // namespace kiln::triage
