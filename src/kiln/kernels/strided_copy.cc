#include "kiln/kernels/strided_copy.h"

#include <algorithm>
#include <cstring>

#include "kiln/kernels/infer_util.h"

namespace kiln::kernels {
namespace {

// Size-1 dims dropped and dims that are contiguous in the source merged, so the inner run is as
// long as possible. Rank >= 1 unless the view is empty (then dims is empty).
StridedView simplify(const StridedView& v) {
  StridedView out;
  out.offset = v.offset;
  for (int64_t d : v.dims) {
    if (d == 0) return out;
  }
  std::vector<int64_t> dims, strides;  // inner to outer
  for (size_t i = v.dims.size(); i-- > 0;) {
    if (v.dims[i] == 1) continue;
    if (!dims.empty() && v.strides[i] == strides.back() * dims.back()) {
      dims.back() *= v.dims[i];
      continue;
    }
    dims.push_back(v.dims[i]);
    strides.push_back(v.strides[i]);
  }
  if (dims.empty()) {
    dims.push_back(1);
    strides.push_back(1);
  }
  out.dims.assign(dims.rbegin(), dims.rend());
  out.strides.assign(strides.rbegin(), strides.rend());
  return out;
}

template <typename U>
void copy_rows(const U* src, U* dst, const StridedView& v) {
  const size_t r = v.dims.size();
  const int64_t inner = v.dims[r - 1];
  const int64_t inner_stride = v.strides[r - 1];
  const int64_t rows = product(std::span<const int64_t>(v.dims).first(r - 1));
  for_row_chunks(rows, inner, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> index(r - 1, 0);
    int64_t offset = v.offset;
    int64_t rest = begin;
    for (size_t k = r - 1; k-- > 0;) {
      index[k] = rest % v.dims[k];
      rest /= v.dims[k];
      offset += index[k] * v.strides[k];
    }
    U* out = dst + begin * inner;
    for (int64_t row = begin; row < end; ++row, out += inner) {
      const U* in = src + offset;
      if (inner_stride == 1) {
        std::memcpy(out, in, static_cast<size_t>(inner) * sizeof(U));
      } else if (inner_stride == 0) {
        std::fill(out, out + inner, *in);
      } else {
        for (int64_t j = 0; j < inner; ++j) out[j] = in[j * inner_stride];
      }
      for (size_t k = r - 1; k-- > 0;) {
        offset += v.strides[k];
        if (++index[k] < v.dims[k]) break;
        offset -= v.strides[k] * v.dims[k];
        index[k] = 0;
      }
    }
  });
}

// The source's unit-stride axis `a` moved away from the innermost position: copy tiles of
// kTile x kTile over (a, innermost) so that both the reads and the writes stay in cache.
template <typename U>
void copy_tiled(const U* src, U* dst, const StridedView& v, size_t a) {
  constexpr int64_t kTile = 32;
  const size_t r = v.dims.size();
  const std::vector<int64_t> dst_strides = row_major_strides(v.dims);
  const int64_t inner = v.dims[r - 1];
  const int64_t inner_stride = v.strides[r - 1];
  const int64_t a_dim = v.dims[a];
  const int64_t a_dst_stride = dst_strides[a];
  // Work items: every index of the other axes times a block of axis a.
  std::vector<size_t> others;
  for (size_t k = 0; k + 1 < r; ++k) {
    if (k != a) others.push_back(k);
  }
  int64_t outer = 1;
  for (size_t k : others) outer *= v.dims[k];
  const int64_t blocks = (a_dim + kTile - 1) / kTile;
  for_row_chunks(outer * blocks, kTile * inner, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      int64_t rest = item / blocks;
      const int64_t a0 = (item % blocks) * kTile;
      const int64_t a1 = std::min(a_dim, a0 + kTile);
      int64_t src_offset = v.offset;
      int64_t dst_offset = 0;
      for (size_t i = others.size(); i-- > 0;) {
        const size_t k = others[i];
        const int64_t idx = rest % v.dims[k];
        rest /= v.dims[k];
        src_offset += idx * v.strides[k];
        dst_offset += idx * dst_strides[k];
      }
      for (int64_t j0 = 0; j0 < inner; j0 += kTile) {
        const int64_t j1 = std::min(inner, j0 + kTile);
        for (int64_t ai = a0; ai < a1; ++ai) {
          const U* in = src + src_offset + ai;  // axis a has source stride 1
          U* out = dst + dst_offset + ai * a_dst_stride;
          for (int64_t j = j0; j < j1; ++j) out[j] = in[j * inner_stride];
        }
      }
    }
  });
}

}  // namespace

void strided_copy(const std::byte* src, std::byte* dst, size_t element_size,
                  const StridedView& view) {
  const StridedView v = simplify(view);
  if (v.dims.empty()) return;  // no elements
  visit_element_size(element_size, [&]<typename U>() {
    const U* s = reinterpret_cast<const U*>(src);
    U* d = reinterpret_cast<U*>(dst);
    const size_t r = v.dims.size();
    if (r >= 2 && v.strides[r - 1] != 1 && v.dims[r - 1] >= 8) {
      for (size_t a = 0; a + 1 < r; ++a) {
        if (v.strides[a] == 1 && v.dims[a] >= 8) {
          copy_tiled(s, d, v, a);
          return;
        }
      }
    }
    copy_rows(s, d, v);
  });
}

StridedView permuted_view(std::span<const int64_t> dims, std::span<const int64_t> perm) {
  const std::vector<int64_t> strides = row_major_strides(dims);
  StridedView v;
  for (int64_t p : perm) {
    v.dims.push_back(dims[static_cast<size_t>(p)]);
    v.strides.push_back(strides[static_cast<size_t>(p)]);
  }
  return v;
}

namespace {

class ViewKernel : public Kernel {
 public:
  explicit ViewKernel(StridedView view) : view_(std::move(view)) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    strided_copy(in[0].data, out[0].data, dtype_size(in[0].dtype), view_);
    return ok_status();
  }

 private:
  StridedView view_;
};

class CopyKernel : public Kernel {
 public:
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t n = out[0].element_count();
    if (n == 0) return ok_status();
    const size_t bytes = static_cast<size_t>(n) * dtype_size(out[0].dtype);
    constexpr size_t kChunk = size_t{1} << 20;
    const auto chunks = static_cast<int64_t>((bytes + kChunk - 1) / kChunk);
    for_row_chunks(chunks, static_cast<int64_t>(kChunk), [&](int64_t begin, int64_t end) {
      const size_t lo = static_cast<size_t>(begin) * kChunk;
      const size_t hi = std::min(bytes, static_cast<size_t>(end) * kChunk);
      std::memcpy(out[0].data + lo, in[0].data + lo, hi - lo);
    });
    return ok_status();
  }
};

}  // namespace

std::unique_ptr<Kernel> make_view_kernel(StridedView view) {
  return std::make_unique<ViewKernel>(std::move(view));
}

std::unique_ptr<Kernel> make_copy_kernel() { return std::make_unique<CopyKernel>(); }

}  // namespace kiln::kernels
