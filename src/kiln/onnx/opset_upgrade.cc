#include "kiln/onnx/opset_upgrade.h"

#include <cstring>
#include <exception>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "onnx/checker.h"
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

// ONNX's shape inference, which the upgrade falls back on, divides by these without checking
// them (a zero stride is a division by zero inside libonnx).
constexpr const char* kDivisorAttributes[] = {"strides", "dilations", "kernel_shape", "blocksize"};

// Attributes the converter and ONNX's shape inference read unchecked: each needs a type, and
// the divisors above must be >= 1.
Status check_attributes(const onnx::NodeProto& node, int index) {
  auto where = [&] {
    return fmt::format("node {} ({})",
                       node.name().empty() ? fmt::format("#{}", index) : "'" + node.name() + "'",
                       node.op_type());
  };
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.type() == onnx::AttributeProto::UNDEFINED) {
      return invalid_argument("{}: attribute '{}' has no type", where(), a.name());
    }
    for (const char* divisor : kDivisorAttributes) {
      if (a.name() != divisor) continue;
      for (int64_t v : a.ints()) {
        if (v < 1) {
          return invalid_argument("{}: attribute '{}' values must be >= 1, got {}", where(),
                                  a.name(), v);
        }
      }
      if (a.type() == onnx::AttributeProto::INT && a.i() < 1) {
        return invalid_argument("{}: attribute '{}' must be >= 1, got {}", where(), a.name(),
                                a.i());
      }
    }
  }
  return ok_status();
}

// The converter's adapters index node inputs without checking how many there are (an Upsample
// without its scales crashes it), so every default-domain node's input and output counts are
// checked against its schema at the model's opset first.
Status check_nodes_before_conversion(const onnx::GraphProto& graph, int64_t opset) {
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (!is_default_domain(node.domain())) continue;
    const onnx::OpSchema* schema =
        onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(opset), "");
    if (schema == nullptr) continue;  // unknown ops were reported before conversion
    // Scan-8 has a batch axis and sequence_lens; ONNX's converter rewrites the graph's declared
    // inputs when it adapts it, so the model would no longer take its own inputs.
    if (node.op_type() == "Scan" && opset < 9) {
      return unimplemented(
          "node {} (Scan): Scan before opset 9 (with a batch axis and sequence_lens) is not "
          "supported; re-export the model at opset 9 or later",
          node.name().empty() ? fmt::format("#{}", i) : "'" + node.name() + "'");
    }
    auto count_error = [&](const char* what, int count, int min, int max) -> Status {
      if (count >= min && count <= max) return ok_status();
      const std::string range = min == max ? fmt::format("{}", min)
                                : max == std::numeric_limits<int>::max()
                                    ? fmt::format("at least {}", min)
                                    : fmt::format("{} to {}", min, max);
      return invalid_argument("node {} ({}): has {} {}s; {} at opset {} takes {}",
                              node.name().empty() ? fmt::format("#{}", i) : "'" + node.name() + "'",
                              node.op_type(), count, what, node.op_type(), opset, range);
    };
    KILN_RETURN_IF_ERROR(
        count_error("input", node.input_size(), schema->min_input(), schema->max_input()));
    KILN_RETURN_IF_ERROR(
        count_error("output", node.output_size(), schema->min_output(), schema->max_output()));
    KILN_RETURN_IF_ERROR(check_attributes(node, i));
    // Bodies (Loop, Scan, If) are converted with the model: their nodes are checked alike.
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (attribute.has_g())
        KILN_RETURN_IF_ERROR(check_nodes_before_conversion(attribute.g(), opset));
    }
  }
  return ok_status();
}

// Upsample (opsets 7-9) and Resize-10 map output coordinate x to input coordinate x / scale and
// pick the floor for nearest; the converter turns them into Resize without saying so, which
// opset 11 would read as half_pixel / round_prefer_floor. Every Resize of a model that started
// below opset 11 came from one of them, so each gets the old meaning spelled out.
void keep_legacy_resize_semantics(onnx::GraphProto& graph) {
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    if (!is_default_domain(node.domain()) || node.op_type() != "Resize") continue;
    bool has_transform = false, has_nearest_mode = false;
    for (const onnx::AttributeProto& a : node.attribute()) {
      has_transform = has_transform || a.name() == "coordinate_transformation_mode";
      has_nearest_mode = has_nearest_mode || a.name() == "nearest_mode";
    }
    auto add_string = [&](const char* name, const char* value) {
      onnx::AttributeProto* a = node.add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(value);
    };
    if (!has_transform) add_string("coordinate_transformation_mode", "asymmetric");
    if (!has_nearest_mode) add_string("nearest_mode", "floor");
  }
}

// ONNX's shape inference, only where every initializer passes ONNX's tensor checks and every
// default-domain node passes its schema's checks at `opset` (input and output counts, attribute
// names, types and required attributes). libonnx's inference functions read out of bounds on
// nodes that fail those (fuzz_onnx_import found three crashes in convPoolShapeInference: a zero
// stride, a nameless untyped initializer, misspelled attributes). ONNX's whole-model checker is
// not used: it also refuses legacy models this fallback exists for (outputs without shapes).
// Returns whether shapes were inferred.
bool infer_shapes_if_well_formed(onnx::ModelProto& model, int64_t opset) {
  try {
    onnx::checker::CheckerContext context;
    context.set_ir_version(static_cast<int>(model.ir_version()));
    for (const onnx::TensorProto& tensor : model.graph().initializer()) {
      if (tensor.name().empty()) return false;
      onnx::checker::check_tensor(tensor, context);
    }
    for (const onnx::NodeProto& node : model.graph().node()) {
      if (!is_default_domain(node.domain())) continue;
      const onnx::OpSchema* schema =
          onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(opset), "");
      if (schema == nullptr) return false;
      schema->Verify(node);
    }
    onnx::shape_inference::InferShapes(model);
    return true;
  } catch (...) {
    return false;
  }
}

// The rank of value `name` where the graph declares it (inputs, value_info, outputs), else -1.
int declared_rank(const onnx::GraphProto& graph, const std::string& name) {
  auto rank_in = [&](const auto& values) {
    for (const onnx::ValueInfoProto& v : values) {
      if (v.name() == name && v.type().has_tensor_type() && v.type().tensor_type().has_shape()) {
        return v.type().tensor_type().shape().dim_size();
      }
    }
    return -1;
  };
  for (const auto* values : {&graph.input(), &graph.value_info(), &graph.output()}) {
    if (int r = rank_in(*values); r >= 0) return r;
  }
  return -1;
}

const onnx::TensorProto* find_initializer(const onnx::GraphProto& graph, const std::string& name) {
  for (const onnx::TensorProto& t : graph.initializer()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

// PRelu before opset 7 applied a 1-D slope of C > 1 elements per channel (dim 1 of X), where
// opset 7's unidirectional broadcasting aligns it with X's last dim instead; the converter does
// not adapt this. Each such slope initializer is given a copy shaped [C, 1, ..., 1] (X's rank
// as the graph declares it or ONNX shape inference finds it; without one the slope is left as
// it is), so the upgraded model keeps the meaning the exporter intended.
void adapt_legacy_prelu_slopes(onnx::ModelProto& model, int64_t opset) {
  onnx::GraphProto* graph = model.mutable_graph();
  auto needs_adapting = [&](const onnx::NodeProto& node) {
    if (!is_default_domain(node.domain()) || node.op_type() != "PRelu" || node.input_size() != 2) {
      return false;
    }
    const onnx::TensorProto* slope = find_initializer(*graph, node.input(1));
    return slope != nullptr && slope->dims_size() == 1 && slope->dims(0) > 1;
  };
  bool any = false, ranks_known = true;
  for (const onnx::NodeProto& node : graph->node()) {
    if (!needs_adapting(node)) continue;
    any = true;
    ranks_known = ranks_known && declared_rank(*graph, node.input(0)) >= 0;
  }
  if (!any) return;
  if (!ranks_known) infer_shapes_if_well_formed(model, opset);
  for (int i = 0; i < graph->node_size(); ++i) {
    onnx::NodeProto* node = graph->mutable_node(i);
    if (!needs_adapting(*node)) continue;
    const int rank = declared_rank(*graph, node->input(0));
    if (rank < 3) continue;  // rank 2: dim 1 is the last dim, both readings agree
    std::string name = fmt::format("{}_kiln_per_channel_rank{}", node->input(1), rank);
    if (find_initializer(*graph, name) == nullptr) {
      onnx::TensorProto copy = *find_initializer(*graph, node->input(1));
      copy.set_name(name);
      for (int d = 2; d < rank; ++d) copy.add_dims(1);
      *graph->add_initializer() = std::move(copy);
    }
    node->set_input(1, name);
  }
}

// A Softmax, LogSoftmax or Hardmax with one named input and one named output (others are left
// for the importer's checks to refuse).
bool is_axis_coercing_op(const onnx::NodeProto& node) {
  return is_default_domain(node.domain()) &&
         (node.op_type() == "Softmax" || node.op_type() == "LogSoftmax" ||
          node.op_type() == "Hardmax") &&
         node.input_size() == 1 && node.output_size() == 1 && !node.input(0).empty() &&
         !node.output(0).empty();
}

// The node's `axis` attribute, added with `fallback` when absent; null when it is there but not
// an int (the importer reports that later).
onnx::AttributeProto* axis_attribute(onnx::NodeProto& node, int64_t fallback) {
  for (onnx::AttributeProto& a : *node.mutable_attribute()) {
    if (a.name() != "axis") continue;
    const bool is_int = a.type() == onnx::AttributeProto::INT ||
                        (a.type() == onnx::AttributeProto::UNDEFINED && a.has_i());
    return is_int ? &a : nullptr;
  }
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(fallback);
  return a;
}

// Names not yet used by any value or node of the graph.
class FreshNames {
 public:
  explicit FreshNames(const onnx::GraphProto& graph) {
    for (const auto& v : graph.input()) used_.insert(v.name());
    for (const auto& v : graph.output()) used_.insert(v.name());
    for (const auto& t : graph.initializer()) used_.insert(t.name());
    for (const onnx::NodeProto& node : graph.node()) {
      used_.insert(node.name());
      for (const std::string& name : node.input()) used_.insert(name);
      for (const std::string& name : node.output()) used_.insert(name);
    }
  }
  std::string operator()(const std::string& base) {
    std::string name = base;
    for (int n = 2; used_.count(name); ++n) name = fmt::format("{}_{}", base, n);
    used_.insert(name);
    return name;
  }

 private:
  std::set<std::string> used_;
};

onnx::NodeProto make_node(const std::string& op_type, const std::string& name,
                          std::initializer_list<std::string> inputs, const std::string& output) {
  onnx::NodeProto node;
  node.set_op_type(op_type);
  node.set_name(name);
  for (const std::string& input : inputs) node.add_input(input);
  node.add_output(output);
  return node;
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

// The opset 6 -> 7 broadcasting adapters (Add, Mul, Gemm, ...) refuse any declared dim that is
// not a number ("Dimension is a param instead of an int"), so an old model with a dynamic batch
// failed to convert. They only check broadcastability and count ranks, so the conversion is
// retried on a copy whose symbolic and unknown dims stand in as distinct large numbers (a
// symbol keeps one number wherever it occurs). Should a stand-in number reach a tensor of the
// converted model (an adapter that writes shapes into the graph), the result is refused. The
// converted graph gets the model's own input and output declarations back and no value_info.
constexpr int64_t kStandInBase = 1000003, kStandInStep = 1009;

bool holds_stand_in(const onnx::TensorProto& t, int64_t next) {
  auto is_stand_in = [&](int64_t v) {
    return v >= kStandInBase && v < next && (v - kStandInBase) % kStandInStep == 0;
  };
  if (t.data_type() == onnx::TensorProto::INT64) {
    for (int64_t v : t.int64_data()) {
      if (is_stand_in(v)) return true;
    }
    const std::string& raw = t.raw_data();
    for (size_t at = 0; at + sizeof(int64_t) <= raw.size(); at += sizeof(int64_t)) {
      int64_t v;
      std::memcpy(&v, raw.data() + at, sizeof v);
      if (is_stand_in(v)) return true;
    }
  }
  if (t.data_type() == onnx::TensorProto::INT32) {
    for (int32_t v : t.int32_data()) {
      if (is_stand_in(v)) return true;
    }
  }
  return false;
}

StatusOr<onnx::ModelProto> convert_with_stand_in_dims(const onnx::ModelProto& model,
                                                      int64_t target) {
  onnx::ModelProto copy = model;
  std::map<std::string, int64_t> by_symbol;
  int64_t next = kStandInBase;
  auto stand_in = [&](google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* infos) {
    for (onnx::ValueInfoProto& info : *infos) {
      if (!info.type().has_tensor_type() || !info.type().tensor_type().has_shape()) continue;
      for (auto& dim :
           *info.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim()) {
        if (dim.has_dim_value()) continue;
        int64_t value = next;
        if (dim.has_dim_param()) value = by_symbol.emplace(dim.dim_param(), next).first->second;
        if (value == next) next += kStandInStep;
        dim.set_dim_value(value);
      }
    }
  };
  onnx::GraphProto* graph = copy.mutable_graph();
  stand_in(graph->mutable_input());
  stand_in(graph->mutable_output());
  stand_in(graph->mutable_value_info());
  if (next == kStandInBase) return invalid_argument("no symbolic dims to stand in for");
  KILN_ASSIGN_OR_RETURN(onnx::ModelProto converted, convert(copy, target));
  onnx::GraphProto* out = converted.mutable_graph();
  for (const onnx::TensorProto& t : out->initializer()) {
    if (holds_stand_in(t, next))
      return invalid_argument("a stand-in dim reached initializer '{}'", t.name());
  }
  for (const onnx::NodeProto& node : out->node()) {
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_t() && holds_stand_in(a.t(), next)) {
        return invalid_argument("a stand-in dim reached node '{}' ({})", node.name(),
                                node.op_type());
      }
    }
  }
  if (out->input_size() != model.graph().input_size() ||
      out->output_size() != model.graph().output_size()) {
    return invalid_argument("the converter changed the graph's inputs or outputs");
  }
  for (int i = 0; i < out->input_size(); ++i) {
    if (out->input(i).name() != model.graph().input(i).name())
      return invalid_argument("inputs renamed");
    *out->mutable_input(i) = model.graph().input(i);
  }
  for (int i = 0; i < out->output_size(); ++i) {
    if (out->output(i).name() != model.graph().output(i).name())
      return invalid_argument("outputs renamed");
    *out->mutable_output(i) = model.graph().output(i);
  }
  out->clear_value_info();
  return converted;
}

// The conversion itself; on failure, the single step that fails and the nodes it adapts.
StatusOr<onnx::ModelProto> convert_all_steps(onnx::ModelProto model, int64_t from, int64_t target) {
  auto whole = convert(model, target);
  if (whole.ok()) return whole;
  // Some adapters (Add/Gemm 6 -> 7 broadcasting) need the shapes of values such as Constant
  // outputs, which old exporters leave undeclared; ONNX's shape inference supplies them.
  // Inference is only a help here; the step-wise retry below reports the real failure.
  infer_shapes_if_well_formed(model, from);
  whole = convert(model, target);
  if (whole.ok()) return whole;
  if (from < 7) {
    whole = convert_with_stand_in_dims(model, target);
    if (whole.ok()) return whole;
  }
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

}  // namespace

void spell_out_legacy_axis_ops(onnx::ModelProto& model, int64_t opset) {
  if (opset >= 13 || opset < 5) return;
  onnx::GraphProto* graph = model.mutable_graph();
  bool any = false, ranks_known = true;
  for (const onnx::NodeProto& node : graph->node()) {
    if (!is_axis_coercing_op(node)) continue;
    any = true;
    ranks_known = ranks_known && declared_rank(*graph, node.input(0)) >= 0;
  }
  if (!any) return;
  // Inference only to learn ranks: the model keeps the value_info it declared.
  const auto declared_value_info = graph->value_info();
  if (!ranks_known) {
    onnx::ModelProto copy = model;
    if (infer_shapes_if_well_formed(copy, opset))
      *graph->mutable_value_info() = copy.graph().value_info();
  }
  FreshNames fresh(*graph);
  std::vector<onnx::NodeProto> nodes;
  nodes.reserve(graph->node_size());
  for (int i = 0; i < graph->node_size(); ++i) {
    onnx::NodeProto& node = *graph->mutable_node(i);
    if (!is_axis_coercing_op(node)) {
      nodes.push_back(std::move(node));
      continue;
    }
    onnx::AttributeProto* axis = axis_attribute(node, 1);
    if (axis == nullptr) {
      nodes.push_back(std::move(node));
      continue;
    }
    const int64_t old_axis = axis->i();
    const int rank = declared_rank(*graph, node.input(0));
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(-1);
    if (old_axis == -1 || (rank >= 0 && old_axis == rank - 1)) {
      nodes.push_back(std::move(node));  // already the last axis: both readings agree
      continue;
    }
    // Flatten(x, axis) -> op(axis=-1) -> Reshape(Shape(x)): the old meaning, spelled out.
    const std::string base = node.name().empty() ? node.output(0) : node.name();
    const std::string x = node.input(0), y = node.output(0);
    const std::string flat = fresh(y + "/kiln_2d"), rows = fresh(y + "/kiln_rows"),
                      shape = fresh(x + "/kiln_shape");
    onnx::NodeProto flatten = make_node("Flatten", fresh(base + "/kiln_flatten"), {x}, flat);
    onnx::AttributeProto* flatten_axis = flatten.add_attribute();
    flatten_axis->set_name("axis");
    flatten_axis->set_type(onnx::AttributeProto::INT);
    flatten_axis->set_i(old_axis);
    node.set_input(0, flat);
    node.set_output(0, rows);
    nodes.push_back(std::move(flatten));
    nodes.push_back(std::move(node));
    nodes.push_back(make_node("Shape", fresh(base + "/kiln_shape"), {x}, shape));
    nodes.push_back(make_node("Reshape", fresh(base + "/kiln_reshape"), {rows, shape}, y));
  }
  graph->clear_node();
  for (onnx::NodeProto& node : nodes) *graph->add_node() = std::move(node);
  *graph->mutable_value_info() = declared_value_info;
}

StatusOr<onnx::ModelProto> upgrade_opset(onnx::ModelProto model, int64_t from, int64_t target) {
  KILN_RETURN_IF_ERROR(check_nodes_before_conversion(model.graph(), from));
  prepare(model);
  if (from < 7) adapt_legacy_prelu_slopes(model, from);
  auto upgraded = convert_all_steps(std::move(model), from, target);
  if (upgraded.ok() && from < 11) keep_legacy_resize_semantics(*upgraded->mutable_graph());
  return upgraded;
}

}  // namespace kiln::onnx_import
