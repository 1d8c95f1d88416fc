#include "kiln/suite/ort_reference.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/ranges.h>

#include "kiln/base/file_util.h"
#include "kiln/base/mapped_file.h"
#include "kiln/tooling/tensor_io.h"
#include "kiln/tooling/tensor_spec.h"

extern char** environ;

namespace kiln::suite {
namespace {

namespace fs = std::filesystem;

StatusOr<std::string> cache_key(const std::string& model_path,
                                std::span<const NamedTensor> inputs) {
  KILN_ASSIGN_OR_RETURN(MappedFile model, MappedFile::open(model_path));
  XXH64_state_t* state = XXH64_createState();
  if (state == nullptr) return internal_error("XXH64_createState failed");
  XXH64_reset(state, 0);
  XXH64_update(state, model.data(), model.size());
  for (const NamedTensor& input : inputs) {
    std::string header = fmt::format(
        "\n{}\n{}\n", input.name, format_tensor_type(input.tensor.dtype(), input.tensor.shape()));
    XXH64_update(state, header.data(), header.size());
    XXH64_update(state, input.tensor.data(), input.tensor.byte_size());
  }
  uint64_t hash = XXH64_digest(state);
  XXH64_freeState(state);
  return fmt::format("{}-{:016x}", fs::path(model_path).stem().string(), hash);
}

StatusOr<ConcreteShape> read_shape_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, read_file(path, 4096));
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  if (text == "scalar") return ConcreteShape{};
  auto type = parse_tensor_type(text + "xf32");
  if (!type.ok()) return data_loss("'{}' does not hold a shape like 8x1000: \"{}\"", path, text);
  return type->shape;
}

StatusOr<std::vector<Tensor>> read_entry(const fs::path& dir, std::span<const OutputType> outputs) {
  std::vector<Tensor> tensors;
  for (const OutputType& output : outputs) {
    const fs::path base = dir / ort_safe_name(output.name);
    KILN_ASSIGN_OR_RETURN(ConcreteShape shape, read_shape_file(base.string() + ".shape"));
    KILN_ASSIGN_OR_RETURN(Tensor tensor,
                          read_raw_tensor_file(base.string() + ".bin", output.dtype, shape));
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

bool entry_complete(const fs::path& dir, std::span<const OutputType> outputs) {
  std::error_code ec;
  for (const OutputType& output : outputs) {
    const fs::path base = dir / ort_safe_name(output.name);
    if (!fs::is_regular_file(base.string() + ".bin", ec) ||
        !fs::is_regular_file(base.string() + ".shape", ec)) {
      return false;
    }
  }
  return true;
}

// Runs argv with stdout and stderr going to `log`; returns the exit code (or -signal).
StatusOr<int> run_process(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  int err = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) return failed_precondition("cannot start '{}': {}", args[0], std::strerror(err));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return internal_error("waitpid failed: {}", std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? -WTERMSIG(status) : -1;
}

std::string tail(const std::string& text, size_t max_chars) {
  if (text.size() <= max_chars) return text;
  return "..." + text.substr(text.size() - max_chars);
}

std::atomic<uint64_t> temp_counter{0};

}  // namespace

std::string ort_safe_name(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  }
  return out;
}

StatusOr<std::vector<Tensor>> onnxruntime_reference(const std::string& model_path,
                                                    std::span<const NamedTensor> inputs,
                                                    std::span<const OutputType> outputs,
                                                    const OrtRunner& runner) {
  if (runner.cache_dir.empty())
    return invalid_argument("ONNX Runtime reference: no cache folder given");
  KILN_ASSIGN_OR_RETURN(std::string key, cache_key(model_path, inputs));
  const fs::path entry = fs::path(runner.cache_dir) / key;
  if (entry_complete(entry, outputs)) return read_entry(entry, outputs);

  std::error_code ec;
  if (runner.script.empty() || !fs::is_regular_file(runner.script, ec)) {
    return failed_precondition(
        "no cached ONNX Runtime reference for '{}' in '{}', and onnxruntime-node is not available "
        "(run_ort.js {}); install it with scripts/setup.sh, pass --ort-runner, or give reference "
        "files",
        model_path, entry.string(),
        runner.script.empty() ? "not configured" : fmt::format("'{}' not found", runner.script));
  }
  fs::create_directories(runner.cache_dir, ec);
  if (ec)
    return invalid_argument("cannot create cache folder '{}': {}", runner.cache_dir, ec.message());
  const fs::path temp = fs::path(runner.cache_dir) /
                        fmt::format("{}.tmp.{}.{}", key, getpid(), temp_counter.fetch_add(1));
  fs::create_directories(temp, ec);
  if (ec) return invalid_argument("cannot create '{}': {}", temp.string(), ec.message());
  struct Cleanup {
    fs::path path;
    ~Cleanup() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } cleanup{temp};

  std::vector<std::string> args = {runner.node, runner.script, "run", model_path};
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& tensor = inputs[i].tensor;
    const std::string file = (temp / fmt::format("input_{}.bin", i)).string();
    KILN_RETURN_IF_ERROR(write_tensor_file(file, tensor, TensorFileFormat::kRaw));
    std::string shape =
        tensor.shape().empty() ? "scalar" : fmt::format("{}", fmt::join(tensor.shape(), "x"));
    args.push_back("--input");
    args.push_back(
        fmt::format("{}={}:{}:{}", inputs[i].name, shape, dtype_name(tensor.dtype()), file));
  }
  const fs::path out = temp / "out";
  args.insert(args.end(), {"--output-dir", out.string(), "--threads",
                           std::to_string(std::max(1, runner.threads))});
  const std::string log = (temp / "ort.log").string();
  KILN_ASSIGN_OR_RETURN(int code, run_process(args, log));
  if (code != 0) {
    auto text = read_file(log, 1 << 20);
    return failed_precondition("ONNX Runtime failed on '{}' (exit {}): {}", model_path, code,
                               text.ok() ? tail(*text, 1500) : std::string("(no output)"));
  }
  if (!entry_complete(out, outputs)) {
    return data_loss("ONNX Runtime ran '{}' but did not write every expected output (in '{}')",
                     model_path, out.string());
  }
  fs::rename(out, entry, ec);
  // A parallel case may have made the same entry first; then use it.
  if (ec && !entry_complete(entry, outputs)) {
    return invalid_argument("cannot store the ONNX Runtime reference in '{}': {}", entry.string(),
                            ec.message());
  }
  return read_entry(entry, outputs);
}

}  // namespace kiln::suite
