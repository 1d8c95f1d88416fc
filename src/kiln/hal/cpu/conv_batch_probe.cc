#include "kiln/hal/cpu/conv_batch_probe.h"

#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <unordered_map>

#include "kiln/base/tensor.h"
#include "kiln/hal/cpu/dnnl_util.h"

namespace kiln::hal::cpu {
namespace {

// `bytes` of floats (a layout's whole buffer), uninitialized, from kiln's tensor allocator: big
// ones on huge pages, whose first touch faults far less than 4 KiB pages (the probe's
// activations are fresh memory of many megabytes).
std::span<float> floats(Tensor& storage, size_t bytes) {
  auto t = Tensor::create_uninitialized(
      DType::kF32, {static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float))});
  if (!t.ok()) throw std::bad_alloc();
  storage = std::move(t).value();
  return storage.mutable_values<float>();
}

// Pseudo-random floats in [-0.5, 0.5) filling `values` (a layout's whole buffer, padding
// included: both runs read the same values, so what padding holds does not matter to the
// comparison). An integer hash of the index and `seed` gives the 23 mantissa bits: cheap enough
// for activations of many megabytes.
void fill_random(std::span<float> values, uint32_t seed) {
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u + seed;
    h ^= h >> 15;
    h *= 0x85EBCA77u;
    h ^= h >> 13;
    const uint32_t bits = 0x3F800000u | (h >> 9);  // [1, 2)
    float v;
    std::memcpy(&v, &bits, sizeof v);
    values[i] = v - 1.5f;
  }
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
    Tensor storage[6];
    const std::span<float> src = floats(storage[0], batched.src_desc().get_size());
    const std::span<float> weights = floats(storage[1], batched.weights_desc().get_size());
    const std::span<float> bias = floats(storage[2], has_bias ? batched.bias_desc().get_size() : 0);
    // The destination starts as a random residual: a sum post-op reads it, others overwrite it.
    const size_t dst_bytes = batched.dst_desc().get_size();
    const std::span<float> residual = floats(storage[3], dst_bytes);
    const std::span<float> all = floats(storage[4], dst_bytes);
    const std::span<float> one = floats(storage[5], *dst_stride);
    fill_random(src, 1);
    fill_random(weights, 2);
    fill_random(bias, 3);
    fill_random(residual, 4);
    std::memcpy(all.data(), residual.data(), dst_bytes);
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
          {DNNL_ARG_WEIGHTS, dnnl::memory(pd.weights_desc(), engine, weights.data())},
          {DNNL_ARG_DST, dnnl::memory(pd.dst_desc(), engine, d)},
          // The builder's attributes leave the scratchpad to the caller.
          {DNNL_ARG_SCRATCHPAD,
           dnnl::memory(pd.scratchpad_desc(), engine, scratchpad.get_data_handle())}};
      if (has_bias) args[DNNL_ARG_BIAS] = dnnl::memory(pd.bias_desc(), engine, bias.data());
      conv.execute(stream, args);
      stream.wait();
    };
    run(batched, batched_conv, src.data(), all.data());
    const size_t src_floats = *src_stride / sizeof(float), dst_floats = one.size();
    for (int64_t n = 0; n < batch; ++n) {
      std::memcpy(one.data(), residual.data() + n * dst_floats, *dst_stride);
      run(single, single_conv, src.data() + n * src_floats, one.data());
      if (std::memcmp(one.data(), all.data() + n * dst_floats, *dst_stride) != 0) return false;
    }
    return true;
  } catch (const dnnl::error&) {
    return false;
  } catch (const std::bad_alloc&) {
    return false;
  }
}

}  // namespace kiln::hal::cpu
