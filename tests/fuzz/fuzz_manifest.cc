// libFuzzer target: untrusted test-suite manifest text (JSON, docs/test-suite.md) through the
// strict manifest parser, then the per-model lookups the runner makes. Relative paths resolve
// against $KILN_MODEL_DIR (scripts/fuzz.sh points it at the generated models, so entries can name
// files that exist and reach the input/output checks); the parser only stats files and lists
// backend-layout folders, it reads no file contents.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kiln/suite/manifest.h"

namespace {

const std::string& model_dir() {
  static const std::string dir = [] {
    const char* env = std::getenv("KILN_MODEL_DIR");
    return std::string(env != nullptr && *env != '\0' ? env : "/nonexistent-kiln-fuzz-models");
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::suite::ManifestOptions options;
  options.model_dir = model_dir();
  auto manifest = kiln::suite::parse_manifest(text, "fuzz.json", model_dir(), options);
  if (!manifest.ok()) {
    (void)manifest.status().to_string();
    return 0;
  }
  for (const kiln::suite::ModelSpec& model : manifest->models) {
    (void)model.expectation("cpu", model.name + "/dynamic/N=1");
    (void)model.expectation("reference", model.name);
    (void)model.tolerance_for("");
    for (const auto& output : model.outputs) (void)model.tolerance_for(output.name);
    for (const auto& [symbol, sizes] : model.dims) (void)model.sizes_of(symbol);
    (void)model.sizes_of("N");
  }
  return 0;
}
