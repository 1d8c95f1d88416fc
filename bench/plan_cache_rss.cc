// Resident memory of one Session run at many distinct input sizes (bench/plan_cache_rss.sh).
//
//   plan_cache_rss MODULE.kmod [--sizes=1000] [--first=16] [--step=1] [--threads=1]
//                  [--max-plans=N] [--max-plan-bytes=BYTES] [--repeat-first]
//
// Every symbol of the module is set to first + i*step for i in [0, sizes); f32 inputs hold
// pseudo-random values in [0, 1) (seeded by the size), other inputs zeros. Prints RSS after
// loading (before), the peak (VmHWM) and RSS after the last run (and after malloc_trim: what
// the allocator kept of freed memory is not the session's), in MiB, and the plan cache's
// figures; with --repeat-first also runs the first size again at the end and checks that its
// outputs equal the first run's bit for bit (exit 1 if not).
#include <fmt/format.h>
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "kiln/runtime/session.h"

namespace {

// A field of /proc/self/status in MiB ("VmRSS", "VmHWM").
double status_mib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0)
      return std::strtod(line.c_str() + prefix.size(), nullptr) / 1024.0;
  }
  return -1;
}

bool flag(const char* arg, const char* name, std::string& value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  value = arg + n + 1;
  return true;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "plan_cache_rss: %s\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln;
  if (argc < 2)
    return fail(
        "usage: plan_cache_rss MODULE.kmod [--sizes=N] [--first=W] [--step=S] "
        "[--threads=T] [--max-plans=N] [--max-plan-bytes=B] [--repeat-first]");
  runtime::SessionOptions options;
  options.threads = 1;
  int64_t sizes = 1000, first = 16, step = 1;
  bool repeat_first = false;
  for (int i = 2; i < argc; ++i) {
    std::string v;
    if (flag(argv[i], "--sizes", v))
      sizes = std::stoll(v);
    else if (flag(argv[i], "--first", v))
      first = std::stoll(v);
    else if (flag(argv[i], "--step", v))
      step = std::stoll(v);
    else if (flag(argv[i], "--threads", v))
      options.threads = std::stoi(v);
    else if (flag(argv[i], "--max-plans", v))
      options.max_plans = std::stoull(v);
    else if (flag(argv[i], "--max-plan-bytes", v))
      options.max_plan_bytes = std::stoull(v);
    else if (std::strcmp(argv[i], "--repeat-first") == 0)
      repeat_first = true;
    else
      return fail(fmt::format("unknown argument '{}'", argv[i]));
  }
  auto session = runtime::Session::open(argv[1], options);
  if (!session.ok()) return fail(session.status().to_string());
  const module::ModuleContents& module = (*session)->module();

  auto inputs_at = [&](int64_t size) -> StatusOr<std::vector<Tensor>> {
    Bindings bindings;
    for (const std::string& symbol : module.symbols) bindings[symbol] = size;
    std::vector<Tensor> inputs;
    for (int32_t id : module.inputs) {
      KILN_ASSIGN_OR_RETURN(ConcreteShape shape, evaluate_shape(module.values[id].shape, bindings));
      KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(module.values[id].dtype, shape));
      std::memset(t.mutable_data(), 0, t.byte_size());
      if (t.dtype() == DType::kF32) {
        uint32_t state = static_cast<uint32_t>(size);
        for (float& v : t.mutable_values<float>()) {
          state = state * 1664525u + 1013904223u;
          v = static_cast<float>(state >> 8) / static_cast<float>(1u << 24);
        }
      }
      inputs.push_back(std::move(t));
    }
    return inputs;
  };

  const double before = status_mib("VmRSS");
  std::vector<Tensor> first_outputs;
  for (int64_t i = 0; i < sizes; ++i) {
    auto inputs = inputs_at(first + i * step);
    if (!inputs.ok()) return fail(inputs.status().to_string());
    auto outputs = (*session)->run(*inputs);
    if (!outputs.ok()) return fail(outputs.status().to_string());
    if (i == 0) first_outputs = std::move(outputs).value();
  }
  const double after = status_mib("VmRSS");
  const double peak = status_mib("VmHWM");
  const runtime::PlanCacheStats stats = (*session)->plan_cache_stats();
  std::printf("sizes %lld (%lld..%lld), max plans %zu, max plan bytes %llu\n",
              static_cast<long long>(sizes), static_cast<long long>(first),
              static_cast<long long>(first + (sizes - 1) * step),
              (*session)->plan_cache_limits().max_plans,
              static_cast<unsigned long long>((*session)->plan_cache_limits().max_bytes));
  malloc_trim(0);
  std::printf(
      "rss MiB: before %.1f  peak %.1f  after %.1f  (%.1f once malloc_trim gave freed "
      "memory back)\n",
      before, peak, after, status_mib("VmRSS"));
  std::printf("plans held %zu (%.1f MiB), evicted %llu, arena %.1f MiB\n", stats.plans,
              static_cast<double>(stats.bytes) / (1 << 20),
              static_cast<unsigned long long>(stats.evictions),
              static_cast<double>((*session)->arena_bytes()) / (1 << 20));
  if (repeat_first) {
    auto inputs = inputs_at(first);
    if (!inputs.ok()) return fail(inputs.status().to_string());
    auto outputs = (*session)->run(*inputs);
    if (!outputs.ok()) return fail(outputs.status().to_string());
    for (size_t o = 0; o < outputs->size(); ++o) {
      const Tensor& a = (*outputs)[o];
      const Tensor& b = first_outputs[o];
      if (a.shape() != b.shape() || a.byte_size() != b.byte_size() ||
          std::memcmp(a.data(), b.data(), a.byte_size()) != 0) {
        std::fprintf(stderr,
                     "plan_cache_rss: output %zu at size %lld differs from the first run's\n", o,
                     static_cast<long long>(first));
        return 1;
      }
    }
    std::printf("size %lld again: outputs equal the first run's bit for bit\n",
                static_cast<long long>(first));
  }
  return 0;
}
