// Dispatches run by kiln::kernels (the portable kernels) on plain row-major buffers: any op the
// kernel library has, in every dtype it accepts. A blocked input (f32, f16 or bf16) is reordered
// to plain first.
#include <fmt/format.h>

#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/kernels/kernel.h"

namespace kiln::hal::cpu {
namespace {

// The dispatch as its op definition sees it: concrete inputs (constants and known values with
// their data), the declared outputs and the attributes.
struct DefinitionCall {
  const kernels::OpDef* def = nullptr;
  std::vector<kernels::ConcreteInput> inputs;
  std::vector<kernels::ConcreteOutput> outputs;
  const Attributes* attributes = nullptr;
};

StatusOr<DefinitionCall> definition_call(const OpReader& op) {
  DefinitionCall call;
  call.def = kernels::find_op_def(op.dispatch().op_type);
  if (call.def == nullptr) {
    return unimplemented("op type '{}' is not supported by the CPU backend", op.dispatch().op_type);
  }
  for (size_t i = 0; i < op.dispatch().inputs.size(); ++i) {
    if (op.input_index(i) < 0) {
      call.inputs.push_back({});
      continue;
    }
    const ValueSpec& v = op.input(i);
    const Tensor* known = v.role == ValueRole::kConstant ? v.constant
                          : v.known_value                ? &*v.known_value
                                                         : nullptr;
    call.inputs.push_back({true, v.dtype, v.shape, known});
  }
  for (size_t i = 0; i < op.output_count(); ++i) {
    call.outputs.push_back({op.output(i).dtype, op.output(i).shape});
  }
  call.attributes = &op.attributes();
  return call;
}

// `make`, when set, replaces the definition's own (a fast path's kernel for the same op).
StatusOr<kernels::Planned> plan(const OpReader& op, kernels::MakeFn make = nullptr) {
  KILN_ASSIGN_OR_RETURN(DefinitionCall call, definition_call(op));
  kernels::OpDef def = *call.def;
  if (make != nullptr) def.make = make;
  return kernels::plan_concrete(def, *call.attributes, call.inputs, op.output_count(),
                                &call.outputs, op.dispatch().data_sizes);
}

class PortableStep : public Step {
 public:
  PortableStep(std::string label, std::unique_ptr<kernels::Kernel> kernel,
               std::vector<kernels::ConstBuffer> inputs, std::vector<BufferRef> input_refs,
               std::vector<kernels::MutableBuffer> outputs, std::vector<BufferRef> output_refs,
               std::vector<ConcreteShape> dims)
      : label_(std::move(label)),
        kernel_(std::move(kernel)),
        inputs_(std::move(inputs)),
        input_refs_(std::move(input_refs)),
        outputs_(std::move(outputs)),
        output_refs_(std::move(output_refs)),
        dims_(std::move(dims)) {}

  Status run(const ExecContext& ctx) override {
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (input_refs_[i].kind != BufferRef::Kind::kFixed || input_refs_[i].fixed != nullptr) {
        inputs_[i].data = ctx.resolve(input_refs_[i]);
      }
    }
    for (size_t i = 0; i < outputs_.size(); ++i) outputs_[i].data = ctx.resolve(output_refs_[i]);
    return kernel_->run(inputs_, outputs_);
  }
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  std::unique_ptr<kernels::Kernel> kernel_;
  std::vector<kernels::ConstBuffer> inputs_;
  std::vector<BufferRef> input_refs_;  // kFixed with null: an absent input
  std::vector<kernels::MutableBuffer> outputs_;
  std::vector<BufferRef> output_refs_;
  std::vector<ConcreteShape> dims_;  // owns the dims the buffers point at
};

}  // namespace

Status check_definition(const OpReader& op) {
  KILN_ASSIGN_OR_RETURN(DefinitionCall call, definition_call(op));
  return kernels::check_concrete(*call.def, *call.attributes, call.inputs, op.output_count(),
                                 &call.outputs, op.dispatch().data_sizes);
}

Status check_portable(const OpReader& op) { return plan(op).status(); }

Status build_portable(ProgramBuilder& b) { return build_kernel(b, nullptr, "portable"); }

Status build_kernel(ProgramBuilder& b, kernels::MakeFn make, std::string_view what) {
  const OpReader& op = b.op();
  KILN_ASSIGN_OR_RETURN(kernels::Planned planned, plan(op, make));
  std::vector<ConcreteShape> dims;
  dims.reserve(op.dispatch().inputs.size() + op.output_count());
  std::vector<kernels::ConstBuffer> inputs;
  std::vector<BufferRef> input_refs;
  const bool dims_only = reads_dims_only(op);
  for (size_t i = 0; i < op.dispatch().inputs.size(); ++i) {
    const int32_t v = op.input_index(i);
    if (v < 0) {
      inputs.push_back({});
      input_refs.push_back(BufferRef::at(nullptr));
      continue;
    }
    const ValueSpec& spec = b.value(v);
    dims.push_back(spec.shape);
    inputs.push_back({spec.dtype, dims.back(), nullptr});
    if (dims_only) {
      input_refs.push_back(BufferRef::at(nullptr));  // its dims only: any layout serves
    } else if (auto type = stored_data_type(spec.dtype)) {
      KILN_ASSIGN_OR_RETURN(BufferRef ref, b.input_as(v, plain_desc(spec.shape, *type)));
      input_refs.push_back(ref);
    } else {
      input_refs.push_back(BufferRef::of_value(v));
    }
  }
  std::vector<kernels::MutableBuffer> outputs;
  std::vector<BufferRef> output_refs;
  for (size_t i = 0; i < op.output_count(); ++i) {
    const int32_t v = op.output_index(i);
    const ValueSpec& spec = b.value(v);
    dims.push_back(spec.shape);
    outputs.push_back({spec.dtype, dims.back(), nullptr});
    if (auto type = stored_data_type(spec.dtype)) {
      KILN_ASSIGN_OR_RETURN(BufferRef ref, b.output(v, plain_desc(spec.shape, *type)));
      output_refs.push_back(ref);
    } else {
      output_refs.push_back(b.plain_output(v));
    }
  }
  b.add(std::make_unique<PortableStep>(b.label(fmt::format("{} {}", what, op.dispatch().op_type)),
                                       std::move(planned.kernel), std::move(inputs),
                                       std::move(input_refs), std::move(outputs),
                                       std::move(output_refs), std::move(dims)));
  return ok_status();
}

}  // namespace kiln::hal::cpu
