#include "flags.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/base/output_path.h"
#include "kiln/hal/registry.h"
#include "kiln/tooling/tensor_spec.h"
#include "kiln/triage/fault_device.h"

namespace kiln::cli {

namespace {

// The bytes a unit suffix stands for; 0 for an unknown one. Case does not matter.
uint64_t unit_bytes(std::string_view suffix) {
  std::string unit;
  for (char c : suffix) unit += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.empty() || unit == "B") return 1;
  static constexpr std::string_view kPrefixes = "KMGT";
  const size_t power = kPrefixes.find(unit[0]);
  if (power == std::string_view::npos) return 0;
  const std::string_view rest = std::string_view(unit).substr(1);
  const uint64_t base = rest == "" || rest == "IB" ? 1024 : rest == "B" ? 1000 : 0;
  uint64_t bytes = base;
  for (size_t i = 0; i < power; ++i) bytes *= base;
  return bytes;
}

}  // namespace

StatusOr<uint64_t> parse_byte_size(std::string_view flag, std::string_view text) {
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const uint64_t unit = unit_bytes(std::string_view(end, text.data() + text.size() - end));
  if (error != std::errc() || end == text.data() || unit == 0 || value == 0 ||
      value > UINT64_MAX / unit) {
    return invalid_argument(
        "{} '{}': expected a positive byte count such as 1048576, 512M, 2GiB or 4GB (K, M, G, T "
        "and KiB, MiB, GiB, TiB are powers of 1024; KB, MB, GB, TB powers of 1000)",
        flag, text);
  }
  return value * unit;
}

StatusOr<std::unique_ptr<runtime::Session>> open_module(std::string_view flag,
                                                        const std::string& path,
                                                        const runtime::SessionOptions& options) {
  const std::string compile_hint = fmt::format("compile it first: kiln compile {} -o {}.kmod", path,
                                               std::filesystem::path(path).stem().string());
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".onnx" || ext == ".kir") {
    return invalid_argument("{}={} is a model, not a compiled module; {}", flag, path,
                            compile_hint);
  }
  auto session = runtime::Session::open(path, options);
  if (!session.ok() && session.status().message().find("not a kiln module") != std::string::npos) {
    return std::move(session).status().with_note(fmt::format(
        "in {}={}: a module is what `kiln compile MODEL -o MODULE.kmod` writes", flag, path));
  }
  return session;
}

std::string device_help() {
  std::string help = "device to run on: " + hal::device_names();
  for (const hal::DeviceInfo& info : hal::registered_devices()) {
    if (info.takes_index)
      help += fmt::format(" ({}:N picks one of several: kiln devices)", info.name);
  }
  return help;
}

void ThreadFlags::add_to(CLI::App* sub) {
  sub->add_option("--threads", threads, "threads; 0: all cores")->check(CLI::NonNegativeNumber);
  sub->add_option("--team-policy", team_policy,
                  "adaptive (default): each run takes the full team, or one thread per dispatch "
                  "while that is faster (a busy machine), with the same bits; full: always the "
                  "full team; one-thread: always one thread where the bits allow");
  sub->add_option("--sample-groups", sample_groups,
                  "CPU: when a run of layers that compute each sample alone runs one sample at a "
                  "time, keeping a sample's activations in cache: auto (default), from layers that "
                  "touch half the last-level cache; off; all; or a byte count such as 8M; the "
                  "bits are the same either way");
}

Status ThreadFlags::apply(runtime::SessionOptions& options) const {
  options.threads = threads;
  auto policy = hal::parse_team_policy(team_policy);
  if (!policy.ok()) return std::move(policy).status().with_note("in --team-policy");
  options.team_policy = *policy;
  return apply_sample_groups("--sample-groups", sample_groups, options);
}

Status apply_sample_groups(std::string_view flag, const std::string& text,
                           runtime::SessionOptions& options) {
  if (text == "auto") {
    options.sample_group_bytes = std::nullopt;
  } else if (text == "off") {
    options.sample_group_bytes = UINT64_MAX;
  } else if (text == "all") {
    options.sample_group_bytes = 0;
  } else {
    auto bytes = parse_byte_size(flag, text);
    if (!bytes.ok()) {
      return invalid_argument("{} '{}': expected auto, off, all or a byte count such as 8M", flag,
                              text);
    }
    options.sample_group_bytes = *bytes;
  }
  return ok_status();
}

void add_device_flags(CLI::App* sub, std::string& device, bool& no_fallback) {
  sub->add_option("--device", device, device_help());
  sub->add_flag("--no-fallback", no_fallback,
                "refuse a module with a dispatch the GPU device has no kernel for, instead of "
                "running it on the CPU");
}

Status check_output_flag(std::string_view flag, const std::string& path) {
  if (path.empty()) return ok_status();
  Status checked = check_output_path(path);
  if (!checked.ok()) return std::move(checked).with_note(fmt::format("in {}", flag));
  return ok_status();
}

Status apply_fault_injection(runtime::SessionOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::optional<triage::FaultSpec> fault, triage::fault_from_environment());
  options.decorate_device = triage::fault_decorator(std::move(fault));
  return ok_status();
}

StatusOr<std::vector<Tensor>> load_tensor_specs(std::string_view flag,
                                                const std::vector<std::string>& specs) {
  std::vector<Tensor> tensors;
  for (const std::string& spec : specs) {
    auto tensor = parse_tensor_spec(spec);
    if (!tensor.ok()) return std::move(tensor).status().with_note(fmt::format("in {}", flag));
    tensors.push_back(std::move(tensor).value());
  }
  return tensors;
}

void PlanCacheFlags::add_to(CLI::App* sub) {
  sub->add_option("--max-plans", max_plans,
                  "prepared plans kept, one per set of input sizes; the least recently used go "
                  "first")
      ->check(CLI::PositiveNumber)
      ->default_str("64");
  sub->add_option("--max-plan-bytes", max_plan_bytes,
                  "bytes the kept plans may hold together, e.g. 256M (the default); a plan over "
                  "it alone is still kept");
}

Status PlanCacheFlags::apply(runtime::SessionOptions& options) const {
  options.max_plans = max_plans;
  if (!max_plan_bytes.empty()) {
    KILN_ASSIGN_OR_RETURN(options.max_plan_bytes,
                          parse_byte_size("--max-plan-bytes", max_plan_bytes));
  }
  return ok_status();
}

}  // namespace kiln::cli
