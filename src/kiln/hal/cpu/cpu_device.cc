#include "kiln/hal/cpu/cpu_device.h"

#include <fmt/format.h>
#include <omp.h>

#include "kiln/hal/cpu/cpu_executable.h"
#include "kiln/hal/cpu/device_state.h"
#include "kiln/hal/cpu/dnnl_util.h"
#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/kernels/kernel.h"

namespace kiln::hal::cpu {

void use_threads(int threads) {
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
}

CallerThreads::CallerThreads() : threads_(omp_get_max_threads()) {}
CallerThreads::~CallerThreads() { use_threads(threads_); }

CpuDevice::CpuDevice(std::shared_ptr<DeviceState> state) : state_(std::move(state)) {}
CpuDevice::~CpuDevice() = default;

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
}

std::string CpuDevice::name() const {
  return fmt::format("cpu (oneDNN {}, {} threads)", onednn_version(), state_->threads);
}

int CpuDevice::threads() const { return state_->threads; }

size_t CpuDevice::cached_weight_count() const { return state_->weights.size(); }

Status CpuDevice::supports(const DispatchSpec& dispatch, std::span<const ValueSpec> values) const {
  OpReader op(dispatch, values);
  Status status = [&]() -> Status {
    KILN_RETURN_IF_ERROR(op.check_indices());
    return select_path(op).status();
  }();
  if (!status.ok()) {
    return std::move(status).with_note(
        fmt::format("in dispatch '{}' ({})", dispatch.name, dispatch.op_type));
  }
  return ok_status();
}

StatusOr<std::unique_ptr<Executable>> CpuDevice::prepare(const ProgramSpec& spec) {
  ProgramBuilder builder(spec, state_);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutable> exe, builder.build());
  if (state_->threads > 1 && state_->team_policy != TeamPolicy::kFull) {
    exe->allow_one_thread_plan(spec);
  }
  return std::unique_ptr<Executable>(std::move(exe));
}

StatusOr<std::vector<int64_t>> CpuDevice::data_sizes(const DispatchSpec& dispatch,
                                                     std::span<const Tensor> inputs) {
  const kernels::OpDef* op = kernels::find_op_def(dispatch.op_type);
  StatusOr<std::vector<int64_t>> sizes =
      op == nullptr ? unimplemented("op type '{}' has no data-dependent sizes", dispatch.op_type)
                    : kernels::compute_data_sizes(
                          *op, dispatch.attributes != nullptr ? *dispatch.attributes : Attributes{},
                          inputs, dispatch.outputs.size());
  if (!sizes.ok()) {
    return std::move(sizes).status().with_note(
        fmt::format("in dispatch '{}' ({})", dispatch.name, dispatch.op_type));
  }
  return sizes;
}

StatusOr<std::unique_ptr<Device>> create_cpu_device(const DeviceOptions& options) {
  if (options.threads < 0) {
    return invalid_argument("cpu device: threads must be >= 0 (0: all cores), got {}",
                            options.threads);
  }
  auto state = std::make_shared<DeviceState>();
  state->threads = options.threads > 0 ? options.threads : omp_get_num_procs();
  state->team_policy = options.team_policy;
  state->sample_group_bytes = options.sample_group_bytes.value_or(default_sample_group_bytes());
  KILN_RETURN_IF_ERROR(catch_dnnl("creating the oneDNN CPU engine", [&]() -> Status {
    state->engine = dnnl::engine(dnnl::engine::kind::cpu, 0);
    return ok_status();
  }));
  return std::unique_ptr<Device>(std::make_unique<CpuDevice>(std::move(state)));
}

}  // namespace kiln::hal::cpu
