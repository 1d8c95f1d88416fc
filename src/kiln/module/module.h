// The compiled module: what `kiln compile` writes and the runtime loads. It holds the dispatch
// list (one entry per kernel launch, with the ONNX nodes it came from), the shape program (every
// value's dims as symbolic expressions over the module's symbols), and the constants (weights)
// in a 64-byte aligned segment that the loader maps rather than copies.
//
// File layout (little-endian):
//   [0..8)    magic "KILNMOD\0"
//   [8..12)   u32 format version (kFormatVersion)
//   [12..16)  u32 flags (0)
//   [16..24)  u64 metadata offset   [24..32) u64 metadata size   (flatbuffer, schema module.fbs)
//   [32..40)  u64 constants offset  [40..48) u64 constants size  (64-byte aligned)
//   [48..56)  u64 xxHash64 of every byte of the file after this header (bytes [64, file end))
//   [56..64)  reserved, zero
// A reader verifies magic, version, bounds, the flatbuffer (flatbuffers::Verifier), every index and
// constant range, and (unless told to trust the file) the checksum, before anything is used.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/base/attributes.h"
#include "kiln/base/host_value.h"
#include "kiln/base/mapped_file.h"
#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/shape/assumption.h"
#include "kiln/shape/shape.h"

namespace kiln::module {

// 2: dispatches carry bodies (control flow run as nested programs). 3: values carry their form
// (tensor, sequence, optional; ModuleValue::form).
inline constexpr uint32_t kFormatVersion = 3;
// Bodies nest at most this deep (a Loop in an If in a Loop ... counts each level).
inline constexpr int kMaxBodyDepth = 16;
inline constexpr int32_t kAbsentValue = -1;

enum class ValueKind : uint8_t { kInput = 0, kConstant = 1, kIntermediate = 2 };

struct ModuleValue {
  std::string name;
  DType dtype = DType::kF32;  // a sequence's or optional's: its tensors' dtype
  Shape shape;  // symbolic dims over ModuleContents::symbols; empty for a sequence or optional
  ValueKind kind = ValueKind::kIntermediate;
  Tensor constant;  // kConstant only: the data (borrowed from the mapped file when loaded)
  // Shape computation: for a non-constant value of rank <= 1 (integer, bool, or f32/f64 holding
  // whole numbers, e.g. a dim cast to float), its elements as expressions
  // of the symbols (e.g. Shape(x)), one per element; empty when unknown. The runtime evaluates
  // them per binding so backends can plan ops that need those values (ValueSpec::known_value).
  std::vector<DimExpr> known_values;
  // A tensor, or a sequence or optional, which lives on the host: only host dispatches
  // (is_host_dispatch) read or write one, and it is never a constant.
  ValueForm form = ValueForm::kTensor;
};

struct ModuleContents;

struct Dispatch {
  std::string name;              // unique, e.g. "d12_resnetv17_stage1_conv0_fwd"
  std::string op_type;           // ONNX op type (with kiln extensions, see ops/registry.h)
  std::vector<int32_t> inputs;   // value indices; kAbsentValue for an omitted optional input
  std::vector<int32_t> outputs;  // value indices
  Attributes attributes;
  std::vector<std::string> origins;  // ONNX node names fused into this dispatch
  // Symbols this dispatch binds from its input data before it runs (hal::Device::data_sizes), in
  // the order its op computes them; declared nowhere else. Values produced by this dispatch or
  // later ones may use them.
  std::vector<std::string> data_symbols;
  // Control flow (Loop, Scan, If; ir::Node::bodies): the nested programs the runtime runs for
  // this dispatch, in the op's order. Each is a module of its own: its inputs are the body's
  // formal inputs then its captures (the dispatch's last inputs, attribute kiln_captures counts
  // them), its symbols are bound from those inputs each time it runs, and its constants lie in
  // the file's one constants segment. The dispatch's data_symbols are the dims of its outputs
  // known only once it has run (the runtime binds them from the outputs). Empty otherwise.
  std::vector<std::shared_ptr<const ModuleContents>> bodies;
};

struct ModuleContents {
  std::string model_name;
  std::string producer;              // e.g. "kiln 0.1"
  std::vector<std::string> symbols;  // the symbols bound from input shapes (with the
                                     // dispatches' data_symbols: every symbol a dim may use)
  std::vector<ModuleValue> values;
  std::vector<int32_t> inputs;       // graph inputs, in the model's order
  std::vector<int32_t> outputs;      // graph outputs, in the model's order
  std::vector<Dispatch> dispatches;  // in execution order
  // What the compiler assumed about the symbols; the runtime checks each once its symbols are
  // bound (kiln/shape/assumption.h).
  std::vector<Assumption> assumptions;
  // A module loaded from a file: the file, whose mapping the constants borrow. Users of the
  // constants call source_file->check_unchanged() around their work (kiln/base/mapped_file.h):
  // another program may truncate or rewrite the file while it is loaded. Null for a module
  // built or loaded in memory; not written to files.
  std::shared_ptr<const MappedFile> source_file;
};

// Whether `dispatch` runs on the host rather than on a device: control flow (it has bodies), a
// sequence or optional op (base/sequence_ops.h), or any dispatch that reads or writes a sequence or
// an optional (Identity on one). Its indices must be valid (verify_contents).
bool is_host_dispatch(const ModuleContents& contents, const Dispatch& dispatch);

struct LoadOptions {
  bool verify_checksum = true;  // false for `--trust-module`
};

// Serializes `contents` to `path` atomically (temporary file + rename; nothing is left at `path`
// on error). Errors name the path.
Status write_module(const ModuleContents& contents, const std::string& path);
// The bytes write_module would write, in memory (load_module_from_bytes reads them back). Errors as
// write_module's.
StatusOr<std::vector<uint8_t>> serialize_module(const ModuleContents& contents);

// Maps and fully verifies a module file. Constants in the result borrow the mapping, which lives
// as long as any of them or the returned object. Errors (kDataLoss for damage, kInvalidArgument
// for structure, kFailedPrecondition for another format version) name the path and what is wrong.
StatusOr<std::shared_ptr<const ModuleContents>> load_module(const std::string& path,
                                                            LoadOptions options = {});
// The same from bytes already in memory (fuzzing, tests); the bytes are copied.
StatusOr<std::shared_ptr<const ModuleContents>> load_module_from_bytes(const void* data,
                                                                       size_t size,
                                                                       LoadOptions options = {});

// Checks semantic consistency shared by writer and loader: value indices in range, each
// non-input non-constant value produced exactly once and before use, symbols in dims and
// assumptions declared (a data symbol only on values produced once it is bound),
// constant data matching dtype and shape; forms valid, a sequence or optional never a constant,
// without dims or known values, and read or written by host dispatches only; for a dispatch with
// bodies, the op (Loop, Scan, If, SequenceMap),
// the number of bodies, their input and output counts against the dispatch's inputs, outputs and
// captures, each body recursively, nested at most kMaxBodyDepth deep.
Status verify_contents(const ModuleContents& contents);

}  // namespace kiln::module
