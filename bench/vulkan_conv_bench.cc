// The Vulkan backend's conv shaders side by side: GFLOP/s of the tiled implicit GEMM
// (conv_gemm.comp) and of the direct one-invocation-per-output kernel (conv_direct.comp, the
// naive reference) on a few ResNet-like layers, batch 1, on the default Vulkan device (lavapipe
// on machines without a GPU). Each figure is the best of a few runs of a prepared program, the
// run including its input and output transfers. Not a test: it asserts nothing.
//
//   cmake --build build --target vulkan_conv_bench && ./build/src/kiln/hal/vulkan/vulkan_conv_bench
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "kiln/hal/cpu/cpu_device.h"
#include "kiln/hal/vulkan/conv_ops.h"
#include "kiln/hal/vulkan/vulkan_device.h"
#include "tests/support/hal/program.h"
#include "tests/support/tensors.h"

namespace {

using namespace kiln;

struct Layer {
  const char* name;
  int64_t cin, cout, size, kernel, stride;
};

// Seconds of the best of `runs` runs (after one warm-up), or a negative value on an error.
double time_conv(hal::Device& device, const Layer& l, hal::vulkan::ConvVariant variant) {
  hal::vulkan::set_conv_variant_for_testing(variant);
  const int64_t pad = l.kernel / 2;
  const int64_t out = (l.size + 2 * pad - l.kernel) / l.stride + 1;
  kiln::testing::SpecBuilder s;
  const int32_t x = s.input("x", {1, l.cin, l.size, l.size});
  const int32_t w =
      s.constant("w", kiln::testing::random_tensor({l.cout, l.cin, l.kernel, l.kernel}, 2));
  const int32_t bias = s.constant("b", kiln::testing::random_tensor({l.cout}, 3));
  const int32_t y = s.output("y", {1, l.cout, out, out});
  Attributes a;
  a.set("kernel_shape", std::vector<int64_t>{l.kernel, l.kernel});
  a.set("strides", std::vector<int64_t>{l.stride, l.stride});
  a.set("pads", std::vector<int64_t>{pad, pad, pad, pad});
  a.set("kiln_activation", std::string("relu"));
  s.dispatch("conv", "Conv", {x, w, bias}, {y}, a);
  auto exe = device.prepare(s.spec());
  if (!exe.ok()) {
    std::fprintf(stderr, "%s\n", exe.status().to_string().c_str());
    return -1;
  }
  const Tensor input = kiln::testing::random_tensor({1, l.cin, l.size, l.size}, 1);
  double best = 1e30;
  for (int run = 0; run < 4; ++run) {
    const auto start = std::chrono::steady_clock::now();
    auto result = kiln::testing::run_program(device, **exe, s.spec(), {input});
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!result.ok()) {
      std::fprintf(stderr, "%s\n", result.status().to_string().c_str());
      return -1;
    }
    if (run > 0) best = std::min(best, seconds);
  }
  return best;
}

}  // namespace

int main() {
  auto device = hal::vulkan::create_vulkan_device({}, hal::cpu::create_cpu_device);
  if (!device.ok()) {
    std::fprintf(stderr, "%s\n", device.status().to_string().c_str());
    return 1;
  }
  const Layer layers[] = {
      {"64->64 3x3 28x28", 64, 64, 28, 3, 1},
      {"128->128 3x3 14x14", 128, 128, 14, 3, 1},
      {"256->64 1x1 28x28", 256, 64, 28, 1, 1},
      {"128->256 3x3 s2 28x28", 128, 256, 28, 3, 2},
  };
  std::printf("%s\n%-24s %12s %12s %8s\n", (*device)->name().c_str(), "layer (batch 1)",
              "tiled GF/s", "naive GF/s", "speedup");
  for (const Layer& l : layers) {
    const int64_t pad = l.kernel / 2;
    const int64_t out = (l.size + 2 * pad - l.kernel) / l.stride + 1;
    const double flops = 2.0 * l.cout * out * out * l.cin * l.kernel * l.kernel;
    const double tiled = time_conv(**device, l, hal::vulkan::ConvVariant::kTiled);
    const double naive = time_conv(**device, l, hal::vulkan::ConvVariant::kDirect);
    if (tiled < 0 || naive < 0) return 1;
    std::printf("%-24s %12.2f %12.2f %7.1fx\n", l.name, flops / tiled * 1e-9, flops / naive * 1e-9,
                naive / tiled);
  }
  hal::vulkan::set_conv_variant_for_testing(hal::vulkan::ConvVariant::kAuto);
  return 0;
}
