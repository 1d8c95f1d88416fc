// GFLOP/s of the Vulkan backend's tiled matmul shader (shaders/matmul.comp) against the naive one
// (shaders/matmul_naive.comp), side by side, on the default Vulkan device (lavapipe on machines
// without a GPU). Each shape is prepared once per shader and run `reps` times after one warm-up
// run; the time is the wall time of the runs (submit and wait), so small shapes include the
// submission overhead. Also checks that both shaders give the same result to 1e-3.
//
//   build/bench/vulkan_matmul [reps]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "kiln/hal/cpu/cpu_device.h"
#include "kiln/hal/device.h"
#include "kiln/hal/vulkan/op_table.h"
#include "kiln/hal/vulkan/vulkan_device.h"

using namespace kiln;
using namespace kiln::hal;

namespace {

struct Shape3 {
  int64_t m, k, n;
};

// Runs an [m, k] x [k, n] MatMul with `shader` `reps` times; returns seconds per run and the
// output.
StatusOr<double> time_matmul(Device& device, const Shape3& s, vulkan::MatmulShader shader, int reps,
                             const std::vector<float>& a, const std::vector<float>& b,
                             std::vector<float>& y) {
  vulkan::set_matmul_shader_for_testing(shader);
  ProgramSpec spec;
  auto add = [&](const char* name, ConcreteShape shape, ValueRole role) {
    ValueSpec v;
    v.name = name;
    v.shape = std::move(shape);
    v.role = role;
    spec.values.push_back(std::move(v));
    return static_cast<int32_t>(spec.values.size() - 1);
  };
  const int32_t ai = add("a", {s.m, s.k}, ValueRole::kInput);
  const int32_t bi = add("b", {s.k, s.n}, ValueRole::kInput);
  const int32_t yi = add("y", {s.m, s.n}, ValueRole::kOutput);
  spec.inputs = {ai, bi};
  spec.outputs = {yi};
  DispatchSpec d;
  d.name = "matmul";
  d.op_type = "MatMul";
  d.inputs = {ai, bi};
  d.outputs = {yi};
  spec.dispatches.push_back(d);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Executable> exe, device.prepare(spec));
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<BufferRef> refs;
  for (const ValueSpec& v : spec.values) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Buffer> buffer,
                          device.allocator().allocate(plain_bytes(v), MemoryType::kDeviceLocal));
    refs.push_back(BufferRef{buffer.get(), 0});
    buffers.push_back(std::move(buffer));
  }
  auto bytes = [](const std::vector<float>& v) {
    return std::span(reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(float));
  };
  KILN_RETURN_IF_ERROR(device.queue().write(refs[ai], bytes(a)));
  KILN_RETURN_IF_ERROR(device.queue().write(refs[bi], bytes(b)));
  RunArgs args;
  args.values = refs;
  KILN_RETURN_IF_ERROR(exe->run(args));  // warm-up (records the command buffer)
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) KILN_RETURN_IF_ERROR(exe->run(args));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
  y.assign(static_cast<size_t>(s.m * s.n), 0.0f);
  KILN_RETURN_IF_ERROR(device.queue().read(
      refs[yi], std::span(reinterpret_cast<std::byte*>(y.data()), y.size() * sizeof(float))));
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  auto device = vulkan::create_vulkan_device(DeviceOptions{}, cpu::create_cpu_device);
  if (!device.ok()) {
    std::fprintf(stderr, "no Vulkan device: %s\n", device.status().to_string().c_str());
    return 1;
  }
  const Shape3 shapes[] = {{128, 128, 128}, {256, 512, 256}, {100, 768, 300}};
  std::printf("%-18s %12s %12s %8s\n", "M x K x N", "naive GF/s", "tiled GF/s", "speedup");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  int status = 0;
  for (const Shape3& s : shapes) {
    std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.k * s.n));
    for (float& v : a) v = dist(rng);
    for (float& v : b) v = dist(rng);
    std::vector<float> y_naive, y_tiled;
    auto naive = time_matmul(**device, s, vulkan::MatmulShader::kNaive, reps, a, b, y_naive);
    auto tiled = time_matmul(**device, s, vulkan::MatmulShader::kTiled, reps, a, b, y_tiled);
    if (!naive.ok() || !tiled.ok()) {
      std::fprintf(stderr, "%s\n",
                   (naive.ok() ? tiled.status() : naive.status()).to_string().c_str());
      return 1;
    }
    double worst = 0;
    for (size_t i = 0; i < y_naive.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(y_naive[i] - y_tiled[i])));
    }
    const double flops = 2.0 * static_cast<double>(s.m * s.k * s.n);
    char label[64];
    std::snprintf(label, sizeof label, "%ldx%ldx%ld", static_cast<long>(s.m),
                  static_cast<long>(s.k), static_cast<long>(s.n));
    std::printf("%-18s %12.2f %12.2f %7.1fx%s\n", label, flops / *naive * 1e-9,
                flops / *tiled * 1e-9, *naive / *tiled, worst > 1e-3 ? "  (results differ!)" : "");
    if (worst > 1e-3) status = 1;
  }
  return status;
}
