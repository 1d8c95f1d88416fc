#include "kiln/suite/manifest.h"

#include <cctype>
#include <filesystem>
#include <functional>
#include <set>

#include "kiln/base/file_util.h"
#include "kiln/suite/backend_layout.h"
#include "kiln/suite/case_filter.h"
#include "kiln/suite/json_util.h"
#include "kiln/suite/path_template.h"

namespace kiln::suite {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxDimSize = int64_t{1} << 24;
constexpr uint64_t kMaxManifestBytes = uint64_t{64} << 20;

std::string resolve(const std::string& base, const std::string& path) {
  fs::path p(path);
  if (p.is_absolute()) return p.lexically_normal().string();
  return (fs::path(base) / p).lexically_normal().string();
}

Status check_exists(const std::string& path, std::string_view json_path, bool directory = false) {
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) return not_found("{}: '{}' does not exist", json_path, path);
  if (directory && !fs::is_directory(status)) {
    return invalid_argument("{}: '{}' is not a folder", json_path, path);
  }
  if (!directory && fs::is_directory(status)) {
    return invalid_argument("{}: '{}' is a folder, not a file", json_path, path);
  }
  return ok_status();
}

StatusOr<DType> read_dtype(const Json& value, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, read_string(value, path));
  auto dtype = parse_dtype(text);
  if (!dtype) {
    return invalid_argument(
        "{}: unknown dtype \"{}\" (expected f32, f64, f16, bf16, i64, i32, i16, "
        "i8, u64, u32, u16, u8 or bool)",
        path, text);
  }
  return *dtype;
}

StatusOr<Shape> read_shape(const Json& value, const std::string& path) {
  KILN_RETURN_IF_ERROR(check_array(value, path));
  Shape shape;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string item = index_path(path, i);
    if (value[i].is_string()) {
      std::string name = value[i].get<std::string>();
      if (!is_symbol_name(name)) {
        return invalid_argument("{}: \"{}\" is not a symbol name (letters, digits, '_')", item,
                                name);
      }
      shape.push_back(DimExpr::symbol(name));
      continue;
    }
    KILN_ASSIGN_OR_RETURN(int64_t dim, read_integer(value[i], item));
    if (dim < 0 || dim > kMaxDimSize) {
      return out_of_range("{}: dim {} is out of range [0, {}]", item, dim, kMaxDimSize);
    }
    shape.push_back(DimExpr(dim));
  }
  return shape;
}

StatusOr<ToleranceSpec> read_tolerance(const Json& value, const std::string& path) {
  KILN_RETURN_IF_ERROR(check_object(value, path, {"atol", "rtol", "nan"}));
  ToleranceSpec spec;
  if (const Json* atol = find_member(value, "atol")) {
    const std::string p = child_path(path, "atol");
    KILN_ASSIGN_OR_RETURN(double v, read_number(*atol, p));
    if (!(v >= 0)) return out_of_range("{}: {} is out of range: atol must be >= 0", p, v);
    spec.atol = v;
  }
  if (const Json* rtol = find_member(value, "rtol")) {
    const std::string p = child_path(path, "rtol");
    KILN_ASSIGN_OR_RETURN(double v, read_number(*rtol, p));
    if (!(v >= 0 && v < 1))
      return out_of_range("{}: {} is out of range: rtol must be in [0, 1)", p, v);
    spec.rtol = v;
  }
  if (const Json* nan = find_member(value, "nan")) {
    KILN_ASSIGN_OR_RETURN(std::string v,
                          read_choice(*nan, child_path(path, "nan"), {"fail", "match"}));
    spec.nan_match = v == "match";
  }
  return spec;
}

StatusOr<std::map<std::string, std::vector<int64_t>>> read_dims(const Json& value,
                                                                const std::string& path) {
  if (!value.is_object())
    return invalid_argument("{}: expected an object of symbol: [sizes]", path);
  std::map<std::string, std::vector<int64_t>> dims;
  for (const auto& [symbol, sizes] : value.items()) {
    const std::string p = child_path(path, symbol);
    if (!is_symbol_name(symbol))
      return invalid_argument("{}: \"{}\" is not a symbol name", p, symbol);
    KILN_RETURN_IF_ERROR(check_array(sizes, p, /*non_empty=*/true));
    std::vector<int64_t>& list = dims[symbol];
    for (size_t i = 0; i < sizes.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(int64_t size, read_integer(sizes[i], index_path(p, i)));
      if (size < 1 || size > kMaxDimSize) {
        return out_of_range("{}: size {} is out of range [1, {}]", index_path(p, i), size,
                            kMaxDimSize);
      }
      for (int64_t seen : list) {
        if (seen == size)
          return invalid_argument("{}: size {} is listed twice", index_path(p, i), size);
      }
      list.push_back(size);
    }
  }
  return dims;
}

StatusOr<Expectation> read_expectation(const Json& value, const std::string& path) {
  Expectation out;
  std::string outcome_text;
  if (value.is_string()) {
    outcome_text = value.get<std::string>();
  } else {
    KILN_RETURN_IF_ERROR(check_object(value, path, {"outcome", "reason", "cases"}));
    const Json* outcome = find_member(value, "outcome");
    if (outcome == nullptr) return invalid_argument("{}: missing \"outcome\"", path);
    KILN_ASSIGN_OR_RETURN(outcome_text, read_string(*outcome, child_path(path, "outcome")));
    if (const Json* reason = find_member(value, "reason")) {
      KILN_ASSIGN_OR_RETURN(out.reason, read_string(*reason, child_path(path, "reason")));
    }
    if (const Json* cases = find_member(value, "cases")) {
      KILN_ASSIGN_OR_RETURN(out.cases, read_string(*cases, child_path(path, "cases")));
      if (out.cases.empty())
        return invalid_argument("{}: an empty pattern", child_path(path, "cases"));
    }
  }
  auto outcome = parse_expected_outcome(outcome_text);
  if (!outcome) {
    return invalid_argument(
        "{}: \"{}\" is not an outcome (expected pass, fail-import, "
        "fail-compile, fail-run or fail-compare)",
        value.is_string() ? path : child_path(path, "outcome"), outcome_text);
  }
  out.outcome = *outcome;
  if (out.outcome != Outcome::kPass && out.reason.empty()) {
    return invalid_argument(
        "{}: an expected failure needs a \"reason\" ({{\"outcome\": \"{}\", "
        "\"reason\": \"...\"}})",
        path, outcome_text);
  }
  return out;
}

// backend: an outcome, or a list of them tried in order (each with its "cases" pattern).
StatusOr<std::map<std::string, std::vector<Expectation>>> read_expect(const Json& value,
                                                                      const std::string& path) {
  if (!value.is_object())
    return invalid_argument("{}: expected an object of backend: outcome", path);
  std::map<std::string, std::vector<Expectation>> out;
  for (const auto& [backend, item] : value.items()) {
    const std::string p = child_path(path, backend);
    std::vector<Expectation>& entries = out[backend];
    if (!item.is_array()) {
      KILN_ASSIGN_OR_RETURN(Expectation entry, read_expectation(item, p));
      entries.push_back(std::move(entry));
      continue;
    }
    if (item.empty()) return invalid_argument("{}: an empty list of expectations", p);
    for (size_t i = 0; i < item.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(Expectation entry, read_expectation(item[i], index_path(p, i)));
      entries.push_back(std::move(entry));
    }
  }
  return out;
}

StatusOr<Generator> read_generator(const Json& value, const std::string& path) {
  KILN_RETURN_IF_ERROR(
      check_object(value, path, {"distribution", "seed", "low", "high", "mean", "std"}));
  Generator gen;
  if (const Json* d = find_member(value, "distribution")) {
    KILN_ASSIGN_OR_RETURN(std::string name,
                          read_choice(*d, child_path(path, "distribution"), {"uniform", "normal"}));
    gen.distribution =
        name == "normal" ? Generator::Distribution::kNormal : Generator::Distribution::kUniform;
  }
  if (const Json* seed = find_member(value, "seed")) {
    KILN_ASSIGN_OR_RETURN(int64_t v, read_integer(*seed, child_path(path, "seed")));
    if (v < 0) return out_of_range("{}: seed {} must be >= 0", child_path(path, "seed"), v);
    gen.seed = static_cast<uint64_t>(v);
  }
  const bool uniform = gen.distribution == Generator::Distribution::kUniform;
  for (auto [key, field, applies] :
       {std::tuple{"low", &gen.low, uniform}, std::tuple{"high", &gen.high, uniform},
        std::tuple{"mean", &gen.mean, !uniform}, std::tuple{"std", &gen.stddev, !uniform}}) {
    const Json* member = find_member(value, key);
    if (member == nullptr) continue;
    if (!applies) {
      return invalid_argument("{}: \"{}\" does not apply to a {} distribution",
                              child_path(path, key), key, uniform ? "uniform" : "normal");
    }
    KILN_ASSIGN_OR_RETURN(*field, read_number(*member, child_path(path, key)));
  }
  if (uniform && !(gen.low <= gen.high)) {
    return out_of_range("{}: low {} must not exceed high {}", path, gen.low, gen.high);
  }
  if (!uniform && !(gen.stddev > 0)) {
    return out_of_range("{}: std {} must be > 0", child_path(path, "std"), gen.stddev);
  }
  return gen;
}

// Sizes a template's symbols may take, for checking that every file it names exists.
Status check_template_files(const std::string& pattern, const ModelSpec& model,
                            const std::string& json_path) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> symbols, path_symbols(pattern, json_path));
  std::set<std::string> unique(symbols.begin(), symbols.end());
  std::vector<std::string> names(unique.begin(), unique.end());
  Bindings sizes;
  std::function<Status(size_t)> visit = [&](size_t i) -> Status {
    if (i == names.size()) {
      KILN_ASSIGN_OR_RETURN(std::string path, expand_path(pattern, sizes, json_path));
      return check_exists(path, json_path);
    }
    for (int64_t size : model.sizes_of(names[i])) {
      sizes[names[i]] = size;
      KILN_RETURN_IF_ERROR(visit(i + 1));
    }
    return ok_status();
  };
  return visit(0);
}

struct FileTensorFields {
  std::string file;
  std::optional<DType> dtype;
  std::optional<Shape> shape;
};

// "file", "dtype", "shape": shared by inputs and outputs.
Status read_file_fields(const Json& value, const std::string& path, const std::string& base,
                        FileTensorFields& out) {
  if (const Json* file = find_member(value, "file")) {
    KILN_ASSIGN_OR_RETURN(std::string text, read_string(*file, child_path(path, "file")));
    if (text.empty()) return invalid_argument("{}: empty file name", child_path(path, "file"));
    out.file = resolve(base, text);
  }
  if (const Json* dtype = find_member(value, "dtype")) {
    KILN_ASSIGN_OR_RETURN(out.dtype, read_dtype(*dtype, child_path(path, "dtype")));
  }
  if (const Json* shape = find_member(value, "shape")) {
    KILN_ASSIGN_OR_RETURN(out.shape, read_shape(*shape, child_path(path, "shape")));
  }
  return ok_status();
}

struct Defaults {
  ToleranceSpec tolerance;
  std::map<std::string, std::vector<int64_t>> dims;
  ReferenceSource reference = ReferenceSource::kOnnxRuntime;
  BatchInvariance batch_invariance = BatchInvariance::kReport;
  std::map<std::string, std::vector<Expectation>> expect;
};

StatusOr<ReferenceSource> read_reference(const Json& value, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text,
                        read_choice(value, path, {"onnxruntime", "kiln-reference"}));
  return text == "kiln-reference" ? ReferenceSource::kKilnReference : ReferenceSource::kOnnxRuntime;
}

StatusOr<BatchInvariance> read_batch_invariance(const Json& value, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, read_choice(value, path, {"off", "report", "enforce"}));
  return text == "off"       ? BatchInvariance::kOff
         : text == "enforce" ? BatchInvariance::kEnforce
                             : BatchInvariance::kReport;
}

StatusOr<Defaults> read_defaults(const Json& value, const std::string& path) {
  KILN_RETURN_IF_ERROR(
      check_object(value, path, {"tolerance", "dims", "reference", "batch_invariance", "expect"}));
  Defaults d;
  if (const Json* v = find_member(value, "tolerance")) {
    KILN_ASSIGN_OR_RETURN(d.tolerance, read_tolerance(*v, child_path(path, "tolerance")));
  }
  if (const Json* v = find_member(value, "dims")) {
    KILN_ASSIGN_OR_RETURN(d.dims, read_dims(*v, child_path(path, "dims")));
  }
  if (const Json* v = find_member(value, "reference")) {
    KILN_ASSIGN_OR_RETURN(d.reference, read_reference(*v, child_path(path, "reference")));
  }
  if (const Json* v = find_member(value, "batch_invariance")) {
    KILN_ASSIGN_OR_RETURN(d.batch_invariance,
                          read_batch_invariance(*v, child_path(path, "batch_invariance")));
  }
  if (const Json* v = find_member(value, "expect")) {
    KILN_ASSIGN_OR_RETURN(d.expect, read_expect(*v, child_path(path, "expect")));
  }
  return d;
}

Status read_inputs(const Json& value, const std::string& path, const std::string& base,
                   ModelSpec& model) {
  if (!value.is_object())
    return invalid_argument("{}: expected an object of input name: spec", path);
  for (const auto& [name, item] : value.items()) {
    const std::string p = child_path(path, name);
    KILN_RETURN_IF_ERROR(check_object(item, p, {"file", "generate", "dtype", "shape"}));
    FileTensorFields fields;
    KILN_RETURN_IF_ERROR(read_file_fields(item, p, base, fields));
    InputSpec input{name, fields.file, std::nullopt, fields.dtype, fields.shape, p};
    const Json* generate = find_member(item, "generate");
    if ((generate != nullptr) == !input.file.empty()) {
      return invalid_argument("{}: give exactly one of \"file\" and \"generate\"", p);
    }
    if (generate != nullptr) {
      KILN_ASSIGN_OR_RETURN(input.generate, read_generator(*generate, child_path(p, "generate")));
    } else {
      KILN_RETURN_IF_ERROR(check_template_files(input.file, model, child_path(p, "file")));
    }
    model.inputs.push_back(std::move(input));
  }
  return ok_status();
}

Status read_outputs(const Json& value, const std::string& path, const std::string& base,
                    ModelSpec& model) {
  if (!value.is_object())
    return invalid_argument("{}: expected an object of output name: spec", path);
  for (const auto& [name, item] : value.items()) {
    const std::string p = child_path(path, name);
    KILN_RETURN_IF_ERROR(check_object(item, p, {"file", "dtype", "shape", "tolerance"}));
    FileTensorFields fields;
    KILN_RETURN_IF_ERROR(read_file_fields(item, p, base, fields));
    OutputSpec output{name, fields.file, fields.dtype, fields.shape, {}, p};
    if (const Json* tolerance = find_member(item, "tolerance")) {
      KILN_ASSIGN_OR_RETURN(output.tolerance,
                            read_tolerance(*tolerance, child_path(p, "tolerance")));
    }
    if (!output.file.empty()) {
      KILN_RETURN_IF_ERROR(check_template_files(output.file, model, child_path(p, "file")));
    }
    model.outputs.push_back(std::move(output));
  }
  return ok_status();
}

StatusOr<ModelSpec> read_model(const Json& value, const std::string& path, const std::string& base,
                               const Defaults& defaults) {
  KILN_RETURN_IF_ERROR(
      check_object(value, path,
                   {"name", "path", "test_dir", "inputs", "outputs", "reference", "dims",
                    "tolerance", "batch_dim", "batch_invariance", "expect"}));
  const Json* model_path = find_member(value, "path");
  const Json* test_dir = find_member(value, "test_dir");
  if ((model_path != nullptr) == (test_dir != nullptr)) {
    return invalid_argument(
        "{}: give exactly one of \"path\" (a model file) and \"test_dir\" (a "
        "folder with model.onnx and test_data_set_N)",
        path);
  }
  ModelSpec model;
  ToleranceSpec base_tolerance = defaults.tolerance;
  if (test_dir != nullptr) {
    for (const char* key : {"inputs", "outputs", "dims", "reference"}) {
      if (find_member(value, key)) {
        return invalid_argument(
            "{}: \"{}\" does not apply to a \"test_dir\" model (its data sets "
            "give inputs and outputs)",
            child_path(path, key), key);
      }
    }
    const std::string p = child_path(path, "test_dir");
    KILN_ASSIGN_OR_RETURN(std::string dir, read_string(*test_dir, p));
    dir = resolve(base, dir);
    KILN_RETURN_IF_ERROR(check_exists(dir, p, /*directory=*/true));
    KILN_ASSIGN_OR_RETURN(model, model_from_case_dir(dir, p));
    base_tolerance = defaults.tolerance.over(backend_test_tolerance());
  } else {
    const std::string p = child_path(path, "path");
    KILN_ASSIGN_OR_RETURN(std::string file, read_string(*model_path, p));
    model.path = resolve(base, file);
    KILN_RETURN_IF_ERROR(check_exists(model.path, p));
    model.name = fs::path(model.path).stem().string();
  }
  model.json_path = path;
  model.default_dims = defaults.dims;
  model.reference = defaults.reference;
  model.batch_invariance = defaults.batch_invariance;
  model.expect = defaults.expect;
  model.tolerance = base_tolerance;
  if (const Json* v = find_member(value, "name")) {
    KILN_ASSIGN_OR_RETURN(model.name, read_string(*v, child_path(path, "name")));
    if (model.name.empty() || model.name.find('/') != std::string::npos) {
      return invalid_argument("{}: a model name must be non-empty and hold no '/'",
                              child_path(path, "name"));
    }
  }
  if (const Json* v = find_member(value, "dims")) {
    KILN_ASSIGN_OR_RETURN(model.dims, read_dims(*v, child_path(path, "dims")));
  }
  if (const Json* v = find_member(value, "reference")) {
    KILN_ASSIGN_OR_RETURN(model.reference, read_reference(*v, child_path(path, "reference")));
  }
  if (const Json* v = find_member(value, "tolerance")) {
    KILN_ASSIGN_OR_RETURN(ToleranceSpec own, read_tolerance(*v, child_path(path, "tolerance")));
    model.tolerance = own.over(base_tolerance);
  }
  if (const Json* v = find_member(value, "batch_dim")) {
    KILN_ASSIGN_OR_RETURN(std::string symbol, read_string(*v, child_path(path, "batch_dim")));
    if (!is_symbol_name(symbol)) {
      return invalid_argument("{}: \"{}\" is not a symbol name", child_path(path, "batch_dim"),
                              symbol);
    }
    model.batch_dim = symbol;
  }
  if (const Json* v = find_member(value, "batch_invariance")) {
    KILN_ASSIGN_OR_RETURN(model.batch_invariance,
                          read_batch_invariance(*v, child_path(path, "batch_invariance")));
  }
  if (const Json* v = find_member(value, "expect")) {
    KILN_ASSIGN_OR_RETURN(auto own, read_expect(*v, child_path(path, "expect")));
    for (auto& [backend, expectation] : own) model.expect[backend] = std::move(expectation);
  }
  if (const Json* v = find_member(value, "inputs")) {
    KILN_RETURN_IF_ERROR(read_inputs(*v, child_path(path, "inputs"), base, model));
  }
  if (const Json* v = find_member(value, "outputs")) {
    KILN_RETURN_IF_ERROR(read_outputs(*v, child_path(path, "outputs"), base, model));
  }
  return model;
}

}  // namespace

ToleranceSpec ToleranceSpec::over(const ToleranceSpec& outer) const {
  return {atol ? atol : outer.atol, rtol ? rtol : outer.rtol,
          nan_match ? nan_match : outer.nan_match};
}

Tolerance ToleranceSpec::resolve() const {
  return {atol.value_or(1e-5), rtol.value_or(1e-5), nan_match.value_or(false)};
}

Expectation ModelSpec::expectation(const std::string& backend, std::string_view case_name) const {
  auto it = expect.find(backend);
  if (it == expect.end()) return {};
  for (const Expectation& entry : it->second) {
    if (entry.cases.empty() || CaseFilter({entry.cases}).matches(case_name)) return entry;
  }
  return {};
}

Tolerance ModelSpec::tolerance_for(const std::string& output) const {
  for (const OutputSpec& spec : outputs) {
    if (spec.name == output) return spec.tolerance.over(tolerance).resolve();
  }
  return tolerance.resolve();
}

std::vector<int64_t> ModelSpec::sizes_of(const std::string& symbol) const {
  if (auto it = dims.find(symbol); it != dims.end()) return it->second;
  if (auto it = default_dims.find(symbol); it != default_dims.end()) return it->second;
  return {1, 3};
}

StatusOr<Manifest> parse_manifest(std::string_view text, const std::string& source,
                                  const std::string& manifest_dir, const ManifestOptions& options) {
  auto parsed = [&]() -> StatusOr<Manifest> {
    KILN_ASSIGN_OR_RETURN(Json json, parse_json(text, source));
    KILN_RETURN_IF_ERROR(check_object(json, "$", {"suite", "root", "defaults", "models"}));
    Manifest manifest;
    manifest.source = source;
    manifest.suite_dir = manifest_dir;
    manifest.name = fs::path(source).stem().string();
    if (const Json* v = find_member(json, "suite")) {
      KILN_ASSIGN_OR_RETURN(manifest.name, read_string(*v, "$.suite"));
    }
    std::string base = manifest_dir;
    if (const Json* v = find_member(json, "root")) {
      KILN_ASSIGN_OR_RETURN(std::string root, read_choice(*v, "$.root", {"manifest", "model-dir"}));
      if (root == "model-dir") {
        if (options.model_dir.empty()) {
          return invalid_argument(
              "$.root: this suite's paths are relative to the model directory: pass "
              "--model-dir DIR or set KILN_MODEL_DIR");
        }
        KILN_RETURN_IF_ERROR(check_exists(options.model_dir, "$.root (model directory)", true));
        base = options.model_dir;
      }
    }
    Defaults defaults;
    if (const Json* v = find_member(json, "defaults")) {
      KILN_ASSIGN_OR_RETURN(defaults, read_defaults(*v, "$.defaults"));
    }
    const Json* models = find_member(json, "models");
    if (models == nullptr)
      return invalid_argument("$: missing \"models\" (an array of model entries)");
    KILN_RETURN_IF_ERROR(check_array(*models, "$.models", /*non_empty=*/true));
    std::set<std::string> names;
    for (size_t i = 0; i < models->size(); ++i) {
      const std::string path = index_path("$.models", i);
      KILN_ASSIGN_OR_RETURN(ModelSpec model, read_model((*models)[i], path, base, defaults));
      if (!names.insert(model.name).second) {
        return invalid_argument("{}: a second model named \"{}\"; give one a distinct \"name\"",
                                path, model.name);
      }
      manifest.models.push_back(std::move(model));
    }
    return manifest;
  }();
  if (!parsed.ok())
    return std::move(parsed).status().with_note(fmt::format("in manifest '{}'", source));
  return parsed;
}

StatusOr<Manifest> load_manifest(const std::string& path, const ManifestOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::string text, read_file(path, kMaxManifestBytes));
  std::string dir = fs::path(path).parent_path().string();
  return parse_manifest(text, path, dir.empty() ? "." : dir, options);
}

}  // namespace kiln::suite
