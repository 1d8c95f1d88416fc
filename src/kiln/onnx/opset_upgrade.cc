#include "kiln/onnx/opset_upgrade.h"

#include <exception>
#include <string>
#include <vector>

#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"
#include "onnx/version_converter/convert.h"

namespace kiln::onnx_import {
namespace {

bool is_default_domain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// The converter wants only the opsets it converts; unused foreign domains were already allowed
// by the importer. IR version 3 requires every initializer to be a graph input, and the converter
// fails on models that omit them, so it sees IR 4+ (the importer ignores ir_version).
void prepare(onnx::ModelProto& model) {
  auto* opsets = model.mutable_opset_import();
  for (int i = opsets->size() - 1; i >= 0; --i) {
    if (!is_default_domain(opsets->Get(i).domain())) opsets->DeleteSubrange(i, 1);
  }
  if (model.ir_version() < 4) model.set_ir_version(4);
}

StatusOr<onnx::ModelProto> convert(const onnx::ModelProto& model, int64_t target) {
  try {
    return onnx::version_conversion::ConvertVersion(model, static_cast<int>(target));
  } catch (const std::exception& e) {
    return invalid_argument("{}", e.what());
  } catch (...) {
    return invalid_argument("unknown exception from the ONNX version converter");
  }
}

// Nodes whose op has a new schema version exactly at `version`: the ones the converter adapts.
std::string changing_nodes(const onnx::GraphProto& graph, int64_t version) {
  std::vector<std::string> names;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (!is_default_domain(node.domain())) continue;
    const onnx::OpSchema* schema =
        onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(version), "");
    if (schema == nullptr || schema->since_version() != version) continue;
    std::string name = node.name().empty() ? fmt::format("#{}", i) : "'" + node.name() + "'";
    names.push_back(fmt::format("node {} ({})", name, node.op_type()));
    if (names.size() == 10) {
      names.push_back("...");
      break;
    }
  }
  if (names.empty()) return "no node's op changes at this step";
  return fmt::format("ops changing at this step: {}", fmt::join(names, ", "));
}

}  // namespace

StatusOr<onnx::ModelProto> upgrade_opset(onnx::ModelProto model, int64_t from, int64_t target) {
  prepare(model);
  auto whole = convert(model, target);
  if (whole.ok()) return whole;
  // Some adapters (Add/Gemm 6 -> 7 broadcasting) need the shapes of values such as Constant
  // outputs, which old exporters leave undeclared; ONNX's shape inference supplies them.
  try {
    onnx::shape_inference::InferShapes(model);
  } catch (...) {
    // Inference is only a help here; the step-wise retry below reports the real failure.
  }
  whole = convert(model, target);
  if (whole.ok()) return whole;
  // Only on failure: redo it one opset at a time to find the step that fails.
  onnx::ModelProto current = std::move(model);
  for (int64_t version = from; version < target; ++version) {
    auto step = convert(current, version + 1);
    if (!step.ok()) {
      return invalid_argument(
          "ONNX version converter failed upgrading opset {} -> {} (converting {} -> {}): {}; {}",
          version, version + 1, from, target, step.status().message(),
          changing_nodes(current.graph(), version + 1));
    }
    current = std::move(step).value();
  }
  // Step-wise succeeded where the whole conversion failed; keep the step-wise result.
  return current;
}

}  // namespace kiln::onnx_import
