#include "kiln/onnx/importer.h"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "onnx/onnx_pb.h"

#include "kiln/base/mapped_file.h"
#include "kiln/onnx/domains.h"
#include "kiln/onnx/graph_builder.h"
#include "kiln/onnx/in_place_weights.h"
#include "kiln/onnx/inline_if.h"
#include "kiln/onnx/legacy_scan.h"
#include "kiln/onnx/node_order.h"
#include "kiln/onnx/opset_upgrade.h"

namespace kiln::onnx_import {
namespace {

namespace fs = std::filesystem;

bool is_default_domain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// protobuf cannot parse a message of 2 GiB or more.
uint64_t effective_limit(const ImportOptions& options) {
  return std::min<uint64_t>(options.max_model_bytes, static_cast<uint64_t>(INT_MAX));
}

// Default-domain nodes, and ai.onnx.preview.training nodes of the ops kiln defines there, pass;
// every other node is listed by domain. An optimizer's name in the default domain is not an ONNX
// op there, so it is listed too (kiln knows its ops by name alone).
Status check_domains(const onnx::ModelProto& model) {
  std::map<std::string, std::vector<std::string>> foreign;
  for (int i = 0; i < model.graph().node_size(); ++i) {
    const onnx::NodeProto& node = model.graph().node(i);
    const bool training = is_training_op(node.op_type());
    if (is_default_domain(node.domain()) ? !training
                                         : (node.domain() == kTrainingDomain && training)) {
      continue;
    }
    std::string name = node.name().empty() ? fmt::format("#{}", i) : "'" + node.name() + "'";
    const std::string domain = is_default_domain(node.domain()) ? "ai.onnx" : node.domain();
    foreign[domain].push_back(fmt::format("node {} ({})", name, node.op_type()));
  }
  for (const auto& entry : model.opset_import()) {
    if (entry.domain() == kTrainingDomain && entry.version() != kTrainingDomainVersion) {
      return unimplemented("model imports {} version {}; kiln supports version {} ({})",
                           kTrainingDomain, entry.version(), kTrainingDomainVersion,
                           fmt::join(kTrainingOps, ", "));
    }
  }
  if (foreign.empty()) return ok_status();
  std::vector<std::string> parts;
  for (const auto& [domain, nodes] : foreign) {
    parts.push_back(fmt::format("{} ({})", domain, fmt::join(nodes, ", ")));
  }
  return unimplemented(
      "model uses operators from non-default domains, which kiln does not "
      "support: {} (of other domains kiln accepts only {} version 1: {})",
      fmt::join(parts, "; "), kTrainingDomain, fmt::join(kTrainingOps, ", "));
}

bool is_body_attribute(const onnx::NodeProto& node, const onnx::AttributeProto& attribute) {
  if (!is_default_domain(node.domain())) return false;
  if (node.op_type() == "Loop" || node.op_type() == "Scan" || node.op_type() == "SequenceMap") {
    return attribute.name() == "body";
  }
  if (node.op_type() == "If")
    return attribute.name() == "then_branch" || attribute.name() == "else_branch";
  return false;
}

// ONNX's version converter dereferences names without checking them (an undefined graph output
// crashes it), so the wiring is checked on the proto before the converter ever sees it. A body
// (Loop, Scan, If) sees the names of the graphs around it; `defined` holds them.
Status check_wiring(const onnx::GraphProto& graph, std::set<std::string> defined = {},
                    int depth = 0) {
  for (const auto& input : graph.input()) defined.insert(input.name());
  for (const auto& tensor : graph.initializer()) defined.insert(tensor.name());
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    std::string where = fmt::format(
        "node {} ({})", node.name().empty() ? fmt::format("#{}", i) : "'" + node.name() + "'",
        node.op_type());
    for (const std::string& input : node.input()) {
      if (!input.empty() && !defined.count(input)) {
        return invalid_argument(
            "{}: input '{}' is not a graph input, an initializer or the output of any "
            "node",
            where, input);
      }
    }
    for (const auto& attribute : node.attribute()) {
      if (attribute.type() == onnx::AttributeProto::GRAPH ||
          attribute.type() == onnx::AttributeProto::GRAPHS || attribute.has_g() ||
          attribute.graphs_size() > 0) {
        if (!is_body_attribute(node, attribute) || !attribute.has_g()) {
          return unimplemented(
              "{}: attribute '{}' holds a subgraph; of the control-flow ops kiln supports "
              "only Loop, Scan, If and SequenceMap",
              where, attribute.name());
        }
        if (depth >= ir::kMaxBodyDepth) {
          return invalid_argument("{}: bodies nested more than {} deep", where, ir::kMaxBodyDepth);
        }
        Status body = check_wiring(attribute.g(), defined, depth + 1);
        if (!body.ok()) {
          return std::move(body).with_note(fmt::format("in {} of {}", attribute.name(), where));
        }
      }
    }
    for (const std::string& output : node.output()) {
      if (output.empty()) continue;
      if (!defined.insert(output).second) {
        return invalid_argument("{}: output '{}' is defined twice", where, output);
      }
    }
  }
  for (const auto& output : graph.output()) {
    if (!defined.count(output.name())) {
      return invalid_argument("graph output '{}' is not produced by any node, input or initializer",
                              output.name());
    }
  }
  return ok_status();
}

// The declared types of the graph's inputs and outputs that are not tensors, by name.
std::map<std::string, onnx::TypeProto> non_tensor_types(const onnx::GraphProto& graph) {
  std::map<std::string, onnx::TypeProto> types;
  for (const auto* infos : {&graph.input(), &graph.output()}) {
    for (const auto& info : *infos) {
      if (info.has_type() && !info.type().has_tensor_type()) types[info.name()] = info.type();
    }
  }
  return types;
}

void restore_types(onnx::GraphProto& graph, const std::map<std::string, onnx::TypeProto>& types) {
  for (auto* infos : {graph.mutable_input(), graph.mutable_output()}) {
    for (auto& info : *infos) {
      auto it = types.find(info.name());
      if (it != types.end()) *info.mutable_type() = it->second;
    }
  }
}

// The default domain's opset; nullopt for a model without default-domain nodes that declares none.
StatusOr<std::optional<int64_t>> default_opset(const onnx::ModelProto& model) {
  std::optional<int64_t> opset;
  for (const auto& entry : model.opset_import()) {
    if (!is_default_domain(entry.domain())) continue;
    if (opset && *opset != entry.version()) {
      return invalid_argument("model declares the default opset twice ({} and {})", *opset,
                              entry.version());
    }
    opset = entry.version();
  }
  if (!opset) {
    // A model of ai.onnx.preview.training ops alone (ONNX's own optimizer tests) need not
    // declare the default domain: it has nothing to convert.
    const auto& nodes = model.graph().node();
    if (!nodes.empty() && std::none_of(nodes.begin(), nodes.end(), [](const auto& node) {
          return is_default_domain(node.domain());
        })) {
      return std::optional<int64_t>();
    }
    return invalid_argument("model declares no opset for the default ONNX domain");
  }
  if (*opset < 1) return invalid_argument("model declares default opset {}", *opset);
  return std::optional<int64_t>(*opset);
}

// ONNX's version converter round-trips the whole model through its in-memory IR, copying every
// initializer's data several times (seconds and gigabytes for a BERT-sized model), and drops
// external-data references. Its adapters never read weights: they move attributes into inputs
// and read small shape-like tensors at most. So the initializers stored externally or holding
// more than kWeightBytes go aside for the conversion, leaving stubs with their name, type and
// dims, and come back by name afterwards.
constexpr size_t kWeightBytes = 4096;

size_t inline_bytes(const onnx::TensorProto& t) {
  return t.raw_data().size() + sizeof(float) * static_cast<size_t>(t.float_data_size()) +
         sizeof(double) * static_cast<size_t>(t.double_data_size()) +
         sizeof(int64_t) * static_cast<size_t>(t.int64_data_size()) +
         sizeof(uint64_t) * static_cast<size_t>(t.uint64_data_size()) +
         sizeof(int32_t) * static_cast<size_t>(t.int32_data_size());
}

std::map<std::string, onnx::TensorProto> set_weights_aside(onnx::GraphProto& graph) {
  std::map<std::string, onnx::TensorProto> aside;
  for (onnx::TensorProto& tensor : *graph.mutable_initializer()) {
    if (tensor.data_location() != onnx::TensorProto::EXTERNAL &&
        inline_bytes(tensor) <= kWeightBytes) {
      continue;
    }
    onnx::TensorProto stub;
    stub.set_name(tensor.name());
    stub.set_data_type(tensor.data_type());
    *stub.mutable_dims() = tensor.dims();
    stub.Swap(&tensor);
    aside[tensor.name()] = std::move(stub);
  }
  return aside;
}

StatusOr<ir::Graph> import_model(onnx::ModelProto model, const std::string& model_dir,
                                 const ImportOptions& options) {
  KILN_RETURN_IF_ERROR(check_domains(model));
  KILN_ASSIGN_OR_RETURN(std::optional<int64_t> declared, default_opset(model));
  const int64_t opset = declared.value_or(options.target_opset);
  if (opset > options.target_opset) {
    return invalid_argument("model opset {} is newer than the target opset {}; kiln only upgrades",
                            opset, options.target_opset);
  }
  KILN_RETURN_IF_ERROR(inline_if_nodes(*model.mutable_graph(), opset));
  KILN_RETURN_IF_ERROR(sort_nodes_topologically(*model.mutable_graph()));
  // All unsupported ops in one error, before the converter can fail on the first of them.
  KILN_RETURN_IF_ERROR(check_supported_ops(model.graph(), options.target_opset));
  KILN_RETURN_IF_ERROR(check_wiring(model.graph()));
  // The converter drops the types it cannot represent (sequences, optionals): kept and put back.
  const std::map<std::string, onnx::TypeProto> kept_types = non_tensor_types(model.graph());
  KILN_RETURN_IF_ERROR(spell_out_legacy_scan(*model.mutable_graph(), opset));
  spell_out_legacy_axis_ops(model, opset);
  if (opset < options.target_opset) {
    std::map<std::string, onnx::TensorProto> weights = set_weights_aside(*model.mutable_graph());
    KILN_ASSIGN_OR_RETURN(model, upgrade_opset(std::move(model), opset, options.target_opset));
    restore_types(*model.mutable_graph(), kept_types);
    for (auto& tensor : *model.mutable_graph()->mutable_initializer()) {
      if (auto it = weights.find(tensor.name()); it != weights.end()) tensor.Swap(&it->second);
    }
  }
  return build_graph(model.graph(), options.target_opset, model_dir, options);
}

// A parsed model must have a graph: a truncated or foreign file often parses as an empty message.
StatusOr<onnx::ModelProto> with_graph(onnx::ModelProto model, const std::string& source) {
  if (!model.has_graph()) {
    return data_loss(
        "{} is not a valid ONNX model: it has no graph (truncated, corrupt or not "
        "an ONNX file)",
        source);
  }
  return model;
}

Status parse_failed(const std::string& source) {
  return data_loss(
      "{} is not a valid ONNX model: protobuf parsing failed (truncated or "
      "corrupt)",
      source);
}

StatusOr<onnx::ModelProto> parse_model(const void* data, size_t size, const ImportOptions& options,
                                       const std::string& source) {
  if (size > effective_limit(options)) {
    return out_of_range("{} is {} bytes, over the limit of {} bytes", source, size,
                        effective_limit(options));
  }
  onnx::ModelProto model;
  if (!model.ParseFromArray(data, static_cast<int>(size))) return parse_failed(source);
  return with_graph(std::move(model), source);
}

// Initializers whose raw_data holds more than this many bytes are read from the model file
// straight into kiln's tensors (in_place_weights.h).
constexpr size_t kInPlaceWeightBytes = 4096;

StatusOr<ir::Graph> import_parsed(onnx::ModelProto model, const std::string& model_dir,
                                  const ImportOptions& options, const std::string& source) {
  auto graph = import_model(std::move(model), model_dir, options);
  if (!graph.ok()) return std::move(graph).status().with_note(fmt::format("importing {}", source));
  return graph;
}

}  // namespace

StatusOr<ir::Graph> import_file(const std::string& path, const ImportOptions& options) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    return not_found("model file '{}' does not exist or is not a file", path);
  uint64_t size = fs::file_size(path, ec);
  if (ec) return not_found("cannot read model file '{}': {}", path, ec.message());
  std::string source = fmt::format("'{}'", path);
  if (size > effective_limit(options)) {
    return out_of_range("model file {} is {} bytes, over the limit of {} bytes", source, size,
                        effective_limit(options));
  }
  KILN_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  const std::span<const std::byte> bytes(file.data(), file.size());
  const fs::path dir = fs::path(path).parent_path();
  // The references name the file from its directory, where external data must stay: a model
  // reached through a symlink into another directory is parsed whole instead.
  std::error_code canonical_error;
  const bool in_its_directory = fs::canonical(path, canonical_error).parent_path() ==
                                fs::canonical(dir.empty() ? fs::path(".") : dir, canonical_error);
  std::optional<std::string> structure =
      in_its_directory && !canonical_error
          ? refer_to_weights_in_place(bytes, fs::path(path).filename().string(),
                                      kInPlaceWeightBytes)
          : std::nullopt;
  auto model = structure ? parse_model(structure->data(), structure->size(), options, source)
                         : parse_model(bytes.data(), bytes.size(), options, source);
  if (!model.ok()) return std::move(model).status();
  structure.reset();
  auto graph =
      import_parsed(std::move(model).value(), dir.empty() ? "." : dir.string(), options, source);
  // The weights were read from the file by name after it was mapped: a file rewritten meanwhile
  // may have given some of them another file's bytes.
  if (graph.ok()) KILN_RETURN_IF_ERROR(file.check_unchanged());
  return graph;
}

StatusOr<ir::Graph> import_bytes(const void* data, size_t size, const std::string& model_dir,
                                 const ImportOptions& options) {
  const std::string source = "model bytes";
  KILN_ASSIGN_OR_RETURN(onnx::ModelProto model, parse_model(data, size, options, source));
  return import_parsed(std::move(model), model_dir, options, source);
}

}  // namespace kiln::onnx_import
