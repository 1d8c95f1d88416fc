#include "kiln/hal/vulkan/shader_library.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

namespace kiln::hal::vulkan {
namespace {

struct Replacements {
  std::mutex mutex;
  std::map<std::string, std::span<const uint32_t>, std::less<>> words;
};

Replacements& replacements() {
  static Replacements instance;
  return instance;
}

const EmbeddedShader* find_embedded(std::string_view name) {
  for (const EmbeddedShader& shader : embedded_shaders()) {
    if (shader.name == name) return &shader;
  }
  return nullptr;
}

}  // namespace

StatusOr<std::span<const uint32_t>> find_shader(std::string_view name) {
  {
    Replacements& r = replacements();
    std::lock_guard lock(r.mutex);
    if (auto it = r.words.find(name); it != r.words.end()) return it->second;
  }
  if (const EmbeddedShader* shader = find_embedded(name)) return shader->words;
  return not_found("no embedded shader '{}'", name);
}

std::vector<std::string_view> shader_names() {
  std::vector<std::string_view> names;
  for (const EmbeddedShader& shader : embedded_shaders()) names.push_back(shader.name);
  std::sort(names.begin(), names.end());
  return names;
}

Status replace_shader_for_testing(std::string_view name, std::span<const uint32_t> words) {
  if (find_embedded(name) == nullptr) return not_found("no embedded shader '{}'", name);
  Replacements& r = replacements();
  std::lock_guard lock(r.mutex);
  r.words[std::string(name)] = words;
  return ok_status();
}

}  // namespace kiln::hal::vulkan
