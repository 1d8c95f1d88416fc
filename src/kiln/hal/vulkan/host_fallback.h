// HostSegment: consecutive dispatches that the GPU does not run, prepared on the fallback device
// (the CPU backend) as a program of their own. Values that come from before the segment are its
// inputs, values read after it (or graph outputs) are its outputs, the rest its intermediates (in
// an arena of its own, allocated once). At run time the segment reads and writes the Vulkan
// buffers' bytes in place where they are host-visible (integrated GPUs, lavapipe), else through
// staging copies before and after.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/hal/device.h"
#include "kiln/hal/vulkan/vulkan_context.h"

namespace kiln::hal::vulkan {

class HostSegment {
 public:
  // `dispatches`: positions in spec.dispatches, in order. `read_after[v]`: whether value v is read
  // by a later dispatch or is a graph output. Errors: the fallback device's.
  static StatusOr<std::unique_ptr<HostSegment>> prepare(Device& fallback, const ProgramSpec& spec,
                                                        std::vector<int32_t> dispatches,
                                                        const std::vector<bool>& read_after);

  // Runs the segment on the Vulkan executable's bindings (one per program value). `observer`
  // sees the program's dispatch positions.
  Status run(VulkanContext& context, std::span<const BufferRef> values, RunObserver* observer);

  const std::vector<int32_t>& dispatches() const { return dispatches_; }
  // The fallback executable's interleaved ranges (Executable::interleaved_dispatches), as
  // positions in the Vulkan program.
  std::vector<std::pair<int32_t, int32_t>> interleaved_dispatches() const;
  // How dispatch `d` (position in the program) runs on the fallback device.
  std::vector<std::string> describe(int32_t d) const;
  size_t memory_bytes() const;

 private:
  HostSegment(Device& fallback) : fallback_(fallback) {}

  Device& fallback_;
  ProgramSpec program_;               // the segment's own program
  std::vector<int32_t> outer_value_;  // per program_ value: the Vulkan program's value
  std::vector<int32_t> dispatches_;   // per program_ dispatch: the Vulkan program's position
  std::unique_ptr<Executable> executable_;
  std::unique_ptr<Buffer> arena_;
  std::vector<size_t> arena_offsets_;  // per program_ value (intermediates)
};

}  // namespace kiln::hal::vulkan
