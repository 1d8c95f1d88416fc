// libFuzzer target: untrusted module bytes through the verifying loader (checksum skipped, so the
// fuzzer reaches the structural checks), then a session on the CPU device run on zero inputs when
// every input is small and static.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/module/module.h"
#include "kiln/runtime/session.h"

namespace {

constexpr int64_t kMaxInputElements = 1 << 16;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::module::LoadOptions load_options;
  load_options.verify_checksum = false;
  auto module = kiln::module::load_module_from_bytes(data, size, load_options);
  if (!module.ok()) return 0;
  std::vector<kiln::Tensor> inputs;
  for (int32_t id : (*module)->inputs) {
    const auto& value = (*module)->values[id];
    kiln::ConcreteShape shape;
    int64_t elements = 1;
    for (const kiln::DimExpr& dim : value.shape) {
      auto constant = dim.is_symbol() ? std::optional<int64_t>(2) : dim.constant_value();
      if (!constant || *constant < 0 || *constant > kMaxInputElements) return 0;
      elements *= *constant;
      if (elements > kMaxInputElements) return 0;
      shape.push_back(*constant);
    }
    auto tensor = kiln::Tensor::create(value.dtype, shape);
    if (!tensor.ok()) return 0;
    inputs.push_back(std::move(tensor).value());
  }
  kiln::runtime::SessionOptions options;
  options.threads = 1;
  options.max_memory_bytes = 64 << 20;
  auto session = kiln::runtime::Session::create(std::move(module).value(), options);
  if (!session.ok()) return 0;
  (void)(*session)->run(inputs);
  return 0;
}
