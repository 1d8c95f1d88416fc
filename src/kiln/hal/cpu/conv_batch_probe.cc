#include "kiln/hal/cpu/conv_batch_probe.h"

#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <unordered_map>

#include "kiln/base/tensor.h"
#include "kiln/hal/cpu/activation_step.h"
#include "kiln/hal/cpu/device_state.h"
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

// A random source, weights, bias and, where `pd` sums into its destination, a residual (the
// destination's first contents, which the sum adds; other convs write every element, see
// prefill) for convolutions with `pd`'s layouts, and a way to run such a convolution on them.
class ProbeInputs {
 public:
  ProbeInputs(const dnnl::engine& engine, const dnnl::convolution_forward::primitive_desc& pd,
              bool has_bias, const dnnl::memory::desc& scratchpad)
      : engine_(engine), stream_(engine), has_bias_(has_bias) {
    src_ = floats(storage_[3], pd.src_desc().get_size());
    weights_ = floats(storage_[0], pd.weights_desc().get_size());
    bias_ = floats(storage_[1], has_bias ? pd.bias_desc().get_size() : 0);
    residual_ = floats(storage_[2], sums_into_destination(pd) ? pd.dst_desc().get_size() : 0);
    padded_ = has_padding(pd.dst_desc());
    fill_random(src_, 1);
    fill_random(weights_, 2);
    fill_random(bias_, 3);
    fill_random(residual_, 4);
    scratchpad_ = dnnl::memory(scratchpad, engine);
  }

  float* src() { return src_.data(); }

  // Adds the residual to `dst`, element by element (kiln's residual after the activation).
  void add_residual(std::span<float> dst) const {
    for (size_t i = 0; i < dst.size() && i < residual_.size(); ++i) dst[i] += residual_[i];
  }

  // The destination's first contents: `bytes` of the residual from float `offset`; else zeros
  // where the layout has padding, which a conv need not write; else nothing (the conv writes
  // every byte).
  void prefill(float* dst, size_t offset, size_t bytes) const {
    if (!residual_.empty()) {
      std::memcpy(dst, residual_.data() + offset, bytes);
    } else if (padded_) {
      std::memset(dst, 0, bytes);
    }
  }

  // Runs `pd` from `src` into `dst` (which the caller prefilled).
  void run(const dnnl::convolution_forward::primitive_desc& pd, float* src, float* dst) {
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, dnnl::memory(pd.src_desc(), engine_, src)},
        {DNNL_ARG_WEIGHTS, dnnl::memory(pd.weights_desc(), engine_, weights_.data())},
        {DNNL_ARG_DST, dnnl::memory(pd.dst_desc(), engine_, dst)},
        // The builder's attributes leave the scratchpad to the caller.
        {DNNL_ARG_SCRATCHPAD,
         dnnl::memory(pd.scratchpad_desc(), engine_, scratchpad_.get_data_handle())}};
    if (has_bias_) args[DNNL_ARG_BIAS] = dnnl::memory(pd.bias_desc(), engine_, bias_.data());
    dnnl::convolution_forward(pd).execute(stream_, args);
    stream_.wait();
  }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  bool has_bias_;
  bool padded_ = false;
  Tensor storage_[4];
  std::span<float> src_, weights_, bias_, residual_;
  dnnl::memory scratchpad_;
};

dnnl::memory::desc larger_scratchpad(const dnnl::convolution_forward::primitive_desc& a,
                                     const dnnl::convolution_forward::primitive_desc& b) {
  return a.scratchpad_desc().get_size() >= b.scratchpad_desc().get_size() ? a.scratchpad_desc()
                                                                          : b.scratchpad_desc();
}

// What `probe` returns, or false when oneDNN or the allocator throws.
template <typename Probe>
bool false_on_throw(Probe&& probe) {
  try {
    return probe();
  } catch (const dnnl::error&) {
    return false;
  } catch (const std::bad_alloc&) {
    return false;
  }
}

// Whether `first` and `second`, each filling a destination of `dst_bytes` prefilled alike from
// `inputs`, give the same bits.
template <typename First, typename Second>
bool same_destination_bits(const ProbeInputs& inputs, size_t dst_bytes, First&& first,
                           Second&& second) {
  Tensor storage[2];
  const std::span<float> a = floats(storage[0], dst_bytes), b = floats(storage[1], dst_bytes);
  inputs.prefill(a.data(), 0, dst_bytes);
  inputs.prefill(b.data(), 0, dst_bytes);
  first(a);
  second(b);
  return std::memcmp(a.data(), b.data(), dst_bytes) == 0;
}

bool all_f32(const dnnl::convolution_forward::primitive_desc& pd) {
  const auto f32 = dnnl::memory::data_type::f32;
  return pd.src_desc().data_type() == f32 && pd.weights_desc().data_type() == f32 &&
         pd.dst_desc().data_type() == f32;
}

// Whether two convolutions compute in f32 and read and write the same layouts.
bool same_f32_layouts(const dnnl::convolution_forward::primitive_desc& a,
                      const dnnl::convolution_forward::primitive_desc& b, bool has_bias) {
  return all_f32(a) && a.src_desc() == b.src_desc() && a.dst_desc() == b.dst_desc() &&
         a.weights_desc() == b.weights_desc() && (!has_bias || a.bias_desc() == b.bias_desc());
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
  if (!all_f32(batched)) return false;  // the random values are f32
  if (!src_stride || !dst_stride || !src_all.ok() || !dst_all.ok() ||
      *src_all != batched.src_desc() || *dst_all != batched.dst_desc() ||
      single.weights_desc() != batched.weights_desc() ||
      (has_bias && single.bias_desc() != batched.bias_desc())) {
    return false;
  }
  return false_on_throw([&] {
    ProbeInputs inputs(engine, batched, has_bias, larger_scratchpad(batched, single));
    Tensor storage[2];
    const size_t dst_bytes = batched.dst_desc().get_size();
    const std::span<float> all = floats(storage[0], dst_bytes);
    const std::span<float> one = floats(storage[1], *dst_stride);
    inputs.prefill(all.data(), 0, dst_bytes);
    inputs.run(batched, inputs.src(), all.data());
    const size_t src_floats = *src_stride / sizeof(float), dst_floats = one.size();
    for (int64_t n = 0; n < batch; ++n) {
      inputs.prefill(one.data(), n * dst_floats, *dst_stride);
      inputs.run(single, inputs.src() + n * src_floats, one.data());
      if (std::memcmp(one.data(), all.data() + n * dst_floats, *dst_stride) != 0) return false;
    }
    return true;
  });
}

bool conv_gives_full_team_bits(const dnnl::engine& engine,
                               const dnnl::convolution_forward::primitive_desc& pd,
                               const dnnl::convolution_forward::primitive_desc& full, int full_team,
                               bool has_bias) {
  if (!same_f32_layouts(pd, full, has_bias)) return false;
  return false_on_throw([&] {
    ProbeInputs inputs(engine, pd, has_bias, larger_scratchpad(pd, full));
    return same_destination_bits(
        inputs, pd.dst_desc().get_size(),
        [&](std::span<float> mine) { inputs.run(pd, inputs.src(), mine.data()); },
        [&](std::span<float> theirs) {
          const CallerThreads restore;
          use_threads(full_team);
          inputs.run(full, inputs.src(), theirs.data());
        });
  });
}

bool fused_activation_matches(const dnnl::engine& engine,
                              const dnnl::convolution_forward::primitive_desc& plain,
                              const dnnl::convolution_forward::primitive_desc& fused, bool has_bias,
                              const kernels::FusedActivation& activation,
                              bool residual_after_activation) {
  if (!same_f32_layouts(plain, fused, has_bias)) return false;
  return false_on_throw([&] {
    // After the activation, only the fused primitive sums: its destination starts as the residual.
    ProbeInputs inputs(engine, residual_after_activation ? fused : plain, has_bias,
                       larger_scratchpad(plain, fused));
    return same_destination_bits(
        inputs, plain.dst_desc().get_size(),
        [&](std::span<float> expected) {
          inputs.run(plain, inputs.src(), expected.data());
          apply_activation(activation, expected.data(), expected.data(), expected.size());
          if (residual_after_activation) inputs.add_residual(expected);
        },
        [&](std::span<float> got) { inputs.run(fused, inputs.src(), got.data()); });
  });
}

}  // namespace kiln::hal::cpu
