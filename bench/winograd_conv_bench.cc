// kiln's Winograd F(2x2, 3x3) and F(4x4, 3x3) kernels (hal/cpu/winograd_conv.h) against oneDNN's
// direct convolution on ResNet-50's 3x3 stride-1 shapes, milliseconds side by side (never a test):
//   cmake --build build --target winograd_conv_bench &&
//   ./build/bench/winograd_conv_bench [reps [channels [batch [flush]]]]
// Both read and write the layout oneDNN's direct kernel picks for one sample on this machine
// (DNNL_MAX_CPU_ISA applies), the direct kernel run per sample as kiln runs it, with the weights
// prepared once. Prints the median of `reps` runs of each, alternating, at batch 1 and 8, and
// marks the tile edge kiln picks for the shape (winograd::preferred_tile). With `flush` 0 (the
// default) the weights and activations stay in cache from run to run; with 1, every run finds
// them in memory, as a model's layer finds its weights, which favours F(2x2)'s smaller ones at
// batch 1.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <vector>

#include "kiln/hal/cpu/cpu_isa.h"
#include "kiln/hal/cpu/dnnl_util.h"
#include "kiln/hal/cpu/winograd_conv.h"
#include "side_by_side.h"

namespace {

using namespace kiln::hal::cpu;
using kiln::bench::median;
using kiln::bench::time_ms;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

void bench(dnnl::engine& eng, dnnl::stream& strm, int64_t n, int64_t c, int64_t hw, int reps,
           kiln::bench::CacheEvictor& caches) {
  const dnnl::memory::dims x1{1, c, hw, hw}, w{c, c, 3, 3}, pads{1, 1}, strides{1, 1};
  dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
      dnnl::memory::desc(x1, dt::f32, tag::any), dnnl::memory::desc(w, dt::f32, tag::any),
      dnnl::memory::desc({c}, dt::f32, tag::a), dnnl::memory::desc(x1, dt::f32, tag::any), strides,
      pads, pads);
  dnnl::convolution_forward::primitive_desc pd(desc, eng);
  const bool nhwc = pd.src_desc() == dnnl::memory::desc(x1, dt::f32, tag::nhwc);
  const Isa isa = best_isa();
  winograd::Conv3x3 s{c, c, hw, hw, hw, hw, 1, 1, nhwc};
  if (winograd::unsupported_reason(s, isa) != nullptr) return;
  const int64_t preferred = winograd::preferred_tile(s);

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const size_t sample = static_cast<size_t>(c * hw * hw);
  std::vector<float> x(n * sample), weights(c * c * 9), bias(c), y(n * sample);
  for (float& v : x) v = uniform(rng);
  for (float& v : weights) v = uniform(rng) * 0.05f;
  for (float& v : bias) v = uniform(rng);

  // oneDNN: weights reordered once, one call per sample.
  dnnl::memory wei_plain({w, dt::f32, tag::oihw}, eng, weights.data());
  dnnl::memory wei(pd.weights_desc(), eng);
  dnnl::reorder(wei_plain, wei).execute(strm, wei_plain, wei);
  dnnl::memory bias_mem({{c}, dt::f32, tag::a}, eng, bias.data());
  dnnl::convolution_forward conv(pd);
  auto run_direct = [&] {
    for (int64_t i = 0; i < n; ++i) {
      dnnl::memory src(pd.src_desc(), eng, x.data() + i * sample);
      dnnl::memory dst(pd.dst_desc(), eng, y.data() + i * sample);
      conv.execute(strm, {{DNNL_ARG_SRC, src},
                          {DNNL_ARG_WEIGHTS, wei},
                          {DNNL_ARG_BIAS, bias_mem},
                          {DNNL_ARG_DST, dst}});
    }
    strm.wait();
  };
  // One Winograd run per tile edge, each with its own weights and workspace.
  struct Winograd {
    winograd::Conv3x3 shape;
    std::vector<float> u;
    std::vector<std::byte> workspace;
    std::vector<double> ms;
  };
  const int threads = omp_get_max_threads();
  std::vector<Winograd> runs;
  for (int64_t tile : {2, 4}) {
    Winograd r{s, {}, {}, {}};
    r.shape.tile = tile;
    r.u.resize(winograd::transformed_weight_count(r.shape));
    winograd::transform_weights(r.shape, weights.data(), r.u.data());
    r.workspace.resize(winograd::workspace_bytes(r.shape, n, isa, threads) + 64);
    runs.push_back(std::move(r));
  }
  const winograd::Epilogue e{bias.data(), false, {}};
  auto run_winograd = [&](Winograd& r) {
    std::byte* aligned =
        r.workspace.data() + (64 - reinterpret_cast<uintptr_t>(r.workspace.data()) % 64) % 64;
    winograd::run(r.shape, n, x.data(), r.u.data(), e, y.data(), aligned, isa, threads);
  };

  run_direct();
  for (Winograd& r : runs) run_winograd(r);
  std::vector<double> direct_ms;
  for (int rep = 0; rep < reps; ++rep) {
    caches.evict();
    direct_ms.push_back(time_ms(run_direct));
    for (Winograd& r : runs) {
      caches.evict();
      r.ms.push_back(time_ms([&] { run_winograd(r); }));
    }
  }
  const double direct = median(direct_ms);
  const double gflop = 2.0 * n * c * c * 9 * hw * hw * 1e-9;
  std::printf("N %2lld C=M %3lld %2lldx%-2lld %-6s direct %-22s %7.3f ms (%5.0f GFLOP/s)",
              static_cast<long long>(n), static_cast<long long>(c), static_cast<long long>(hw),
              static_cast<long long>(hw), nhwc ? "nhwc" : "blocked", impl_name(pd).c_str(), direct,
              gflop / direct * 1e3);
  for (const Winograd& r : runs) {
    const double wino = median(r.ms);
    std::printf("  %sF%lld:%s %7.3f ms (%5.0f) ratio %.2f", r.shape.tile == preferred ? "*" : " ",
                static_cast<long long>(r.shape.tile), isa_name(isa), wino, gflop / wino * 1e3,
                wino / direct);
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 21;
  const int64_t only_c = argc > 2 ? std::atoll(argv[2]) : 0;  // one channel count only
  const int64_t only_n = argc > 3 ? std::atoll(argv[3]) : 0;  // one batch size only
  const bool flush = argc > 4 && std::atoi(argv[4]) != 0;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  kiln::bench::CacheEvictor caches(flush);  // one buffer for every shape
  std::printf("threads %d, caches %s between runs\n", omp_get_max_threads(),
              caches.between_runs().c_str());
  for (int64_t n : {1, 8}) {
    for (auto [c, hw] : {std::pair<int64_t, int64_t>{64, 56}, {128, 28}, {256, 14}, {512, 7}}) {
      if ((only_c != 0 && c != only_c) || (only_n != 0 && n != only_n)) continue;
      bench(eng, strm, n, c, hw, reps, caches);
    }
  }
  return 0;
}
