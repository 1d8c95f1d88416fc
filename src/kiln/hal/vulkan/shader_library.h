// The compute shaders built into the library: shaders/<name>.comp compiled by glslc, validated by
// spirv-val and embedded at build time (CMakeLists.txt, embed_shaders.cmake).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"

namespace kiln::hal::vulkan {

// The SPIR-V words of shader `name` (the .comp file's stem). Errors: no such shader.
StatusOr<std::span<const uint32_t>> find_shader(std::string_view name);
// Every embedded shader's name, sorted.
std::vector<std::string_view> shader_names();

}  // namespace kiln::hal::vulkan
