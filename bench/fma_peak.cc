// fma_peak: the machine's f32 FMA throughput, the ceiling a compute-bound kernel can reach.
//
// Usage: fma_peak [--threads N] [--ms M] [--json]
//
// Each of N threads (pinned to core i when the affinity mask allows) runs a loop of independent
// FMA chains held in registers, for AVX2 (ymm, 8 lanes) and, when the CPU has it, AVX-512 (zmm,
// 16 lanes). The figure per ISA is the best of several timed rounds of about M ms each, counting
// 2 flops per lane per FMA. Prints one line per ISA, or with --json one JSON object:
// {"threads":N,"avx2_gflops":...,"avx512_gflops":...|null,"peak_gflops":max of both}.
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kChains = 12;  // covers FMA latency x pipes on current x86 cores (4 x 2, 4 x 3)
constexpr long kInner = 1000;

// Returns the number of FMAs per lane executed (kChains * kInner * outer).
__attribute__((target("avx2,fma"))) long fma_avx2(long outer, float* sink) {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(1.0f + 0.001f * static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long o = 0; o < outer; ++o) {
    for (long k = 0; k < kInner; ++k) {
#pragma GCC unroll 12
      for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    }
    // Keep the compiler from reassociating across the outer loop.
    __asm__ volatile("" : "+x"(acc[0]), "+x"(acc[1]), "+x"(acc[2]), "+x"(acc[3]));
  }
  __m256 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  *sink = out[0];
  return outer * kInner * kChains * 8;
}

__attribute__((target("avx512f"))) long fma_avx512(long outer, float* sink) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(1.0f + 0.001f * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long o = 0; o < outer; ++o) {
    for (long k = 0; k < kInner; ++k) {
#pragma GCC unroll 12
      for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    }
    __asm__ volatile("" : "+v"(acc[0]), "+v"(acc[1]), "+v"(acc[2]), "+v"(acc[3]));
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  // Summed through memory: GCC 12's _mm512_reduce_add_ps trips its own -Wuninitialized.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float total = 0;
  for (float lane : lanes) total += lane;
  *sink = total;
  return outer * kInner * kChains * 16;
}

using Kernel = long (*)(long, float*);

void pin_to(int index) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  int seen = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (seen++ == index) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
      return;
    }
  }
}

// GFLOP/s of `threads` threads each running `kernel` for `outer` outer iterations; the time is
// the slowest thread's (all start together).
double run_round(Kernel kernel, int threads, long outer) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> seconds(threads);
  std::vector<long> lanes(threads);
  std::vector<float> sinks(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      pin_to(t);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      auto start = std::chrono::steady_clock::now();
      lanes[t] = kernel(outer, &sinks[t]);
      seconds[t] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  double total_flops = 0;
  for (long l : lanes) total_flops += 2.0 * static_cast<double>(l);
  return total_flops / *std::max_element(seconds.begin(), seconds.end()) / 1e9;
}

double measure(Kernel kernel, int threads, double ms) {
  // Calibrate the outer count on one thread so a round lasts about `ms`.
  float sink;
  long outer = 10;
  for (;;) {
    auto start = std::chrono::steady_clock::now();
    kernel(outer, &sink);
    double took =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (took > ms / 4 || outer > (1L << 40)) {
      outer = std::max(1L, static_cast<long>(static_cast<double>(outer) * ms / took));
      break;
    }
    outer *= 4;
  }
  double best = 0;
  for (int round = 0; round < 7; ++round) best = std::max(best, run_round(kernel, threads, outer));
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  double ms = 200;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--ms" && i + 1 < argc) {
      ms = std::atof(argv[++i]);
    } else if (a == "--json") {
      json = true;
    } else {
      std::fprintf(stderr, "usage: fma_peak [--threads N] [--ms M] [--json]\n");
      return 2;
    }
  }
  if (threads < 1 || ms <= 0) {
    std::fprintf(stderr, "fma_peak: --threads must be >= 1 and --ms > 0\n");
    return 2;
  }
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::fprintf(stderr, "fma_peak: this CPU has no AVX2 FMA\n");
    return 1;
  }
  const double avx2 = measure(fma_avx2, threads, ms);
  const bool has_avx512 = __builtin_cpu_supports("avx512f");
  const double avx512 = has_avx512 ? measure(fma_avx512, threads, ms) : 0.0;
  const double peak = std::max(avx2, avx512);
  if (json) {
    std::printf("{\"threads\":%d,\"avx2_gflops\":%.2f,\"avx512_gflops\":%s,\"peak_gflops\":%.2f}\n",
                threads, avx2, has_avx512 ? std::to_string(avx512).c_str() : "null", peak);
  } else {
    std::printf("fma_peak: %d threads: AVX2 FMA %.1f GFLOP/s", threads, avx2);
    if (has_avx512) std::printf(", AVX-512 FMA %.1f GFLOP/s", avx512);
    std::printf("; peak %.1f GFLOP/s\n", peak);
  }
  return 0;
}
