// Steps: the units an executable runs in order. A dispatch compiles to one or more steps (e.g.
// reorder an input, run the primitive, reorder the output to plain). Steps are built in
// prepare() and refer to memory through BufferRefs that are resolved on every run, because
// arena, graph inputs and graph outputs move between runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/status.h"

namespace kiln::hal::cpu {

// Where a step finds a buffer at run time.
struct BufferRef {
  enum class Kind : uint8_t {
    kValue,       // a ProgramSpec value: arena + offset, graph input/output, or constant data
    kWorkspace,   // the executable's per-dispatch temporaries, at `offset`
    kScratchpad,  // the executable's shared oneDNN scratchpad
    kFixed,       // memory that never moves (reordered constants)
  };
  Kind kind = Kind::kFixed;
  int32_t value = -1;
  size_t offset = 0;
  std::byte* fixed = nullptr;

  static BufferRef of_value(int32_t v) { return {Kind::kValue, v, 0, nullptr}; }
  static BufferRef workspace(size_t offset) { return {Kind::kWorkspace, -1, offset, nullptr}; }
  static BufferRef scratchpad() { return {Kind::kScratchpad, -1, 0, nullptr}; }
  static BufferRef at(std::byte* p) { return {Kind::kFixed, -1, 0, p}; }
};

// Per-run addresses, filled by the executable before the first step.
struct ExecContext {
  std::span<std::byte* const> values;  // per value; null when the value has no storage
  std::byte* workspace = nullptr;
  std::byte* scratchpad = nullptr;
  dnnl_stream_t stream = nullptr;
  // Per value, cleared before each run: 1 once a GuardedStep that vouches for it (finite_guard.h)
  // ran its fused path for it in this run. Null where no executable runs the steps (tests).
  uint8_t* vouched = nullptr;

  std::byte* resolve(const BufferRef& ref) const {
    switch (ref.kind) {
      case BufferRef::Kind::kValue: return values[ref.value];
      case BufferRef::Kind::kWorkspace: return workspace + ref.offset;
      case BufferRef::Kind::kScratchpad: return scratchpad;
      case BufferRef::Kind::kFixed: return ref.fixed;
    }
    return nullptr;
  }
};

// The steps of one dispatch: [first_step, end_step) of an executable's step list.
struct DispatchSteps {
  std::string name;
  size_t first_step = 0, end_step = 0;
  std::vector<int32_t> outputs;  // value indices
  int threads = 1;               // OpenMP team size its steps run with (thread_policy.h)
};

class Step {
 public:
  virtual ~Step() = default;
  // Must not allocate; returns an error only when oneDNN reports one.
  virtual Status run(const ExecContext& ctx) = 0;
  // One line for summaries and tests: "conv jit:avx2 [per sample]", "reorder ...".
  virtual std::string describe() const = 0;
  // Whether the step computes the same bits whatever OpenMP team size it was made and runs
  // with, so that an executable may run it on one thread instead (team_choice.h). kiln's own
  // kernels split work only where each result is computed the same way whatever the split;
  // a oneDNN primitive answers per kind (PrimitiveStep).
  virtual bool same_bits_at_any_team_size() const { return true; }
  // The oneDNN primitives the step holds (for the executable's memory estimate).
  virtual size_t primitive_count() const { return 0; }
};

// A oneDNN primitive with its arguments. With `repeat` > 1 the primitive was created for one
// sample and runs once per sample, each argument advancing by its sample stride.
class PrimitiveStep : public Step {
 public:
  PrimitiveStep(std::string label, const dnnl::engine& engine, dnnl::primitive primitive,
                int64_t repeat = 1);

  // Binds argument `arg` (DNNL_ARG_*) with layout `desc`. Non-fixed buffers are resolved right
  // before every execution. A layout with padding gets its handle set every time even when the
  // address did not change: oneDNN zero-fills the padding when a handle is set, and arena memory
  // may hold another value's bytes in between.
  void bind(int arg, const dnnl::memory::desc& desc, const BufferRef& ref,
            size_t sample_stride_bytes = 0);

  Status run(const ExecContext& ctx) override;
  std::string describe() const override { return label_; }
  // Kinds that compute each output element (or row, for softmax and normalizations) on one
  // thread: reorders, element-wise and binary ops, pooling, softmax, normalizations, concat,
  // sum, shuffle, resampling; and convolutions but the gemm-based ones, whose gemm may split
  // the reduction over threads (brgconv may also block its work by the team size: the conv
  // builder checks those, see mark_team_dependent). Not deconvolutions, matrix products and
  // inner products (oneDNN may split K over threads), reductions or RNNs.
  bool same_bits_at_any_team_size() const override { return same_bits_at_any_team_size_; }
  // For a kind the rule above trusts but whose bits, for this primitive, were seen to depend on
  // the team size (conv_batch_probe.h: conv_gives_full_team_bits).
  void mark_team_dependent() { same_bits_at_any_team_size_ = false; }
  size_t primitive_count() const override { return 1; }

 private:
  struct Binding {
    dnnl::memory memory;
    BufferRef ref;
    size_t sample_stride;
    bool padded;       // the layout has padding that must be re-zeroed on every bind
    std::byte* bound;  // handle currently set
  };
  std::string label_;
  dnnl::engine engine_;
  dnnl::primitive primitive_;
  int64_t repeat_;
  bool same_bits_at_any_team_size_;
  std::vector<Binding> bindings_;
  std::vector<dnnl_exec_arg_t> args_;
};

// Copies bytes (same layout on both sides), in parallel.
class CopyStep : public Step {
 public:
  CopyStep(std::string label, BufferRef from, BufferRef to, size_t bytes)
      : label_(std::move(label)), from_(from), to_(to), bytes_(bytes) {}
  Status run(const ExecContext& ctx) override;
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  BufferRef from_, to_;
  size_t bytes_;
};

// Fills a buffer with one byte value (Dropout's all-true mask).
class FillStep : public Step {
 public:
  FillStep(std::string label, BufferRef to, size_t bytes, std::byte value)
      : label_(std::move(label)), to_(to), bytes_(bytes), value_(value) {}
  Status run(const ExecContext& ctx) override;
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  BufferRef to_;
  size_t bytes_;
  std::byte value_;
};

}  // namespace kiln::hal::cpu
