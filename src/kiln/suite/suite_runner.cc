#include "kiln/suite/suite_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>

#include "kiln/hal/registry.h"
#include "kiln/suite/progress.h"

namespace kiln::suite {

int SuiteResult::count(Verdict verdict) const {
  return static_cast<int>(std::count_if(cases.begin(), cases.end(),
                                        [&](const CaseResult& c) { return c.verdict == verdict; }));
}

StatusOr<SuiteResult> run_suite(const Manifest& manifest, const SuiteOptions& options) {
  if (options.jobs < 1) return invalid_argument("-j must be at least 1, got {}", options.jobs);
  if (options.threads < 0)
    return invalid_argument("--threads must be >= 0, got {}", options.threads);
  const auto start = std::chrono::steady_clock::now();

  std::vector<const ModelSpec*> models;
  for (const ModelSpec& model : manifest.models) {
    if (options.filter.may_match_prefix(model.name)) models.push_back(&model);
  }
  if (models.empty()) {
    return invalid_argument("no model of suite '{}' has a case that --filter selects",
                            manifest.source);
  }
  const int total_threads =
      options.threads > 0 ? options.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int jobs = std::min<int>(options.jobs, static_cast<int>(models.size()));

  RunContext context;
  context.backend = options.backend;
  if (options.backend != "reference") {
    std::optional<hal::DeviceInfo> device = hal::find_device(options.backend);
    if (!device) {
      return invalid_argument("unknown backend '{}': use reference or a device ({})",
                              options.backend, hal::device_names());
    }
    context.compare_results = device->results == hal::DeviceResults::kComputed;
  }
  context.decorate_device = options.decorate_device;
  context.threads = std::max(1, total_threads / jobs);
  context.ort = options.ort;
  if (context.ort.cache_dir.empty()) {
    context.ort.cache_dir = (std::filesystem::path(manifest.suite_dir) / ".kiln-cache").string();
  }
  context.ort.threads = context.threads;
  if (!options.filter.empty()) {
    context.selected = [&](const std::string& name) { return options.filter.matches(name); };
  }
  context.tamper = options.tamper;
  if (options.progress) {
    context.on_start = [&](const std::string& name) { options.progress->case_started(name); };
    context.on_done = [&](const CaseResult& result) { options.progress->case_done(result); };
    options.progress->begin(static_cast<int>(models.size()), jobs, context.threads,
                            static_cast<int>(manifest.models.size()));
  }

  std::vector<std::vector<CaseResult>> per_model(models.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < models.size(); i = next++) {
      per_model[i] = run_model(*models[i], context);
      if (options.progress) options.progress->model_done(models[i]->name);
    }
  };
  if (jobs == 1) {
    worker();
  } else {
    std::vector<std::thread> threads;
    for (int j = 0; j < jobs; ++j) threads.emplace_back(worker);
    for (std::thread& thread : threads) thread.join();
  }

  SuiteResult result;
  result.name = manifest.name;
  result.source = manifest.source;
  result.backend = options.backend;
  result.threads_per_job = context.threads;
  for (auto& cases : per_model) {
    for (CaseResult& c : cases) result.cases.push_back(std::move(c));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options.progress) options.progress->end();
  if (result.cases.empty()) {
    return invalid_argument("--filter selects no case of suite '{}'", manifest.source);
  }
  return result;
}

}  // namespace kiln::suite
