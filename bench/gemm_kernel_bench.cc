// kiln's f32 gemm (hal/cpu/gemm_kernel.h) against oneDNN's matmul on the products of kiln's
// benchmark corpus (BERT-base, ViT-B/16 at batch 1 and 4, the MLP's first product with its GELU
// on both sides, kiln's in its epilogue and oneDNN's as an eltwise post-op; attention's per-head
// products; ResNet-50's 1x1 convolutions at batch 1, a row per pixel, as a channels-last 1x1 conv
// of up to 64 pixels runs, conv_op.cc), milliseconds side by side (never a test):
//   cmake --build build --target gemm_kernel_bench &&
//   ./build/bench/gemm_kernel_bench [reps [flush]]
// Both get their B prepared once (kiln's packed panels; oneDNN's weights in the layout its
// primitive asks for), as a constant weight is in a module; attention's B, computed in a model,
// is prepared once here too, so those rows time the product alone. With `flush` 1 (the default),
// twice the last-level cache is read between runs, so every operand comes from memory, as a
// transformer's weights do between its layers (kiln bench --per-dispatch gives the in-model
// figures); with 0 every operand stays in cache. Prints the median of `reps` alternating runs of
// each and their ratio, with this process's thread count (OMP_NUM_THREADS) and the ISA kiln's
// kernel runs (DNNL_MAX_CPU_ISA caps both).
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <vector>

#include "kiln/base/aligned_memory.h"
#include "kiln/hal/cpu/dnnl_util.h"
#include "kiln/hal/cpu/gemm_kernel.h"
#include "side_by_side.h"

namespace {

using namespace kiln::hal::cpu;
using kiln::bench::median;
using kiln::bench::time_ms;

struct Shape {
  const char* name;
  int64_t m, k, n, count;  // `count` products of one shape, each with its own A, B and Y
  bool gelu = false;       // then GELU (erf form) of each element, as a transformer MLP's first
};

std::vector<float> random_floats(size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = uniform(rng);
  return v;
}

void bench(dnnl::engine& eng, dnnl::stream& strm, const Shape& s, int reps,
           kiln::bench::CacheEvictor& caches) {
  std::mt19937 rng(1);
  const int64_t a_size = s.m * s.k, b_size = s.k * s.n, y_size = s.m * s.n;
  const std::vector<float> a = random_floats(static_cast<size_t>(s.count * a_size), rng);
  const std::vector<float> b = random_floats(static_cast<size_t>(s.count * b_size), rng);
  std::vector<float> y(static_cast<size_t>(s.count * y_size));

  // kiln: B packed once, the products in one call.
  const int64_t per_packed = gemm::packed_floats(s.k, s.n);
  // Packed panels as kiln keeps a constant's: aligned, huge pages for a big one.
  std::unique_ptr<float, decltype(&std::free)> packed(
      static_cast<float*>(
          kiln::allocate_aligned_memory(static_cast<size_t>(s.count * per_packed) * sizeof(float))),
      &std::free);
  std::vector<int64_t> a_offsets, b_offsets, b_sources;
  for (int64_t i = 0; i < s.count; ++i) {
    a_offsets.push_back(i * a_size);
    b_offsets.push_back(i * per_packed);
    b_sources.push_back(i * b_size);
  }
  gemm::pack(s.k, s.n, b.data(), b_sources, s.n, 1, packed.get());
  gemm::Product product = gemm::dense_product(s.m, s.k, s.n);
  if (s.gelu) product.activation = gemm::Activation::kGelu;
  auto run_kiln = [&] {
    gemm::multiply(product, a.data(), a_offsets, packed.get(), b_offsets, y.data(), y_size);
  };

  // oneDNN: one (batched) matmul, B reordered once into the layout the primitive asks for.
  const dnnl::memory::dims ad{s.count, s.m, s.k}, bd{s.count, s.k, s.n}, yd{s.count, s.m, s.n};
  // A plain f32 operand of dims `d`, or one in the layout the primitive picks.
  auto f32 = [](const dnnl::memory::dims& d, bool any) {
    return dnnl::memory::desc(d, dnnl::memory::data_type::f32,
                              any ? dnnl::memory::format_tag::any : dnnl::memory::format_tag::abc);
  };
  dnnl::primitive_attr attr;
  if (s.gelu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(f32(ad, false), f32(bd, true), f32(yd, false)),
                                  attr, eng);
  dnnl::memory b_plain(f32(bd, false), eng, const_cast<float*>(b.data()));
  dnnl::memory b_mem(pd.weights_desc(), eng);
  dnnl::reorder(b_plain, b_mem).execute(strm, b_plain, b_mem);
  dnnl::memory a_mem(pd.src_desc(), eng, const_cast<float*>(a.data()));
  dnnl::memory y_mem(pd.dst_desc(), eng, y.data());
  dnnl::matmul matmul(pd);
  auto run_dnnl = [&] {
    matmul.execute(strm, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, y_mem}});
    strm.wait();
  };

  run_kiln();
  run_dnnl();
  std::vector<double> kiln_ms, dnnl_ms;
  for (int r = 0; r < reps; ++r) {
    caches.evict();
    kiln_ms.push_back(time_ms(run_kiln));
    caches.evict();
    dnnl_ms.push_back(time_ms(run_dnnl));
  }
  const double kiln = median(kiln_ms), onednn = median(dnnl_ms);
  const double gflop = 2.0 * static_cast<double>(s.count * s.m * s.k * s.n) * 1e-9;
  std::printf(
      "%-22s %4lldx%-4lldx%-5lld x%-3lld%s  oneDNN %-16s %7.3f ms (%4.0f GFLOP/s)  "
      "kiln_gemm:%-7s %7.3f ms (%4.0f)  ratio %.2f\n",
      s.name, static_cast<long long>(s.m), static_cast<long long>(s.k), static_cast<long long>(s.n),
      static_cast<long long>(s.count), s.gelu ? " +gelu" : "      ", impl_name(pd).c_str(), onednn,
      gflop / onednn * 1e3, gemm::isa_name(gemm::best_isa()), kiln, gflop / kiln * 1e3,
      kiln / onednn);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 21;
  const bool flush = argc > 2 ? std::atoi(argv[2]) != 0 : true;
  if (!gemm::cpu_supported()) {
    std::printf("this CPU lacks AVX2 and FMA: kiln's gemm does not run here\n");
    return 0;
  }
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  kiln::bench::CacheEvictor caches(flush);  // one buffer for every row
  std::printf("threads %d, caches %s between runs\n", omp_get_max_threads(),
              caches.between_runs().c_str());
  const Shape shapes[] = {
      {"bert qkv/proj b1", 128, 768, 768, 1},       {"bert ffn.0 b1", 128, 768, 3072, 1, true},
      {"bert ffn.2 b1", 128, 3072, 768, 1},         {"bert qkv/proj b4", 512, 768, 768, 1},
      {"bert ffn.0 b4", 512, 768, 3072, 1, true},   {"bert ffn.2 b4", 512, 3072, 768, 1},
      {"vit mlp.0 b1", 197, 768, 3072, 1, true},    {"vit mlp.3 b1", 197, 3072, 768, 1},
      {"vit mlp.0 b4", 788, 768, 3072, 1, true},    {"vit mlp.3 b4", 788, 3072, 768, 1},
      {"bert scores b1", 128, 64, 128, 12},         {"bert context b1", 128, 128, 64, 12},
      {"vit scores b1", 197, 64, 197, 12},          {"vit context b1", 197, 197, 64, 12},
      {"resnet 56x56 256>64", 3136, 256, 64, 1},    {"resnet 56x56 64>256", 3136, 64, 256, 1},
      {"resnet 28x28 512>128", 784, 512, 128, 1},   {"resnet 28x28 128>512", 784, 128, 512, 1},
      {"resnet 14x14 1024>256", 196, 1024, 256, 1}, {"resnet 14x14 256>1024", 196, 256, 1024, 1},
      {"resnet 7x7 2048>512", 49, 2048, 512, 1},    {"resnet 7x7 512>2048", 49, 512, 2048, 1},
  };
  for (const Shape& s : shapes) bench(eng, strm, s, reps, caches);
  return 0;
}
