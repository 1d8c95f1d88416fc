#include "kiln/hal/vulkan/host_fallback.h"

#include <fmt/format.h>

#include <map>

#include "kiln/hal/vulkan/transfer.h"
#include "kiln/hal/vulkan/vulkan_buffer.h"

namespace kiln::hal::vulkan {
namespace {

// Passes the segment's dispatches to the caller's observer under their program positions.
class RenumberingObserver : public RunObserver {
 public:
  RenumberingObserver(RunObserver& outer, const std::vector<int32_t>& positions)
      : outer_(outer), positions_(positions) {}
  bool wants_outputs(int32_t dispatch) override {
    return outer_.wants_outputs(positions_[dispatch]);
  }
  Status after_dispatch(int32_t dispatch, double elapsed_ms,
                        std::span<const Tensor> outputs) override {
    return outer_.after_dispatch(positions_[dispatch], elapsed_ms, outputs);
  }

 private:
  RunObserver& outer_;
  const std::vector<int32_t>& positions_;
};

}  // namespace

StatusOr<std::unique_ptr<HostSegment>> HostSegment::prepare(Device& fallback,
                                                            const ProgramSpec& spec,
                                                            std::vector<int32_t> dispatches,
                                                            const std::vector<bool>& read_after) {
  std::unique_ptr<HostSegment> segment(new HostSegment(fallback));
  ProgramSpec& program = segment->program_;
  std::map<int32_t, int32_t> local;  // program value -> segment value
  std::vector<bool> produced_here;
  auto map_value = [&](int32_t v, bool produced) -> int32_t {
    if (v < 0) return -1;
    auto it = local.find(v);
    if (it != local.end()) return it->second;
    ValueSpec value = spec.values[v];
    if (value.role != ValueRole::kConstant) {
      value.role = produced ? (read_after[v] ? ValueRole::kOutput : ValueRole::kIntermediate)
                            : ValueRole::kInput;
    }
    const auto index = static_cast<int32_t>(program.values.size());
    program.values.push_back(std::move(value));
    segment->outer_value_.push_back(v);
    local.emplace(v, index);
    if (program.values.back().role == ValueRole::kInput) program.inputs.push_back(index);
    if (program.values.back().role == ValueRole::kOutput) program.outputs.push_back(index);
    return index;
  };
  for (int32_t d : dispatches) {
    DispatchSpec dispatch = spec.dispatches[d];
    if (dispatch.module_index < 0) dispatch.module_index = d;
    for (int32_t& v : dispatch.inputs) v = map_value(v, false);
    for (int32_t& v : dispatch.outputs) v = map_value(v, true);
    program.dispatches.push_back(std::move(dispatch));
  }
  segment->dispatches_ = std::move(dispatches);
  KILN_ASSIGN_OR_RETURN(segment->executable_, fallback.prepare(program));

  size_t arena_bytes = 0;
  segment->arena_offsets_.assign(program.values.size(), 0);
  for (size_t v = 0; v < program.values.size(); ++v) {
    const size_t bytes = segment->executable_->storage_bytes(static_cast<int32_t>(v));
    if (bytes == 0) continue;
    segment->arena_offsets_[v] = arena_bytes;
    arena_bytes += (bytes + 63) / 64 * 64;
  }
  KILN_ASSIGN_OR_RETURN(segment->arena_,
                        fallback.allocator().allocate(arena_bytes, MemoryType::kDeviceLocal));
  return segment;
}

Status HostSegment::run(VulkanContext& context, std::span<const BufferRef> values,
                        RunObserver* observer) {
  std::vector<BufferRef> bindings(program_.values.size());
  std::vector<std::unique_ptr<Buffer>> wrapped;
  // Staging for buffers the host cannot see: (segment value, host copy).
  std::vector<std::pair<int32_t, std::vector<std::byte>>> staged;
  for (size_t v = 0; v < program_.values.size(); ++v) {
    const ValueSpec& value = program_.values[v];
    if (value.role == ValueRole::kConstant) continue;
    if (value.role == ValueRole::kIntermediate) {
      if (executable_->storage_bytes(static_cast<int32_t>(v)) > 0)
        bindings[v] = {arena_.get(), arena_offsets_[v]};
      continue;
    }
    const size_t bytes = plain_bytes(value);
    if (bytes == 0) continue;
    const BufferRef& outer = values[outer_value_[v]];
    std::byte* host = outer.host_data();
    if (host == nullptr) {
      const VulkanBuffer* buffer = as_vulkan(outer);
      if (buffer == nullptr) {
        return invalid_argument("run: {} '{}' is not bound to a Vulkan buffer",
                                value_role_name(value.role), value.name);
      }
      staged.emplace_back(static_cast<int32_t>(v), std::vector<std::byte>(bytes));
      if (value.role == ValueRole::kInput) {
        KILN_RETURN_IF_ERROR(read_buffer(context, *buffer, outer.offset, staged.back().second));
      }
      host = staged.back().second.data();
    }
    std::unique_ptr<Buffer> view = fallback_.allocator().wrap_host(host, bytes);
    if (view == nullptr) return internal_error("the fallback device cannot address host memory");
    bindings[v] = {view.get(), 0};
    wrapped.push_back(std::move(view));
  }
  std::optional<RenumberingObserver> renumbering;
  RunArgs args;
  args.values = bindings;
  if (observer != nullptr) {
    renumbering.emplace(*observer, dispatches_);
    args.observer = &*renumbering;
  }
  KILN_RETURN_IF_ERROR(fallback_.queue().submit(*executable_, args));
  KILN_RETURN_IF_ERROR(fallback_.queue().finish());
  for (auto& [v, bytes] : staged) {
    if (program_.values[v].role != ValueRole::kOutput) continue;
    const BufferRef& outer = values[outer_value_[v]];
    KILN_RETURN_IF_ERROR(write_buffer(context, *as_vulkan(outer), outer.offset, bytes));
  }
  return ok_status();
}

std::vector<std::string> HostSegment::describe(int32_t d) const {
  for (size_t i = 0; i < dispatches_.size(); ++i) {
    if (dispatches_[i] == d) return executable_->describe_dispatch(static_cast<int32_t>(i));
  }
  return {};
}

std::vector<std::pair<int32_t, int32_t>> HostSegment::interleaved_dispatches() const {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (const auto& [first, end] : executable_->interleaved_dispatches()) {
    if (first < 0 || end <= first || static_cast<size_t>(end) > dispatches_.size()) continue;
    out.emplace_back(dispatches_[first], dispatches_[end - 1] + 1);
  }
  return out;
}

size_t HostSegment::memory_bytes() const {
  return sizeof(*this) + (arena_ ? arena_->size() : 0) + executable_->memory_bytes();
}

}  // namespace kiln::hal::vulkan
