// The CPU backend: hal::Device on oneDNN (JIT kernels for the host ISA) plus kiln's own OpenMP
// kernels.
//
// Ops: Conv (1-3-D, groups, dilations, bias, kiln's residual input and kiln_activation relu or
// clip), BatchNormalization (inference, kiln_activation relu), Relu, Gelu, MaxPool, AveragePool,
// GlobalAveragePool, GlobalMaxPool, Add/Sub/Mul/Div (numpy broadcasting), Sum, Gemm, MatMul,
// Softmax (opset-13 semantics: along `axis`), LayerNormalization (f32, Y only), Flatten, Reshape,
// Identity, Dropout (inference).
// All f32; Reshape/Flatten/Identity/Dropout also pass other dtypes through. auto_pad must be
// NOTSET (the compiler resolves it into pads); unknown attributes are rejected.
//
// Layouts: values produced by conv chains stay in oneDNN's blocked layout (nChw8c on AVX2,
// nChw16c on AVX-512); graph inputs/outputs and constants are plain. storage_bytes() reports the
// padded size of the chosen layout. Constants are reordered once at prepare() and shared between
// all executables of the device (e.g. batch 1 and batch 8 of one model).
//
// Batch invariance (docs/architecture.md invariant 4): a conv whose oneDNN implementation may
// reduce in a batch-dependent order (gemm-based kernels) runs once per sample with a primitive made
// for one sample; direct JIT kernels (measured bitwise invariant) and kiln's Winograd kernel run
// the whole batch. Gemm and MatMul run kiln's own kernel (gemm_kernel.h, AVX2 + FMA), which
// computes every output element by one fixed chain of FMAs over k: a sample's output is the same
// bits at any batch size whichever dim holds the batch (any leading dim of A or of both operands,
// the rows M, or B's columns; only k, the summed dim, cannot be a batch). Without AVX2 + FMA they
// run on oneDNN per sample of dim 0, which holds the invariant for a batch in dim 0 only.
//
// Threads: DeviceOptions::threads OpenMP threads (0: all cores); a dispatch with little work per
// sample runs on one (thread_policy.h). The team size is set on the calling thread for each
// dispatch in prepare() and run(), and the caller's own is back when they return: OpenMP keeps it
// per thread, so devices with different thread counts, used in turn from one thread or at once
// from several, each run with theirs.
//
// Several threads may call the device at once (a Session's concurrent runs share it): the
// allocator and queue hold no state, and what prepared executables share is immutable (the
// oneDNN engine, the thread count) or locked (the weight cache). One executable runs one call at
// a time (cpu_executable.h).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/hal/device.h"
#include "kiln/hal/host_allocator.h"
#include "kiln/hal/sync_queue.h"

namespace kiln::hal::cpu {

struct DeviceState;

// The oneDNN library kiln runs on, "major.minor.patch" (`kiln --version`, CpuDevice::name).
std::string onednn_version();

class CpuDevice : public Device {
 public:
  explicit CpuDevice(std::shared_ptr<DeviceState> state);
  ~CpuDevice() override;

  // "cpu (oneDNN <version>, <threads> threads)".
  std::string name() const override;
  // Error (naming the dispatch, op type and detail) when the op type, an attribute, a dtype or a
  // shape is not supported.
  Status supports(const DispatchSpec& dispatch, std::span<const ValueSpec> values) const override;
  // Errors: a malformed spec (bad indices or roles, a value used before it is produced), an
  // unsupported dispatch (as supports()), or oneDNN failing to create a kernel.
  StatusOr<std::unique_ptr<Executable>> prepare(const ProgramSpec& spec) override;
  // The portable kernel's data_sizes (NonZero, Compress, TopK); an error for other op types.
  StatusOr<std::vector<int64_t>> data_sizes(const DispatchSpec& dispatch,
                                            std::span<const Tensor> inputs) override;

  // Host memory, device-local and host-visible: graph inputs and outputs are bound in place.
  Allocator& allocator() override { return allocator_; }
  // Runs complete on the calling thread.
  Queue& queue() override { return queue_; }

  int threads() const;
  // Reordered constants currently shared by live executables.
  size_t cached_weight_count() const;

 private:
  std::shared_ptr<DeviceState> state_;
  HostAllocator allocator_;
  SyncQueue queue_;
};

// Error when options are invalid (threads < 0) or oneDNN cannot create a CPU engine.
StatusOr<std::unique_ptr<Device>> create_cpu_device(const DeviceOptions& options);

}  // namespace kiln::hal::cpu
