#include "kiln/hal/cpu/sample_groups.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <string>

#include "kiln/base/checked_math.h"

namespace kiln::hal::cpu {
namespace {

const ValueSpec* value_at(const ProgramSpec& spec, int32_t v) {
  return v >= 0 && static_cast<size_t>(v) < spec.values.size() ? &spec.values[v] : nullptr;
}

// The batch of dispatch `d` when it may join a group (the header's rules), else 0; `bytes` gets
// the plain bytes of its inputs and outputs that hold samples.
int64_t group_batch(const ProgramSpec& spec, std::span<const SampleInputs> inputs, size_t d,
                    uint64_t& bytes) {
  const DispatchSpec& dispatch = spec.dispatches[d];
  if (inputs[d].kind == SampleInputs::Kind::kNone || dispatch.outputs.empty() ||
      dispatch.inputs.empty()) {
    return 0;
  }
  const ValueSpec* first_out = value_at(spec, dispatch.outputs[0]);
  if (first_out == nullptr || first_out->shape.empty()) return 0;
  const int64_t batch = first_out->shape[0];
  const size_t rank = first_out->shape.size();
  if (batch < 2) return 0;
  bytes = 0;
  for (int32_t v : dispatch.outputs) {
    const ValueSpec* out = value_at(spec, v);
    if (out == nullptr || out->dtype != DType::kF32 || out->shape.size() != rank ||
        out->shape[0] != batch || checked_product(out->shape).value_or(0) <= 0 ||
        (out->role != ValueRole::kIntermediate && out->role != ValueRole::kOutput)) {
      return 0;
    }
    bytes += plain_bytes(*out);
  }
  for (size_t slot = 0; slot < dispatch.inputs.size(); ++slot) {
    const ValueSpec* in = value_at(spec, dispatch.inputs[slot]);
    if (in == nullptr) {
      if (slot == 0) return 0;
      continue;
    }
    const bool constant = in->role == ValueRole::kConstant;
    if (holds_samples(spec, inputs, d, slot)) {
      if (constant || in->dtype != DType::kF32 || in->shape.size() != rank ||
          in->shape[0] != batch) {
        return 0;
      }
      bytes += plain_bytes(*in);
    } else if (!constant) {
      return 0;
    }
  }
  return batch;
}

// Every value's role from the groups of `plan`.
void assign_roles(const ProgramSpec& spec, std::span<const SampleInputs> inputs,
                  SampleGroupPlan& plan) {
  plan.roles.assign(spec.values.size(), SampleRole::kWhole);
  // Per value: the group of its producer, and whether every reader is in that group.
  std::vector<int32_t> producer_group(spec.values.size(), -1);
  std::vector<bool> read_outside(spec.values.size(), false);
  for (size_t d = 0; d < spec.dispatches.size(); ++d) {
    const DispatchSpec& dispatch = spec.dispatches[d];
    const int32_t g = plan.group_of[d];
    for (int32_t v : dispatch.outputs) {
      if (value_at(spec, v) == nullptr) continue;
      producer_group[v] = g;
      if (g >= 0) plan.roles[v] = SampleRole::kSliced;
    }
    for (size_t slot = 0; slot < dispatch.inputs.size(); ++slot) {
      const int32_t v = dispatch.inputs[slot];
      if (value_at(spec, v) == nullptr) continue;
      if (g < 0 || producer_group[v] != g) read_outside[v] = true;
      if (g >= 0 && holds_samples(spec, inputs, d, slot)) plan.roles[v] = SampleRole::kSliced;
    }
  }
  for (size_t v = 0; v < spec.values.size(); ++v) {
    if (plan.roles[v] == SampleRole::kSliced && producer_group[v] >= 0 && !read_outside[v] &&
        spec.values[v].role == ValueRole::kIntermediate) {
      plan.roles[v] = SampleRole::kInternal;
    }
  }
}

}  // namespace

// The largest cache of CPU 0 as Linux describes it (sysfs: "32768K"); 0 where it does not.
// sysconf's figure is cpuid's, which under some hypervisors is the whole package's.
uint64_t largest_cache_bytes() {
  uint64_t largest = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream file(fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/size", index));
    uint64_t size = 0;
    std::string unit;
    if (!(file >> size)) continue;
    file >> unit;
    if (unit == "K") size <<= 10;
    if (unit == "M") size <<= 20;
    largest = std::max(largest, size);
  }
  return largest;
}

uint64_t sample_group_bytes_for(uint64_t sysfs_largest, int64_t sysconf_level3) {
  constexpr uint64_t kReachable = uint64_t{32} << 20;
  if (sysfs_largest > 0) return sysfs_largest / 2;
  if (sysconf_level3 > 0) return std::min(static_cast<uint64_t>(sysconf_level3), kReachable) / 2;
  return kReachable / 2;
}

uint64_t default_sample_group_bytes() {
  return sample_group_bytes_for(largest_cache_bytes(), sysconf(_SC_LEVEL3_CACHE_SIZE));
}

bool holds_samples(const ProgramSpec& spec, std::span<const SampleInputs> inputs, size_t d,
                   size_t slot) {
  const DispatchSpec& dispatch = spec.dispatches[d];
  switch (inputs[d].kind) {
    case SampleInputs::Kind::kNone: return false;
    case SampleInputs::Kind::kSlots: return slot < 8 && (inputs[d].slots >> slot & 1) != 0;
    case SampleInputs::Kind::kEvery: break;
  }
  const ValueSpec* in = value_at(spec, dispatch.inputs[slot]);
  const ValueSpec* out = dispatch.outputs.empty() ? nullptr : value_at(spec, dispatch.outputs[0]);
  // An input of lower rank, or with dim 0 = 1 under a batch, broadcasts over the samples.
  return in != nullptr && out != nullptr && !out->shape.empty() &&
         in->shape.size() == out->shape.size() && in->shape[0] == out->shape[0] &&
         in->role != ValueRole::kConstant;
}

SampleGroupPlan plan_sample_groups(const ProgramSpec& spec, std::span<const SampleInputs> inputs,
                                   uint64_t min_bytes) {
  SampleGroupPlan plan;
  const size_t n = spec.dispatches.size();
  plan.group_of.assign(n, -1);
  if (min_bytes != std::numeric_limits<uint64_t>::max() && inputs.size() == n) {
    size_t d = 0;
    while (d < n) {
      uint64_t bytes = 0;
      const int64_t batch = group_batch(spec, inputs, d, bytes);
      if (batch == 0) {
        ++d;
        continue;
      }
      // The run of dispatches that may join, with the same batch; the group spans its first to
      // its last large dispatch.
      size_t first_large = n, last_large = n;
      size_t end = d;
      while (end < n) {
        uint64_t b = 0;
        if (group_batch(spec, inputs, end, b) != batch) break;
        if (b >= min_bytes) {
          if (first_large == n) first_large = end;
          last_large = end;
        }
        ++end;
      }
      if (first_large != n && last_large > first_large) {
        const auto g = static_cast<int32_t>(plan.groups.size());
        plan.groups.push_back(SampleGroup{first_large, last_large + 1, batch});
        for (size_t i = first_large; i <= last_large; ++i) plan.group_of[i] = g;
      }
      d = end;
    }
  }
  assign_roles(spec, inputs, plan);
  return plan;
}

std::vector<int32_t> values_sliced_by(const ProgramSpec& spec, std::span<const SampleInputs> inputs,
                                      const SampleGroupPlan& plan, size_t g) {
  std::vector<int32_t> out;
  if (g >= plan.groups.size()) return out;
  for (size_t d = plan.groups[g].first; d < plan.groups[g].end; ++d) {
    const DispatchSpec& dispatch = spec.dispatches[d];
    for (size_t slot = 0; slot < dispatch.inputs.size(); ++slot) {
      if (value_at(spec, dispatch.inputs[slot]) != nullptr &&
          holds_samples(spec, inputs, d, slot)) {
        out.push_back(dispatch.inputs[slot]);
      }
    }
    for (int32_t v : dispatch.outputs) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void drop_sample_group(const ProgramSpec& spec, std::span<const SampleInputs> inputs,
                       SampleGroupPlan& plan, size_t g) {
  if (g >= plan.groups.size()) return;
  plan.groups.erase(plan.groups.begin() + static_cast<std::ptrdiff_t>(g));
  for (int32_t& of : plan.group_of) {
    if (of == static_cast<int32_t>(g)) {
      of = -1;
    } else if (of > static_cast<int32_t>(g)) {
      --of;
    }
  }
  assign_roles(spec, inputs, plan);
}

}  // namespace kiln::hal::cpu
