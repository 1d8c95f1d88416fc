// Attention's products on kiln's gemm (hal/cpu/gemm_kernel.h), fused against unfused, on the
// benchmark corpus' head shapes (ViT-B/16 at batch 1, BERT-base at (1,128) and (4,128)): the
// unfused form packs K, runs the scores product with its scale and softmax into a stored [heads,
// S, S] buffer, packs V and multiplies the stored probabilities by it, as a MatMul with
// kiln_softmax and a second MatMul ran before passes::fuse_matmul folded them; the fused form
// (gemm::attend, a MatMul with kiln_values) packs K and V and multiplies each chunk of rows by V
// while it is in cache. Milliseconds side by side, never a test:
//   cmake --build build --target attention_bench && ./build/bench/attention_bench [reps [flush]]
// With `flush` 1 twice the last-level cache is read between runs (the default 0 keeps every
// operand in cache). Checks that both forms give the same bits first. Prints the median of `reps`
// alternating runs of each and their ratio, with this process's thread count (OMP_NUM_THREADS)
// and the ISA kiln's kernel runs (DNNL_MAX_CPU_ISA caps it).
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "kiln/base/aligned_memory.h"
#include "kiln/hal/cpu/gemm_kernel.h"
#include "side_by_side.h"

namespace {

using namespace kiln::hal::cpu;
using kiln::bench::median;
using kiln::bench::time_ms;

struct Heads {
  const char* name;
  int64_t count, s, d;  // heads (times the batch), sequence, head width
};

using Floats = std::unique_ptr<float, decltype(&std::free)>;
Floats aligned_floats(int64_t count) {
  return Floats(static_cast<float*>(
                    kiln::allocate_aligned_memory(static_cast<size_t>(count) * sizeof(float))),
                &std::free);
}

void bench(const Heads& h, int reps, kiln::bench::CacheEvictor& caches) {
  const int64_t count = h.count, s = h.s, d = h.d;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> q(count * s * d), k(count * s * d), v(count * s * d);
  for (std::vector<float>* x : {&q, &k, &v}) {
    for (float& e : *x) e = uniform(rng);
  }
  const int64_t per_k = gemm::packed_floats(d, s), per_v = gemm::packed_floats(s, d);
  Floats packed_k = aligned_floats(count * per_k), packed_v = aligned_floats(count * per_v);
  Floats probabilities = aligned_floats(count * s * s);
  std::vector<float> unfused_y(count * s * d), fused_y(count * s * d);
  std::vector<int64_t> matrices, a_offsets, k_offsets, v_offsets, p_offsets;
  for (int64_t i = 0; i < count; ++i) {
    matrices.push_back(i * s * d);
    a_offsets.push_back(i * s * d);
    k_offsets.push_back(i * per_k);
    v_offsets.push_back(i * per_v);
    p_offsets.push_back(i * s * s);
  }
  gemm::Product scores = gemm::dense_product(s, d, s);
  scores.alpha = 0.125f;
  scores.softmax = true;
  const gemm::Product values = gemm::dense_product(s, s, d);
  // K [S, d] read as K^T [d, S] (row stride 1, column stride d), V [S, d] as it is.
  auto pack_k = [&] { gemm::pack(d, s, k.data(), matrices, 1, d, packed_k.get()); };
  auto pack_v = [&] { gemm::pack(s, d, v.data(), matrices, d, 1, packed_v.get()); };
  auto unfused = [&] {
    pack_k();
    gemm::multiply(scores, q.data(), a_offsets, packed_k.get(), k_offsets, probabilities.get(),
                   s * s);
    pack_v();
    gemm::multiply(values, probabilities.get(), p_offsets, packed_v.get(), v_offsets,
                   unfused_y.data(), s * d);
  };
  auto fused = [&] {
    pack_k();
    pack_v();
    gemm::attend(scores, q.data(), a_offsets, packed_k.get(), k_offsets, values, packed_v.get(),
                 v_offsets, fused_y.data(), s * d, {});
  };
  unfused();
  fused();
  if (std::memcmp(unfused_y.data(), fused_y.data(), fused_y.size() * sizeof(float)) != 0) {
    std::printf("%-14s the fused form's bits differ from the unfused form's\n", h.name);
    std::exit(1);
  }
  std::vector<double> unfused_ms, fused_ms;
  for (int r = 0; r < reps; ++r) {
    caches.evict();
    unfused_ms.push_back(time_ms(unfused));
    caches.evict();
    fused_ms.push_back(time_ms(fused));
  }
  const double u = median(unfused_ms), f = median(fused_ms);
  const double gflop = 4.0 * static_cast<double>(count * s * s * d) * 1e-9;
  std::printf(
      "%-14s %3lld heads x %4lld x %3lld  unfused %7.3f ms (%4.0f GFLOP/s)  fused %7.3f ms "
      "(%4.0f)  ratio %.2f\n",
      h.name, static_cast<long long>(count), static_cast<long long>(s), static_cast<long long>(d),
      u, gflop / u * 1e3, f, gflop / f * 1e3, f / u);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 41;
  const bool flush = argc > 2 && std::atoi(argv[2]) != 0;
  if (!gemm::cpu_supported()) {
    std::printf("this CPU lacks AVX2 and FMA: kiln's gemm does not run here\n");
    return 0;
  }
  kiln::bench::CacheEvictor caches(flush);
  std::printf("threads %d, kiln_gemm:%s, caches %s between runs\n", omp_get_max_threads(),
              gemm::isa_name(gemm::best_isa()), caches.between_runs().c_str());
  for (const Heads& h :
       {Heads{"vit b1", 12, 197, 64}, Heads{"bert (1,128)", 12, 128, 64},
        Heads{"bert (4,128)", 48, 128, 64}, Heads{"long (1,1024)", 12, 1024, 64}}) {
    bench(h, reps, caches);
  }
  return 0;
}
