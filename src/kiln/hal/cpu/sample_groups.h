// Sample groups: runs of consecutive dispatches that a CPU executable runs one sample at a time
// (docs/architecture.md, "Sample groups").
//
// Early layers of a CNN at a large batch are memory-bound: MobileNetV2's first expansion 1x1
// writes 8 x 96 x 112 x 112 floats (38.5 MB) at batch 8, which the depthwise conv after it reads
// back from memory. Run one sample of the whole run of such layers at a time and each sample's
// activations (4.8 MB) are still in the last-level cache when the next layer reads them. Every
// dispatch of a group is built for one sample and run once per sample, each sample's slice of
// its inputs and outputs in place; a value produced and read only inside a group keeps one
// sample's bytes, which every sample reuses.
//
// Bits: each op of a group computes a sample from that sample alone, and its one-sample kernels
// give the bits the batched ones give (invariant 4, batch invariance), so a group changes the
// order of work only. Which dispatches group depends on concrete shapes and the machine's cache
// only (invariant 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kiln/hal/program.h"

namespace kiln::hal::cpu {

// Which inputs of a dispatch hold samples along dim 0, when its op computes each sample from
// that sample alone: none (the op mixes samples, or its kernel is not known to keep a sample's
// bits at every batch); the listed input slots, the others being parameters (Conv's input and
// residual, not its weights and bias); or every input (element-wise ops, where an input without
// the batch broadcasts).
struct SampleInputs {
  enum class Kind : uint8_t { kNone, kSlots, kEvery };
  Kind kind = Kind::kNone;
  uint8_t slots = 0;  // kSlots: bit i for input slot i

  static constexpr SampleInputs none() { return {}; }
  static constexpr SampleInputs every() { return {Kind::kEvery, 0}; }
  static constexpr SampleInputs at_slots(uint8_t bits) { return {Kind::kSlots, bits}; }
};

struct SampleGroup {
  size_t first = 0, end = 0;  // dispatches [first, end)
  int64_t samples = 0;        // the batch: dim 0 of every value the group slices

  bool operator==(const SampleGroup&) const = default;
};

// How a value is stored when groups run one sample at a time.
enum class SampleRole : uint8_t {
  kWhole,     // not sliced: all samples at once (or no samples: constants, broadcast inputs)
  kSliced,    // read or written per sample by a group, and stored whole: sample s at s x stride
  kInternal,  // an intermediate produced and read only inside one group: one sample's bytes
};

struct SampleGroupPlan {
  std::vector<SampleGroup> groups;
  std::vector<int32_t> group_of;  // per dispatch: its group's index, -1 outside any
  std::vector<SampleRole> roles;  // per value
};

// Default threshold: a dispatch is worth slicing when its sliced inputs and outputs together
// take at least half of the last-level cache: sample_group_bytes_for(CPU 0's largest cache in
// sysfs, sysconf's level 3).
uint64_t default_sample_group_bytes();

// Half of `sysfs_largest` where sysfs describes the caches (not 0); else half of sysconf's level
// 3 (from cpuid) at most 32 MiB, else 16 MiB. cpuid's level 3 is the whole package's under some
// hypervisors: 512 MiB on an AMD EPYC VM without sysfs cache entries, where a core reaches its
// own 32 MiB and the threshold put every layer of MobileNetV2 at batch 8 below it (no group
// formed). 32 MiB is the largest level-3 cache one AMD core complex has without stacked cache.
uint64_t sample_group_bytes_for(uint64_t sysfs_largest, int64_t sysconf_level3);

// Plans the groups of `spec` (which check_program accepts). `inputs`: per dispatch, what its op
// path says (SampleInputs). A dispatch may join a group when its outputs are f32 intermediates or
// graph outputs with dim 0 = B > 1, every input holding samples is a non-constant f32 value of
// the outputs' rank with dim 0 = B, and every other input is a constant (an element-wise op's
// input without the batch: of lower rank or dim 0 = 1). A group is a run of such dispatches with
// the same B, trimmed to start and end at a dispatch whose inputs and outputs that hold samples
// take `min_bytes` or more (plain bytes, whole batch), with at least two dispatches.
// UINT64_MAX: no groups.
SampleGroupPlan plan_sample_groups(const ProgramSpec& spec, std::span<const SampleInputs> inputs,
                                   uint64_t min_bytes);

// The plan without group `g` (its dispatches run whole; roles recomputed).
void drop_sample_group(const ProgramSpec& spec, std::span<const SampleInputs> inputs,
                       SampleGroupPlan& plan, size_t g);

// The values group `g` of `plan` slices (read at an input slot holding samples, or written),
// sorted.
std::vector<int32_t> values_sliced_by(const ProgramSpec& spec, std::span<const SampleInputs> inputs,
                                      const SampleGroupPlan& plan, size_t g);

// Whether input slot `slot` of dispatch `d` of a group holds samples (the plan's rules above).
bool holds_samples(const ProgramSpec& spec, std::span<const SampleInputs> inputs, size_t d,
                   size_t slot);

}  // namespace kiln::hal::cpu
