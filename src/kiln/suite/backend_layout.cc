#include "kiln/suite/backend_layout.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>

namespace kiln::suite {
namespace {

namespace fs = std::filesystem;

// The N of "<prefix>N<suffix>", or -1.
int64_t numbered(const std::string& name, std::string_view prefix, std::string_view suffix) {
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return -1;
  }
  std::string_view digits(name.data() + prefix.size(), name.size() - prefix.size() - suffix.size());
  int64_t value = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return -1;
  return value;
}

// input_0.pb ... input_{n-1}.pb with no gap.
StatusOr<std::vector<std::string>> numbered_files(const fs::path& dir, std::string_view prefix,
                                                  const std::string& where) {
  std::map<int64_t, std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    int64_t n = numbered(entry.path().filename().string(), prefix, ".pb");
    if (n >= 0) found[n] = entry.path().string();
  }
  if (ec) return invalid_argument("{}cannot list '{}': {}", where, dir.string(), ec.message());
  std::vector<std::string> files;
  for (const auto& [n, path] : found) {
    if (n != static_cast<int64_t>(files.size())) {
      return invalid_argument("{}'{}' has {}{}.pb but no {}{}.pb", where, dir.string(), prefix, n,
                              prefix, files.size());
    }
    files.push_back(path);
  }
  return files;
}

}  // namespace

ToleranceSpec backend_test_tolerance() { return {1e-7, 1e-3, true}; }

bool is_backend_case_dir(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / "model.onnx", ec);
}

StatusOr<ModelSpec> model_from_case_dir(const std::string& dir, const std::string& json_path) {
  const std::string where = json_path.empty() ? "" : json_path + ": ";
  fs::path root(dir);
  if (!is_backend_case_dir(dir)) {
    return not_found(
        "{}'{}' has no model.onnx (expected the ONNX backend test layout: model.onnx "
        "and test_data_set_N/input_K.pb, output_K.pb)",
        where, dir);
  }
  ModelSpec model;
  model.path = (root / "model.onnx").string();
  model.name = root.lexically_normal().filename().string();
  if (model.name.empty() || model.name == ".")
    model.name = fs::absolute(root).lexically_normal().filename().string();
  model.json_path = json_path.empty() ? dir : json_path;
  model.tolerance = backend_test_tolerance();
  // The data sets fix every size; there is no reference to generate.
  model.batch_invariance = BatchInvariance::kReport;

  std::map<int64_t, fs::path> sets;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    int64_t n = numbered(entry.path().filename().string(), "test_data_set_", "");
    if (n >= 0 && entry.is_directory()) sets[n] = entry.path();
  }
  if (ec) return invalid_argument("{}cannot list '{}': {}", where, dir, ec.message());
  if (sets.empty())
    return not_found("{}'{}' has model.onnx but no test_data_set_N folder", where, dir);
  for (const auto& [n, path] : sets) {
    DataSet set;
    set.name = path.filename().string();
    KILN_ASSIGN_OR_RETURN(set.inputs, numbered_files(path, "input_", where));
    KILN_ASSIGN_OR_RETURN(set.outputs, numbered_files(path, "output_", where));
    if (set.outputs.empty()) {
      return not_found("{}'{}' has no output_0.pb: there is nothing to compare with", where,
                       path.string());
    }
    model.data_sets.push_back(std::move(set));
  }
  return model;
}

StatusOr<Manifest> load_suite_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return not_found("suite folder '{}' does not exist", dir);
  Manifest manifest;
  manifest.source = dir;
  manifest.suite_dir = dir;
  manifest.name = fs::absolute(fs::path(dir)).lexically_normal().filename().string();
  if (manifest.name.empty())
    manifest.name =
        fs::absolute(fs::path(dir)).lexically_normal().parent_path().filename().string();
  if (is_backend_case_dir(dir)) {
    KILN_ASSIGN_OR_RETURN(ModelSpec model, model_from_case_dir(dir));
    manifest.models.push_back(std::move(model));
    return manifest;
  }
  std::vector<fs::path> cases;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_directory() && is_backend_case_dir(entry.path().string()))
      cases.push_back(entry.path());
  }
  if (ec) return invalid_argument("cannot list suite folder '{}': {}", dir, ec.message());
  if (cases.empty()) {
    return not_found(
        "suite folder '{}' holds neither model.onnx nor folders that do (the ONNX "
        "backend test layout); give a manifest .json instead",
        dir);
  }
  std::sort(cases.begin(), cases.end());
  for (const fs::path& path : cases) {
    auto model = model_from_case_dir(path.string());
    if (model.ok()) {
      manifest.models.push_back(std::move(model).value());
      continue;
    }
    ModelSpec broken;
    broken.name = path.filename().string();
    broken.path = (path / "model.onnx").string();
    broken.json_path = path.string();
    broken.setup_error = model.status().to_string();
    manifest.models.push_back(std::move(broken));
  }
  return manifest;
}

}  // namespace kiln::suite
