#include "kiln/kernels/kernel.h"

#include <algorithm>
#include <mutex>

#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"

namespace kiln::kernels {

int64_t ConstBuffer::element_count() const { return product(dims); }
int64_t MutableBuffer::element_count() const { return product(dims); }

namespace {

ConcreteShape constant_dims(const Shape& shape) {
  ConcreteShape dims;
  for (const DimExpr& d : shape) dims.push_back(d.constant_value().value_or(0));
  return dims;
}

std::vector<OpDef> build_table() {
  std::vector<OpDef> table;
  register_all(table);
  std::sort(table.begin(), table.end(), [](const OpDef& a, const OpDef& b) {
    return a.op_type != b.op_type ? a.op_type < b.op_type : a.since_version < b.since_version;
  });
  return table;
}

// The definitions of `op_type`, oldest first.
std::span<const OpDef> versions_of(std::string_view op_type) {
  std::span<const OpDef> table = all_op_defs();
  auto first = std::lower_bound(table.begin(), table.end(), op_type,
                                [](const OpDef& d, std::string_view t) { return d.op_type < t; });
  auto last = first;
  while (last != table.end() && last->op_type == op_type) ++last;
  return {first, last};
}

}  // namespace

ConcreteShape MakeArgs::input_dims(size_t i) const { return constant_dims(inputs[i]->shape); }
ConcreteShape MakeArgs::output_dims(size_t i) const { return constant_dims(outputs[i].shape); }

std::span<const OpDef> all_op_defs() {
  static const std::vector<OpDef> table = build_table();
  return table;
}

const OpDef* find_op_def(std::string_view op_type) {
  std::span<const OpDef> versions = versions_of(op_type);
  return versions.empty() ? nullptr : &versions.back();
}

const OpDef* find_op_def(std::string_view op_type, int64_t opset) {
  const OpDef* found = nullptr;
  for (const OpDef& def : versions_of(op_type)) {
    if (def.since_version <= opset) found = &def;
  }
  return found;
}

double multiply_adds(std::string_view op_type, const Attributes& attributes,
                     std::span<const ConcreteShape* const> inputs,
                     std::span<const ConcreteShape* const> outputs) {
  const OpDef* def = find_op_def(op_type);
  if (def == nullptr || def->multiply_adds == nullptr) return 0;
  return def->multiply_adds(attributes, inputs, outputs);
}

StatusOr<std::vector<int64_t>> compute_data_sizes(const OpDef& op, const Attributes& attributes,
                                                  std::span<const Tensor> inputs,
                                                  size_t output_count) {
  if (op.data_sizes == nullptr) {
    return unimplemented("op type '{}' has no data-dependent sizes", op.op_type);
  }
  InferArgs args{attributes, {}, {}, output_count, {}, {}, {}, {}, {}, {}};
  for (const Tensor& t : inputs) {
    if (t.empty_storage()) {  // an absent optional input
      args.inputs.emplace_back(std::nullopt);
    } else {
      args.inputs.emplace_back(ValueType{t.dtype(), shape_from_concrete(t.shape())});
    }
    args.constants.push_back(nullptr);
  }
  while (!args.inputs.empty() && !args.inputs.back()) {
    args.inputs.pop_back();
    args.constants.pop_back();
  }
  // Only the checks matter here: each size infer asks for is a placeholder.
  args.data_dim = [](size_t index) -> StatusOr<DimExpr> {
    return DimExpr::symbol(fmt::format("size{}", index));
  };
  KILN_RETURN_IF_ERROR(op.infer(args));
  return op.data_sizes(attributes, inputs);
}

namespace {

// Runs infer on concrete inputs and checks its outputs against `expected_outputs`; leaves infer's
// arguments in `args` and the concrete outputs in `outputs`.
Status infer_concrete(const OpDef& op, std::span<const ConcreteInput> inputs, size_t output_count,
                      const std::vector<ConcreteOutput>* expected_outputs,
                      std::span<const int64_t> data_sizes, InferArgs& args,
                      std::vector<ConcreteOutput>& outputs) {
  args.data_dim = [data_sizes](size_t index) -> StatusOr<DimExpr> {
    if (index >= data_sizes.size()) {
      return invalid_argument("needs data-dependent size {}, but {} were bound for it", index,
                              data_sizes.size());
    }
    return DimExpr(data_sizes[index]);
  };
  for (const ConcreteInput& in : inputs) {
    if (!in.present) {
      args.inputs.emplace_back(std::nullopt);
      args.constants.push_back(nullptr);
    } else {
      args.inputs.emplace_back(ValueType{in.dtype, shape_from_concrete(in.dims)});
      args.constants.push_back(in.constant);
    }
  }
  // Trailing absent inputs do not count, as in ONNX.
  while (!args.inputs.empty() && !args.inputs.back()) {
    args.inputs.pop_back();
    args.constants.pop_back();
  }
  KILN_RETURN_IF_ERROR(op.infer(args));
  if (args.outputs.size() != output_count) {
    return internal_error("{} inferred {} outputs for {} declared", op.op_type, args.outputs.size(),
                          output_count);
  }
  for (size_t i = 0; i < args.outputs.size(); ++i) {
    ConcreteOutput out{args.outputs[i].dtype, {}};
    for (const DimExpr& d : args.outputs[i].shape) {
      auto value = d.constant_value();
      if (!value) {
        return internal_error("output {} has symbolic dim '{}' for concrete inputs", i,
                              d.to_string());
      }
      if (*value < 0) return invalid_argument("output {} would have negative dim {}", i, *value);
      out.dims.push_back(*value);
    }
    if (expected_outputs != nullptr) {
      if (i >= expected_outputs->size()) {
        return invalid_argument("has {} outputs, expected {}", expected_outputs->size(),
                                args.outputs.size());
      }
      const ConcreteOutput& want = (*expected_outputs)[i];
      if (want.dtype != out.dtype || want.dims != out.dims) {
        return invalid_argument("output {} is declared {} {} but the op gives {} {}", i,
                                dtype_name(want.dtype), shape_to_string(want.dims),
                                dtype_name(out.dtype), shape_to_string(out.dims));
      }
    }
    outputs.push_back(std::move(out));
  }
  return ok_status();
}

}  // namespace

Status check_concrete(const OpDef& op, const Attributes& attributes,
                      std::span<const ConcreteInput> inputs, size_t output_count,
                      const std::vector<ConcreteOutput>* expected_outputs,
                      std::span<const int64_t> data_sizes) {
  InferArgs args{attributes, {}, {}, output_count, {}, {}, {}, {}, {}, {}};
  std::vector<ConcreteOutput> outputs;
  return infer_concrete(op, inputs, output_count, expected_outputs, data_sizes, args, outputs);
}

StatusOr<Planned> plan_concrete(const OpDef& op, const Attributes& attributes,
                                std::span<const ConcreteInput> inputs, size_t output_count,
                                const std::vector<ConcreteOutput>* expected_outputs,
                                std::span<const int64_t> data_sizes) {
  InferArgs args{attributes, {}, {}, output_count, {}, {}, {}, {}, {}, {}};
  Planned planned;
  KILN_RETURN_IF_ERROR(infer_concrete(op, inputs, output_count, expected_outputs, data_sizes, args,
                                      planned.outputs));
  if (op.make == nullptr) return unimplemented("op type '{}' has no kernel", op.op_type);
  MakeArgs make_args{attributes, std::move(args.inputs), std::move(args.constants),
                     std::move(args.outputs)};
  KILN_ASSIGN_OR_RETURN(planned.kernel, op.make(make_args));
  return planned;
}

}  // namespace kiln::kernels
