// What a prepared Vulkan dispatch is: a list of commands recorded into a command buffer, with
// operands that are program values (bound per run, RunArgs::values) or device copies of
// constants. Recording turns each operand into a device address (buffer address + offset) and
// pushes the addresses, then the 32-bit parameters, as push constants (pipeline_cache.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/hal/vulkan/pipeline_cache.h"
#include "kiln/hal/vulkan/vulkan_buffer.h"

namespace kiln::hal::vulkan {

struct Operand {
  int32_t value = -1;  // a program value; -1 for a constant
  std::shared_ptr<const VulkanBuffer> constant;
  size_t offset = 0;  // bytes into the value or constant
};

// vkCmdDispatch of a pipeline.
struct Launch {
  const Pipeline* pipeline = nullptr;
  uint32_t groups[3] = {1, 1, 1};
  std::vector<Operand> operands;  // pushed first, 8 bytes each
  std::vector<uint32_t> params;   // pushed after the operands
};

// vkCmdCopyBuffer.
struct CopyCommand {
  Operand src;
  Operand dst;
  size_t bytes = 0;
};

using Command = std::variant<Launch, CopyCommand>;

// An error a kernel finds while it runs (Gather's index out of range): the kernel writes words
// into `flag` (all 0 before the run, the first word nonzero on an error). After the dispatch's
// segment runs the executable reads them; a nonzero first word resets the flag and becomes the
// Status `error` makes of the words.
struct RunCheck {
  std::shared_ptr<const VulkanBuffer> flag;
  size_t words = 1;
  std::function<Status(std::span<const uint32_t> words)> error;
};

// One dispatch on the GPU: its commands and, for describe_dispatch, one line per command.
struct GpuDispatch {
  std::vector<Command> commands;
  std::vector<std::string> description;
  std::vector<RunCheck> checks;
};

}  // namespace kiln::hal::vulkan
