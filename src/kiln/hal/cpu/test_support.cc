#include "kiln/hal/cpu/test_support.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kiln/hal/host_allocator.h"
#include "kiln/hal/host_tensors.h"

namespace kiln::hal::cpu::testing {
namespace {

size_t g_last_arena_bytes = 0;

Tensor make(DType dtype, ConcreteShape shape) {
  auto t = Tensor::create(dtype, std::move(shape));
  KILN_CHECK(t.ok());
  return std::move(t).value();
}

std::vector<int64_t> row_strides(const ConcreteShape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// Index into `in` (right-aligned, broadcast) for the output multi-index `idx`.
int64_t broadcast_offset(const ConcreteShape& in, const ConcreteShape& out,
                         const std::vector<int64_t>& idx) {
  const auto st = row_strides(in);
  int64_t off = 0;
  const size_t shift = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != 1) off += idx[shift + i] * st[i];
  }
  return off;
}

ConcreteShape broadcast_shape(const ConcreteShape& a, const ConcreteShape& b) {
  const size_t r = std::max(a.size(), b.size());
  ConcreteShape out(r, 1);
  for (size_t k = 0; k < r; ++k) {
    const int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    const int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    out[r - 1 - k] = std::max(da, db);
  }
  return out;
}

std::vector<int64_t> unravel(int64_t i, const ConcreteShape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}

}  // namespace

Attributes attrs(std::initializer_list<std::pair<std::string, Attribute>> list) {
  Attributes a;
  for (const auto& [k, v] : list) a.set(k, v);
  return a;
}

int32_t SpecBuilder::add(std::string name, ConcreteShape shape, DType dtype, ValueRole role) {
  ValueSpec v;
  v.name = std::move(name);
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.role = role;
  spec_.values.push_back(std::move(v));
  const auto id = static_cast<int32_t>(spec_.values.size() - 1);
  if (role == ValueRole::kInput) spec_.inputs.push_back(id);
  if (role == ValueRole::kOutput) spec_.outputs.push_back(id);
  return id;
}

int32_t SpecBuilder::input(std::string name, ConcreteShape shape, DType dtype) {
  return add(std::move(name), std::move(shape), dtype, ValueRole::kInput);
}
int32_t SpecBuilder::value(std::string name, ConcreteShape shape, DType dtype) {
  return add(std::move(name), std::move(shape), dtype, ValueRole::kIntermediate);
}
int32_t SpecBuilder::output(std::string name, ConcreteShape shape, DType dtype) {
  return add(std::move(name), std::move(shape), dtype, ValueRole::kOutput);
}
int32_t SpecBuilder::constant(std::string name, Tensor data) {
  constants_.push_back(std::move(data));
  const int32_t id = add(std::move(name), constants_.back().shape(), constants_.back().dtype(),
                         ValueRole::kConstant);
  spec_.values[id].constant = &constants_.back();
  return id;
}
void SpecBuilder::dispatch(std::string name, std::string op_type, std::vector<int32_t> inputs,
                           std::vector<int32_t> outputs, Attributes attributes) {
  attributes_.push_back(std::move(attributes));
  DispatchSpec d;
  d.name = std::move(name);
  d.op_type = std::move(op_type);
  d.attributes = &attributes_.back();
  d.inputs = std::move(inputs);
  d.outputs = std::move(outputs);
  spec_.dispatches.push_back(std::move(d));
}

StatusOr<std::vector<Tensor>> run_program(Executable& exe, const ProgramSpec& spec,
                                          const std::vector<Tensor>& inputs, RunOptions options) {
  const size_t n = spec.values.size();
  // Lifetimes over dispatch indices, inclusive: producer .. last consumer.
  std::vector<int64_t> first(n, -1), last(n, -1);
  for (size_t d = 0; d < spec.dispatches.size(); ++d) {
    for (int32_t v : spec.dispatches[d].outputs) {
      if (first[v] < 0) first[v] = static_cast<int64_t>(d);
      last[v] = std::max<int64_t>(last[v], static_cast<int64_t>(d));
    }
    for (int32_t v : spec.dispatches[d].inputs) {
      if (v >= 0) last[v] = std::max<int64_t>(last[v], static_cast<int64_t>(d));
    }
  }
  // With sharing, a value the executable offers to place over another (storage_shared_with)
  // takes its chain root's offset, and the root lives as long as the whole chain.
  std::vector<int32_t> root(n, -1);
  if (options.share_memory) {
    for (size_t v = 0; v < n; ++v) {
      int32_t r = static_cast<int32_t>(v);
      for (int32_t s = exe.storage_shared_with(r); s >= 0; s = exe.storage_shared_with(r)) r = s;
      if (r == static_cast<int32_t>(v)) continue;
      root[v] = r;
      first[r] = std::min(first[r], first[v]);
      last[r] = std::max(last[r], last[v]);
    }
  }
  struct Block {
    size_t offset, size;
    int64_t first, last;
  };
  std::vector<Block> blocks;
  std::vector<size_t> offsets(n, 0);
  size_t arena = 0;
  for (size_t v = 0; v < n; ++v) {
    const size_t size = (exe.storage_bytes(static_cast<int32_t>(v)) + 63) / 64 * 64;
    if (size == 0 || spec.values[v].role != ValueRole::kIntermediate || root[v] >= 0) continue;
    size_t offset = 0;
    if (options.share_memory) {
      // First fit among blocks whose lifetimes overlap this one.
      std::vector<Block> live;
      for (const Block& b : blocks) {
        if (b.last >= first[v] && b.first <= last[v]) live.push_back(b);
      }
      std::sort(live.begin(), live.end(),
                [](const Block& a, const Block& b) { return a.offset < b.offset; });
      for (const Block& b : live) {
        if (offset + size <= b.offset) break;
        offset = std::max(offset, b.offset + b.size);
      }
    } else {
      offset = arena;
    }
    offsets[v] = offset;
    blocks.push_back({offset, size, first[v], last[v]});
    arena = std::max(arena, offset + size);
  }
  for (size_t v = 0; v < n; ++v) {
    if (root[v] >= 0) offsets[v] = offsets[root[v]];
  }
  g_last_arena_bytes = arena;
  std::vector<std::byte> storage(arena + 64);
  auto* base =
      reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(storage.data()) + 63) / 64 * 64);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (options.poison) {
    for (size_t i = 0; i + 4 <= arena; i += 4) std::memcpy(base + i, &nan, 4);
  }
  std::vector<Tensor> outputs;
  for (int32_t v : spec.outputs) {
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(spec.values[v].dtype, spec.values[v].shape));
    if (options.poison && t.dtype() == DType::kF32) {
      for (float& x : t.mutable_values<float>()) x = nan;
    }
    outputs.push_back(std::move(t));
  }
  KILN_RETURN_IF_ERROR(check_host_tensors(spec, inputs, outputs));
  // The CPU addresses host memory: every value is bound in place, as the runtime binds them.
  HostAllocator host;
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<hal::BufferRef> values(n);
  buffers.push_back(host.wrap_host(base, arena));
  for (size_t v = 0; v < n; ++v) {
    if (exe.storage_bytes(static_cast<int32_t>(v)) > 0) values[v] = {buffers.front().get(), offsets[v]};
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    buffers.push_back(host.wrap_host(const_cast<std::byte*>(inputs[i].data()), inputs[i].byte_size()));
    values[spec.inputs[i]] = {buffers.back().get(), 0};
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    buffers.push_back(host.wrap_host(outputs[i].mutable_data(), outputs[i].byte_size()));
    values[spec.outputs[i]] = {buffers.back().get(), 0};
  }
  RunArgs args;
  args.values = values;
  args.observer = options.observer;
  KILN_RETURN_IF_ERROR(exe.run(args));
  return outputs;
}

size_t last_arena_bytes() { return g_last_arena_bytes; }

Tensor random_tensor(ConcreteShape shape, uint32_t seed, float lo, float hi) {
  Tensor t = make(DType::kF32, std::move(shape));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& x : t.mutable_values<float>()) x = dist(gen);
  return t;
}

Tensor filled(ConcreteShape shape, std::vector<float> values) {
  Tensor t = make(DType::kF32, std::move(shape));
  KILN_CHECK(static_cast<int64_t>(values.size()) == t.element_count());
  std::copy(values.begin(), values.end(), t.mutable_values<float>().begin());
  return t;
}

Tensor slice_batch(const Tensor& t, int64_t n) {
  ConcreteShape s = t.shape();
  s[0] = 1;
  Tensor out = make(t.dtype(), s);
  const size_t bytes = out.byte_size();
  std::memcpy(out.mutable_data(), t.data() + n * bytes, bytes);
  return out;
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double rtol,
                                     double atol) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure()
           << fmt::format("shape [{}] != expected [{}]", fmt::join(actual.shape(), ","),
                          fmt::join(expected.shape(), ","));
  }
  auto a = actual.values<float>();
  auto e = expected.values<float>();
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(a[i]) - e[i]);
    const bool ok =
        std::isfinite(a[i]) ? diff <= atol + rtol * std::fabs(e[i]) : !std::isfinite(e[i]);
    if (!ok) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++bad;
    }
    if (std::isfinite(diff)) worst = std::max(worst, diff);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << fmt::format(
             "{} of {} elements differ; first at {}: got {}, expected {} (max abs diff {})", bad,
             a.size(), first, a[first], e[first], worst);
}

::testing::AssertionResult bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.byte_size() != b.byte_size()) {
    return ::testing::AssertionFailure() << "shapes differ";
  }
  auto x = a.values<float>();
  auto y = b.values<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::memcmp(&x[i], &y[i], 4) != 0) {
      return ::testing::AssertionFailure()
             << fmt::format("element {} differs: {:.9g} vs {:.9g}", i, x[i], y[i]);
    }
  }
  return ::testing::AssertionSuccess();
}

Tensor ref_conv(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                const ConvRef& p) {
  const auto& xs = x.shape();
  const auto& ws = w.shape();
  const size_t r = xs.size() - 2;
  std::array<int64_t, 3> is{1, 1, 1}, ks{1, 1, 1}, st{1, 1, 1}, dl{1, 1, 1}, pb{0, 0, 0},
      os{1, 1, 1};
  for (size_t i = 0; i < r; ++i) {
    const size_t j = 3 - r + i;
    is[j] = xs[2 + i];
    ks[j] = ws[2 + i];
    st[j] = p.strides[i];
    dl[j] = p.dilations[i];
    pb[j] = p.pads_begin[i];
    os[j] = (xs[2 + i] + p.pads_begin[i] + p.pads_end[i] - (p.dilations[i] * (ws[2 + i] - 1) + 1)) /
                p.strides[i] +
            1;
  }
  const int64_t n = xs[0], c = xs[1], m = ws[0], cg = c / p.group, mg = m / p.group;
  ConcreteShape ys{n, m};
  for (size_t i = 0; i < r; ++i) ys.push_back(os[3 - r + i]);
  Tensor y = make(DType::kF32, ys);
  auto xv = x.values<float>();
  auto wv = w.values<float>();
  auto yv = y.mutable_values<float>();
  const int64_t out_plane = os[0] * os[1] * os[2], kvol = ks[0] * ks[1] * ks[2];
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < m; ++oc) {
      const int64_t g = oc / mg;
      for (int64_t o = 0; o < out_plane; ++o) {
        const int64_t od = o / (os[1] * os[2]), oh = o / os[2] % os[1], ow = o % os[2];
        double acc = bias ? bias->values<float>()[oc] : 0.0;
        for (int64_t ic = 0; ic < cg; ++ic)
          for (int64_t kd = 0; kd < ks[0]; ++kd)
            for (int64_t kh = 0; kh < ks[1]; ++kh)
              for (int64_t kw = 0; kw < ks[2]; ++kw) {
                const int64_t id = od * st[0] - pb[0] + kd * dl[0];
                const int64_t ih = oh * st[1] - pb[1] + kh * dl[1];
                const int64_t iw = ow * st[2] - pb[2] + kw * dl[2];
                if (id < 0 || id >= is[0] || ih < 0 || ih >= is[1] || iw < 0 || iw >= is[2])
                  continue;
                const double xval =
                    xv[((b * c + g * cg + ic) * is[0] + id) * is[1] * is[2] + ih * is[2] + iw];
                const double wval = wv[(oc * cg + ic) * kvol + (kd * ks[1] + kh) * ks[2] + kw];
                acc += xval * wval;
              }
        const int64_t yi = (b * m + oc) * out_plane + o;
        if (residual) acc += residual->values<float>()[yi];
        acc = p.activation.apply(acc);
        yv[yi] = static_cast<float>(acc);
      }
    }
  return y;
}

Tensor ref_pool(const Tensor& x, const PoolRef& p) {
  const auto& xs = x.shape();
  const size_t r = xs.size() - 2;
  std::array<int64_t, 3> is{1, 1, 1}, os{1, 1, 1}, ks{1, 1, 1}, st{1, 1, 1}, dl{1, 1, 1},
      pb{0, 0, 0}, pe{0, 0, 0};
  for (size_t i = 0; i < r; ++i) {
    const size_t j = 3 - r + i;
    is[j] = xs[2 + i];
    os[j] = p.out[2 + i];
    ks[j] = p.kernel[i];
    st[j] = p.strides.empty() ? 1 : p.strides[i];
    dl[j] = p.dilations.empty() ? 1 : p.dilations[i];
    pb[j] = p.pads_begin.empty() ? 0 : p.pads_begin[i];
    pe[j] = p.pads_end.empty() ? 0 : p.pads_end[i];
  }
  Tensor y = make(DType::kF32, p.out);
  auto xv = x.values<float>();
  auto yv = y.mutable_values<float>();
  const int64_t planes = xs[0] * xs[1];
  const int64_t in_plane = is[0] * is[1] * is[2], out_plane = os[0] * os[1] * os[2];
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t o = 0; o < out_plane; ++o) {
      const std::array<int64_t, 3> oi{o / (os[1] * os[2]), o / os[2] % os[1], o % os[2]};
      double best = -std::numeric_limits<double>::infinity(), sum = 0;
      int64_t valid = 0, in_padded = 1;
      for (size_t a = 0; a < 3; ++a) {
        int64_t count = 0;
        for (int64_t k = 0; k < ks[a]; ++k) {
          const int64_t i = oi[a] * st[a] - pb[a] + k * dl[a];
          if (i >= -pb[a] && i < is[a] + pe[a]) ++count;
        }
        in_padded *= count;
      }
      for (int64_t kd = 0; kd < ks[0]; ++kd)
        for (int64_t kh = 0; kh < ks[1]; ++kh)
          for (int64_t kw = 0; kw < ks[2]; ++kw) {
            const int64_t id = oi[0] * st[0] - pb[0] + kd * dl[0];
            const int64_t ih = oi[1] * st[1] - pb[1] + kh * dl[1];
            const int64_t iw = oi[2] * st[2] - pb[2] + kw * dl[2];
            if (id < 0 || id >= is[0] || ih < 0 || ih >= is[1] || iw < 0 || iw >= is[2]) continue;
            const double v = xv[pl * in_plane + (id * is[1] + ih) * is[2] + iw];
            // A NaN tap makes the max NaN, as PyTorch and kiln's portable kernel give.
            best = std::isnan(best) || std::isnan(v) ? v + best : std::max(best, v);
            sum += v;
            ++valid;
          }
      yv[pl * out_plane + o] = static_cast<float>(
          p.max ? best : sum / static_cast<double>(p.count_include_pad ? in_padded : valid));
    }
  return y;
}

Tensor ref_batch_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, const Tensor& mean,
                      const Tensor& var, double eps, bool relu) {
  Tensor y = make(DType::kF32, x.shape());
  const int64_t c = x.shape()[1];
  int64_t inner = 1;
  for (size_t i = 2; i < x.shape().size(); ++i) inner *= x.shape()[i];
  auto xv = x.values<float>();
  auto yv = y.mutable_values<float>();
  for (int64_t i = 0; i < x.element_count(); ++i) {
    const int64_t ch = i / inner % c;
    double v = (xv[i] - static_cast<double>(mean.values<float>()[ch])) /
                   std::sqrt(static_cast<double>(var.values<float>()[ch]) + eps) *
                   scale.values<float>()[ch] +
               bias.values<float>()[ch];
    if (relu) v = std::max(v, 0.0);
    yv[i] = static_cast<float>(v);
  }
  return y;
}

Tensor ref_binary(char op, const Tensor& a, const Tensor& b) {
  const ConcreteShape out = broadcast_shape(a.shape(), b.shape());
  Tensor y = make(DType::kF32, out);
  auto yv = y.mutable_values<float>();
  for (int64_t i = 0; i < y.element_count(); ++i) {
    const auto idx = unravel(i, out);
    const double x = a.values<float>()[broadcast_offset(a.shape(), out, idx)];
    const double z = b.values<float>()[broadcast_offset(b.shape(), out, idx)];
    double r = 0;
    switch (op) {
      case '+':
        r = x + z;
        break;
      case '-':
        r = x - z;
        break;
      case '*':
        r = x * z;
        break;
      case '/':
        r = x / z;
        break;
    }
    yv[i] = static_cast<float>(r);
  }
  return y;
}

Tensor ref_gemm(const Tensor& a, const Tensor& b, const Tensor* c, double alpha, double beta,
                bool trans_a, bool trans_b) {
  const int64_t m = trans_a ? a.shape()[1] : a.shape()[0];
  const int64_t k = trans_a ? a.shape()[0] : a.shape()[1];
  const int64_t n = trans_b ? b.shape()[0] : b.shape()[1];
  Tensor y = make(DType::kF32, {m, n});
  auto av = a.values<float>();
  auto bv = b.values<float>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t l = 0; l < k; ++l) {
        const double x = trans_a ? av[l * m + i] : av[i * k + l];
        const double z = trans_b ? bv[j * k + l] : bv[l * n + j];
        acc += x * z;
      }
      double v = alpha * acc;
      if (c) v += beta * c->values<float>()[broadcast_offset(c->shape(), {m, n}, {i, j})];
      y.mutable_values<float>()[i * n + j] = static_cast<float>(v);
    }
  return y;
}

Tensor ref_matmul(const Tensor& a, const Tensor& b) {
  ConcreteShape as = a.shape(), bs = b.shape();
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  ConcreteShape abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  ConcreteShape batch = broadcast_shape(abatch, bbatch);
  ConcreteShape out = batch;
  if (!a1) out.push_back(m);
  if (!b1) out.push_back(n);
  Tensor y = make(DType::kF32, out);
  int64_t nb = 1;
  for (int64_t d : batch) nb *= d;
  auto av = a.values<float>();
  auto bv = b.values<float>();
  auto yv = y.mutable_values<float>();
  for (int64_t bi = 0; bi < nb; ++bi) {
    const auto idx = unravel(bi, batch);
    const int64_t ao = abatch.empty() ? 0 : broadcast_offset(abatch, batch, idx) * m * k;
    const int64_t bo = bbatch.empty() ? 0 : broadcast_offset(bbatch, batch, idx) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t l = 0; l < k; ++l) {
          acc += static_cast<double>(av[ao + i * k + l]) * bv[bo + l * n + j];
        }
        yv[(bi * m + i) * n + j] = static_cast<float>(acc);
      }
  }
  return y;
}

Tensor ref_softmax(const Tensor& x, int64_t axis) {
  const auto& s = x.shape();
  if (axis < 0) axis += static_cast<int64_t>(s.size());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= s[i];
  for (size_t i = axis + 1; i < s.size(); ++i) inner *= s[i];
  const int64_t len = s[axis];
  Tensor y = make(DType::kF32, s);
  auto xv = x.values<float>();
  auto yv = y.mutable_values<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t l = 0; l < len; ++l)
        mx = std::max(mx, static_cast<double>(xv[(o * len + l) * inner + in]));
      for (int64_t l = 0; l < len; ++l) sum += std::exp(xv[(o * len + l) * inner + in] - mx);
      for (int64_t l = 0; l < len; ++l) {
        const int64_t i = (o * len + l) * inner + in;
        yv[i] = static_cast<float>(std::exp(xv[i] - mx) / sum);
      }
    }
  return y;
}

Tensor ref_relu(const Tensor& x) {
  Tensor y = x.clone();
  for (float& v : y.mutable_values<float>()) v = std::max(v, 0.0f);
  return y;
}

}  // namespace kiln::hal::cpu::testing
