// Op definitions: each ONNX op kiln supports is defined here, once (an OpDef, in one file of this
// folder; families.h lists which): attribute parsing and checks, the symbolic shape rule,
// data-dependent sizes, the portable kernel (which is also the float64 reference), its cost, and
// the opsets it covers. One definition serves every caller, so an op is written once:
//   - the compiler's shape inference (graph_eval::Registry) calls `infer` with symbolic shapes;
//   - the reference evaluator (graph_eval::evaluate_graph) calls `make` and runs the kernel on
//   float64
//     copies of floating-point inputs (the "float64 accumulation" of the oracle);
//   - the CPU backend (hal/cpu) calls `infer` with concrete shapes to check a dispatch, then
//     `make`, and runs the kernel on plain row-major buffers in the tensors' own dtypes.
// The ONNX backend test data (tests/conformance) is the independent oracle for these ops.
//
// Semantics are those of the newest ONNX opset kiln imports to (17); the importer converts older
// models. This library depends on base and shape only (no IR), so the runtime can link it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/shape/shape.h"

namespace kiln::kernels {

// A value's element type and (symbolic) shape.
struct ValueType {
  DType dtype = DType::kF32;
  Shape shape;
};

// What infer sees of one node.
struct InferArgs {
  const Attributes& attributes;
  // One per node input; nullopt for an absent optional input.
  std::vector<std::optional<ValueType>> inputs;
  // One per node input; non-null when that input is a constant (e.g. Reshape's shape).
  std::vector<const Tensor*> constants;
  // Number of outputs the node declares (an absent output still counts).
  size_t output_count = 1;
  // Filled by infer: one per declared output.
  std::vector<ValueType> outputs;
  // Shape computation. Per input: the element values (row-major) of a small tensor when
  // they are known as expressions of the symbols (e.g. Shape(x) of a symbolic x); null or empty
  // when unknown. Read them with input_dim_values() (infer_util.h), which also covers constants.
  std::vector<const std::vector<DimExpr>*> values;
  // Filled by infer for outputs whose element values it can express (Shape, and ops that move
  // such values: Gather, Concat, Slice, Squeeze, Unsqueeze, Cast, arithmetic). Empty, or one per
  // declared output (nullopt: unknown).
  std::vector<std::optional<std::vector<DimExpr>>> output_values;
  // Data-dependent output sizes (NonZero's count, Compress's selected length, TopK's k when it is
  // not known at compile time). An op whose output size depends on input data it cannot see asks
  // data_dim(i) for its i-th such size, in a fixed order (i = 0, 1, ...). The compiler answers
  // with a fresh symbol that the runtime binds before the node runs, from the values
  // OpDef::data_sizes computes; concrete planning answers with the bound value. Null: nobody
  // can answer, and the op reports that the data must be known at compile time.
  std::function<StatusOr<DimExpr>(size_t index)> data_dim;
  // Shape computations in floating point (int(S * 0.5)): per input, the power of two that divides
  // `values` (value i is values[i] / denominator, a dyadic fraction that f32 holds exactly); empty
  // or 1 for whole values. Read them with known_fraction_values(); ops that do not handle
  // fractions see such an input as unknown. Filled per output like output_values.
  std::vector<int64_t> value_denominators;
  std::vector<int64_t> output_value_denominators;
};

// Checks input count, dtypes, ranks, attributes and shapes, and fills args.outputs. Errors say
// what is wrong ("input 1 'W' must have rank 4, got 3"); callers add the node note. Unimplemented
// names an unsupported detail (an attribute value, a dtype, a symbolic dim kiln cannot reason
// about). Must not crash or allocate without bound on any input, including hostile attributes.
using InferFn = Status (*)(InferArgs& args);

// A read-only buffer: dtype, concrete dims and row-major data.
struct ConstBuffer {
  DType dtype = DType::kF32;
  std::span<const int64_t> dims;
  const std::byte* data = nullptr;

  int64_t element_count() const;
  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(data);
  }
};

// A writable buffer.
struct MutableBuffer {
  DType dtype = DType::kF32;
  std::span<const int64_t> dims;
  std::byte* data = nullptr;

  int64_t element_count() const;
  template <typename T>
  T* as() const {
    return reinterpret_cast<T*>(data);
  }
};

// A kernel made for one concrete set of input and output types; reusable across runs.
class Kernel {
 public:
  virtual ~Kernel() = default;
  // Buffers have exactly the dtypes and dims given to make() (absent optional inputs: a buffer
  // with null data). Outputs never alias inputs. Data-dependent errors (an index out of range,
  // integer division by zero) are reported as a Status naming the element.
  virtual Status run(std::span<const ConstBuffer> inputs,
                     std::span<const MutableBuffer> outputs) const = 0;
};

// What make sees: infer's arguments with concrete shapes, and infer's outputs.
struct MakeArgs {
  const Attributes& attributes;
  std::vector<std::optional<ValueType>> inputs;  // all dims constant
  std::vector<const Tensor*> constants;
  std::vector<ValueType> outputs;  // as infer gave them, all dims constant

  // Concrete dims of input i / output i (the caller guarantees they are constant).
  ConcreteShape input_dims(size_t i) const;
  ConcreteShape output_dims(size_t i) const;
};
using MakeFn = StatusOr<std::unique_ptr<Kernel>> (*)(const MakeArgs& args);
// For ops that ask InferArgs::data_dim: the value of each data-dependent size, in data_dim's
// order, computed from the node's input tensors (one per node input, plain row-major; a
// default-constructed Tensor for an absent optional input). Errors name the input whose data is
// out of range (e.g. TopK's k larger than the axis).
using DataSizesFn = StatusOr<std::vector<int64_t>> (*)(const Attributes& attributes,
                                                       std::span<const Tensor> inputs);

// Multiply-adds of one run of the op for these concrete dims (per input: null when absent), for
// the CPU thread policy and the profiler's FLOP counts. An estimate; ops that do not reduce have
// none (0).
using MultiplyAddsFn = double (*)(const Attributes& attributes,
                                  std::span<const ConcreteShape* const> inputs,
                                  std::span<const ConcreteShape* const> outputs);

struct OpDef {
  std::string_view op_type;
  InferFn infer;
  MakeFn make;
  // Bit i set: input i must be known at compile time (a constant or a shape computation), e.g.
  // Reshape's shape. Tools that turn graph inputs into constants (kiln test-suite on ONNX
  // backend cases) use it to find them.
  uint32_t compile_time_inputs = 0;
  // Set for ops whose output sizes can depend on data (see InferArgs::data_dim).
  DataSizesFn data_sizes = nullptr;
  // First ONNX opset (default domain) whose semantics this definition has. An op whose semantics
  // changed (Softmax at 13) has one definition per version; lookups that know the graph's opset
  // pick the newest with since_version <= opset, like ONNX's own schema registry.
  int64_t since_version = 1;
  MultiplyAddsFn multiply_adds = nullptr;
};

// Every op definition, sorted by op type, then since_version. Built on first use (thread-safe).
std::span<const OpDef> all_op_defs();
// The newest definition of `op_type` (the semantics of kiln's target opset, which the importer
// converts every model to and which modules carry); nullptr when kiln does not define it.
const OpDef* find_op_def(std::string_view op_type);
// The definition that applies at `opset`: the largest since_version <= opset; nullptr when none.
const OpDef* find_op_def(std::string_view op_type, int64_t opset);
// OpDef::multiply_adds of the newest definition of `op_type`; 0 when it has none.
double multiply_adds(std::string_view op_type, const Attributes& attributes,
                     std::span<const ConcreteShape* const> inputs,
                     std::span<const ConcreteShape* const> outputs);

// Concrete planning, shared by hal/cpu and the reference evaluator: runs infer on concrete
// shapes, checks that the outputs it gives match `expected_outputs` when that is non-null (dtype
// and dims; the error names the output), and makes the kernel.
struct ConcreteInput {
  bool present = false;
  DType dtype = DType::kF32;
  ConcreteShape dims;
  const Tensor* constant = nullptr;
};
struct ConcreteOutput {
  DType dtype = DType::kF32;
  ConcreteShape dims;
};
struct Planned {
  std::vector<ConcreteOutput> outputs;
  std::unique_ptr<Kernel> kernel;
};
// `data_sizes` answers InferArgs::data_dim (the values the runtime bound for this node); asking
// for one that is not there is an error.
// check_concrete does the checks alone, without making the kernel: what a backend asks before
// its own "can I run this dispatch" question.
Status check_concrete(const OpDef& op, const Attributes& attributes,
                      std::span<const ConcreteInput> inputs, size_t output_count,
                      const std::vector<ConcreteOutput>* expected_outputs,
                      std::span<const int64_t> data_sizes = {});
StatusOr<Planned> plan_concrete(const OpDef& op, const Attributes& attributes,
                                std::span<const ConcreteInput> inputs, size_t output_count,
                                const std::vector<ConcreteOutput>* expected_outputs,
                                std::span<const int64_t> data_sizes = {});

// The op's data-dependent sizes for these input tensors (OpDef::data_sizes), after its infer
// has accepted their dtypes, ranks and the attributes: data_sizes may rely on that. Errors name
// what infer or data_sizes refused; an op without data_sizes is an error.
StatusOr<std::vector<int64_t>> compute_data_sizes(const OpDef& op, const Attributes& attributes,
                                                  std::span<const Tensor> inputs,
                                                  size_t output_count);

}  // namespace kiln::kernels
