#include "kiln/hal/cpu/conv_batch_probe.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <unordered_map>
#include <vector>

#include "kiln/base/aligned_memory.h"
#include "kiln/hal/cpu/dnnl_util.h"

namespace kiln::hal::cpu {
namespace {

// A buffer of floats from kiln's host allocator: big ones on huge pages, whose first touch
// faults far less than 4 KiB pages (the probe's activations are fresh memory of many megabytes).
struct Floats {
  std::unique_ptr<float, decltype(&std::free)> data{nullptr, &std::free};
  size_t count = 0;
  explicit Floats(size_t bytes)
      : data(static_cast<float*>(allocate_aligned_memory(bytes)), &std::free),
        count((bytes + sizeof(float) - 1) / sizeof(float)) {
    if (bytes != 0 && data == nullptr) throw std::bad_alloc();
  }
  float* get() const { return data.get(); }
};

// Pseudo-random floats in [-0.5, 0.5) filling `bytes` (a layout's whole buffer, padding included:
// both runs read the same values, so what padding holds does not matter to the comparison). An
// integer hash of the index and `seed` gives the 23 mantissa bits: cheap enough for activations
// of many megabytes.
Floats random_floats(size_t bytes, uint32_t seed) {
  Floats values(bytes);
  for (size_t i = 0; i < values.count; ++i) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u + seed;
    h ^= h >> 15;
    h *= 0x85EBCA77u;
    h ^= h >> 13;
    const uint32_t bits = 0x3F800000u | (h >> 9);  // [1, 2)
    float v;
    std::memcpy(&v, &bits, sizeof v);
    values.get()[i] = v - 1.5f;
  }
  return values;
}

}  // namespace

bool batched_conv_matches_per_sample(const dnnl::engine& engine,
                                     const dnnl::convolution_forward::primitive_desc& single,
                                     const dnnl::convolution_forward::primitive_desc& batched,
                                     int64_t batch, bool has_bias) {
  // The batched primitive's layouts must be the one-sample ones with a batch (sample n's bytes
  // at n sample strides), so one buffer serves both runs without a reorder.
  const auto src_stride = sample_stride_bytes(single.src_desc());
  const auto dst_stride = sample_stride_bytes(single.dst_desc());
  const auto src_all = with_batch(single.src_desc(), batch);
  const auto dst_all = with_batch(single.dst_desc(), batch);
  const auto f32 = dnnl::memory::data_type::f32;
  if (batched.src_desc().data_type() != f32 || batched.weights_desc().data_type() != f32 ||
      batched.dst_desc().data_type() != f32) {
    return false;  // the random values below are f32
  }
  if (!src_stride || !dst_stride || !src_all.ok() || !dst_all.ok() ||
      *src_all != batched.src_desc() || *dst_all != batched.dst_desc() ||
      single.weights_desc() != batched.weights_desc() ||
      (has_bias && single.bias_desc() != batched.bias_desc())) {
    return false;
  }
  try {
    dnnl::stream stream(engine);
    const Floats src = random_floats(batched.src_desc().get_size(), 1);
    const Floats weights = random_floats(batched.weights_desc().get_size(), 2);
    const Floats bias = random_floats(has_bias ? batched.bias_desc().get_size() : 0, 3);
    // The destination starts as a random residual: a sum post-op reads it, others overwrite it.
    const size_t dst_bytes = batched.dst_desc().get_size();
    const Floats residual = random_floats(dst_bytes, 4);
    Floats all(dst_bytes), one(*dst_stride);
    std::memcpy(all.get(), residual.get(), dst_bytes);
    const dnnl::memory scratchpad(
        batched.scratchpad_desc().get_size() >= single.scratchpad_desc().get_size()
            ? batched.scratchpad_desc()
            : single.scratchpad_desc(),
        engine);
    const dnnl::convolution_forward batched_conv(batched), single_conv(single);
    auto run = [&](const dnnl::convolution_forward::primitive_desc& pd,
                   const dnnl::convolution_forward& conv, float* s, float* d) {
      std::unordered_map<int, dnnl::memory> args{
          {DNNL_ARG_SRC, dnnl::memory(pd.src_desc(), engine, s)},
          {DNNL_ARG_WEIGHTS, dnnl::memory(pd.weights_desc(), engine, weights.get())},
          {DNNL_ARG_DST, dnnl::memory(pd.dst_desc(), engine, d)},
          // The builder's attributes leave the scratchpad to the caller.
          {DNNL_ARG_SCRATCHPAD,
           dnnl::memory(pd.scratchpad_desc(), engine, scratchpad.get_data_handle())}};
      if (has_bias) args[DNNL_ARG_BIAS] = dnnl::memory(pd.bias_desc(), engine, bias.get());
      conv.execute(stream, args);
      stream.wait();
    };
    run(batched, batched_conv, src.get(), all.get());
    const size_t src_floats = *src_stride / sizeof(float), dst_floats = one.count;
    for (int64_t n = 0; n < batch; ++n) {
      std::memcpy(one.get(), residual.get() + n * dst_floats, *dst_stride);
      run(single, single_conv, src.get() + n * src_floats, one.get());
      if (std::memcmp(one.get(), all.get() + n * dst_floats, *dst_stride) != 0) return false;
    }
    return true;
  } catch (const dnnl::error&) {
    return false;
  } catch (const std::bad_alloc&) {
    return false;
  }
}

}  // namespace kiln::hal::cpu
