// Building blocks for elementwise portable kernels: a kernel applying a per-element function to
// one input (same shape out), and the parallel loops kernels share. Each output element is computed
// by the same expression whatever the shape or thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "kiln/kernels/dtype_dispatch.h"
#include "kiln/kernels/kernel.h"

namespace kiln::kernels {

// Runs body(i) for i in [0, n), split across the OpenMP threads for large n.
template <typename Body>
void parallel_for(int64_t n, Body&& body) {
  if (n < 32768) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) body(i);
}

// Runs body(begin, end) over [0, n) in blocks of kElementBlock elements (one call for small n),
// the blocks split across the OpenMP threads. A body that loops over its range with
// `#pragma omp simd` gets vector code for a per-element expression; each element's value does not
// depend on the block it falls in.
inline constexpr int64_t kElementBlock = 16384;
template <typename Body>
void parallel_blocks(int64_t n, Body&& body) {
  if (n < 2 * kElementBlock) {
    if (n > 0) body(int64_t{0}, n);
    return;
  }
  const int64_t blocks = (n + kElementBlock - 1) / kElementBlock;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < blocks; ++k) {
    body(k * kElementBlock, std::min(n, (k + 1) * kElementBlock));
  }
}

// Runs body(i) for i in [0, n) rows of about `work_per_row` operations each (a matrix product's
// rows, a Fourier transform's lines), split across the OpenMP threads when the total is large.
template <typename Body>
void parallel_rows(int64_t n, int64_t work_per_row, Body&& body) {
  if (n <= 1 || n * std::max<int64_t>(work_per_row, 1) < 32768) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) body(i);
}

// y[i] = fn(x[i]) with y of x's dtype (kPredicate false) or bool (kPredicate true). Fn has
//   template <typename T> static constexpr bool accepts();   // storage types it handles
//   template <typename T> R operator()(compute_t<T> x) const; // R: compute_t<T> or bool
// and make() only offers dtypes infer accepted, so the other instances are never reached.
template <typename Fn, bool kPredicate = false>
class MapKernel : public Kernel {
 public:
  explicit MapKernel(Fn fn) : fn_(std::move(fn)) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const ConstBuffer& x = in[0];
    const MutableBuffer& y = out[0];
    const int64_t n = x.element_count();
    return visit_dtype(x.dtype, [&]<typename T>() -> Status {
      if constexpr (Fn::template accepts<T>()) {
        using R = std::conditional_t<kPredicate, Bool, T>;
        const T* src = x.as<T>();
        R* dst = y.as<R>();
        // Copies local to each block, so the loop reads no captured memory and can vectorize.
        parallel_blocks(n, [src, dst, fn = fn_](int64_t begin, int64_t end) {
          const T* s = src;
          R* d = dst;
          const Fn f = fn;
#pragma omp simd
          for (int64_t i = begin; i < end; ++i) store(d, i, f.template operator()<T>(load(s, i)));
        });
        return ok_status();
      } else {
        return internal_error("no kernel instance for {}", dtype_name(x.dtype));
      }
    });
  }

 private:
  Fn fn_;
};

template <bool kPredicate = false, typename Fn>
std::unique_ptr<Kernel> make_map_kernel(Fn fn) {
  return std::make_unique<MapKernel<Fn, kPredicate>>(std::move(fn));
}

}  // namespace kiln::kernels
