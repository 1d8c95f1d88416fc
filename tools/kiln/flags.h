// Flag values shared by several subcommands.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/module/module.h"
#include "kiln/runtime/session.h"
#include "kiln/tooling/input_args.h"

namespace kiln::cli {

// "1048576", "512K", "64M", "2G", "1T" and "2GiB" (powers of 1024), "4GB" (powers of 1000) →
// bytes; the unit's case does not matter. Errors quote the flag and value.
StatusOr<uint64_t> parse_byte_size(std::string_view flag, std::string_view text);

// `--max-plans` and `--max-plan-bytes` of `kiln run` and `kiln bench` (docs/dynamic-shapes.md).
struct PlanCacheFlags {
  size_t max_plans = 0;
  std::string max_plan_bytes;

  void add_to(CLI::App* sub);
  // Sets the session's plan-cache bounds; the error names the flag.
  Status apply(runtime::SessionOptions& options) const;
};

// `--threads`, `--team-policy` and `--sample-groups` of `kiln run` and `kiln bench`.
struct ThreadFlags {
  int threads = 0;
  std::string team_policy = "adaptive";
  std::string sample_groups = "auto";

  void add_to(CLI::App* sub);
  // Sets the session's threads, team policy and sample groups; the error names the flag.
  Status apply(runtime::SessionOptions& options) const;
};

// A `--sample-groups`-style value (auto, off, all or a byte count) into the session's
// sample_group_bytes; the error names `flag` and the value.
Status apply_sample_groups(std::string_view flag, const std::string& text,
                           runtime::SessionOptions& options);

// Runtime::Session::open for `--module`-style flags. A model (.onnx, .kir) is refused with a
// message suggesting `kiln compile`, as is a file that is no module; other errors name the flag.
StatusOr<std::unique_ptr<runtime::Session>> open_module(std::string_view flag,
                                                        const std::string& path,
                                                        const runtime::SessionOptions& options);

// The help text of `--device`: the registered devices, e.g. "device to run on: cpu, null".
std::string device_help();
// Adds `--device` (device_help) and `--no-fallback` to a subcommand.
void add_device_flags(CLI::App* sub, std::string& device, bool& no_fallback);

// check_output_path (kiln/base/output_path.h) for an output flag's path, so a command refuses an
// output it could not write (a missing or unwritable directory, a directory, a socket) before it
// works. An empty path (flag not given) is fine. The error names the flag.
Status check_output_flag(std::string_view flag, const std::string& path);

// KILN_FAULT, read from the environment once per command: plants that fault in every device the
// session creates (triage/fault_device.h). Error (naming KILN_FAULT) for a malformed value.
Status apply_fault_injection(runtime::SessionOptions& options);

// Loads every `--input`-style spec in order; the error names the flag and the spec.
StatusOr<std::vector<Tensor>> load_tensor_specs(std::string_view flag,
                                                const std::vector<std::string>& specs);

}  // namespace kiln::cli
