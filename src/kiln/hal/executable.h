// Executable: a program a device prepared for concrete shapes, run on device buffers. The runtime
// plans an arena from storage_bytes() and the values' lifetimes, binds every value to a place in
// a device buffer (RunArgs), and submits the run on the device's queue (queue.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/hal/buffer.h"

namespace kiln::hal {

// Watches a run dispatch by dispatch: tracing (`kiln run --trace`), triage, per-dispatch timing
// (`kiln run --profile`). Dispatches are identified by their position in
// ProgramSpec::dispatches. A run without an observer does no extra work. An observed run
// completes before Queue::submit returns, on every device (each dispatch is waited for).
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // Whether after_dispatch(d, ...) gets d's outputs. Asked once per dispatch per run, before it
  // runs; a run may ask about several dispatches before the first of them finishes (a CPU sample
  // group asks about all of its dispatches, then runs them one sample at a time). Observing costs a
  // copy to the host (and a reorder out of a blocked layout) per output.
  virtual bool wants_outputs(int32_t dispatch) { return false; }
  // Called once per dispatch, in order, after it finished. `elapsed_ms` is the wall time of the
  // dispatch's own work (kernels and the reorders it needs), excluding the copies made for the
  // observer. `outputs` has one tensor per DispatchSpec output when wants_outputs(dispatch) said
  // so, else it is empty: host tensors, plain row-major, freshly allocated; the observer may keep
  // them. An error stops the run and is returned by the run with a note naming the dispatch.
  virtual Status after_dispatch(int32_t dispatch, double elapsed_ms,
                                std::span<const Tensor> outputs) = 0;
};

inline constexpr std::string_view kFallbackLinePrefix = "cpu fallback: ";
// The line a dispatch of a CPU sample group (hal/cpu/sample_groups.h) ends its description with:
// "sample group: dispatches 0..12 run one sample at a time, 8 samples".
inline constexpr std::string_view kSampleGroupLinePrefix = "sample group: ";

struct RunArgs {
  // Per ProgramSpec value, the place of its bytes in a buffer of the executable's device:
  // intermediates storage_bytes() bytes (64-byte aligned, in the backend's layout); graph inputs
  // (read only) and graph outputs plain row-major, element count x dtype size bytes. Constants
  // and values with no bytes are not read (a null BufferRef).
  std::span<const BufferRef> values;
  // Temporaries for this run: scratch_bytes() bytes, 64-byte aligned, free to reuse between
  // runs (the runtime shares them between executables that never run at once). A null buffer:
  // the executable uses its own, allocated on its first run without one and kept.
  BufferRef scratch;
  RunObserver* observer = nullptr;  // optional; not owned
};

class Executable {
 public:
  virtual ~Executable() = default;
  // Buffer bytes an intermediate value needs in the backend's chosen layout (may exceed
  // element_count * dtype size for padded blocked layouts); 0 for other roles.
  virtual size_t storage_bytes(int32_t value) const = 0;
  // An intermediate whose bytes intermediate `value` may share (the same place), or -1. A
  // backend offers this when a dispatch can write `value` in place over an input that no later
  // dispatch reads (e.g. a convolution accumulating into its residual): placed together, the
  // dispatch skips copying that input into `value`. Optional for the runtime; the returned
  // value's storage_bytes equal `value`'s.
  virtual int32_t storage_shared_with(int32_t value) const { return -1; }
  // Runs every dispatch in order and returns when all are done. Callers go through the device's
  // queue (Queue::submit), which calls this on a device that completes on the calling thread; an
  // asynchronous device's queue records the work instead. Errors name the dispatch.
  virtual Status run(const RunArgs& args) = 0;
  // Bytes of temporaries a run needs in RunArgs::scratch; 0 when none.
  virtual size_t scratch_bytes() const { return 0; }
  // Bytes the executable holds for itself while it lives (temporaries, scratch space, kernels'
  // code and state; an estimate where the backend cannot count exactly), not counting what it
  // shares with other executables of its device (reordered constants) or what a run passes in
  // (arena, RunArgs::scratch). The runtime bounds its cache of prepared plans by this
  // (runtime/plan_cache.h).
  virtual size_t memory_bytes() const { return 0; }
  // How dispatch `d` (position in ProgramSpec::dispatches) runs at these shapes: one line per
  // kernel, primitive or reorder, with its parameters. Empty when the backend does not say. A
  // dispatch that a device hands to another one (a GPU backend's CPU fallback) starts its lines
  // with kFallbackLinePrefix and the reason, so tools can report fallbacks on any device.
  virtual std::vector<std::string> describe_dispatch(int32_t d) const { return {}; }
  // Ranges [first, end) of dispatches whose work a run interleaves (the CPU backend runs a
  // sample group's dispatches one sample at a time, hal/cpu/sample_groups.h), so a value one of
  // them reads or writes must keep its bytes over the whole range: whoever places the values
  // treats such a value as live from the range's first dispatch to its last (or beyond, as its
  // own reads need). Empty: dispatches run in order.
  virtual std::vector<std::pair<int32_t, int32_t>> interleaved_dispatches() const { return {}; }
};

}  // namespace kiln::hal
