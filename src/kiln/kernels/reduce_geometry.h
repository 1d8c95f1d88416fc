// Shared by the reduction and normalization kernels: a parallel loop over ranges of items whose
// per-item result does not depend on the split, and a view of a tensor as kept and reduced axes
// that visits the reduced elements of one output in a fixed (row-major) order.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kiln/kernels/infer_util.h"

namespace kiln::kernels {

// Runs body(begin, end) over [0, n) split across the OpenMP threads when the total work (n items
// of `cost` elements each) is large. Each item is computed the same way whatever the split.
template <typename Body>
void parallel_ranges(int64_t n, int64_t cost, Body&& body) {
  if (n <= 0) return;
  const int64_t work = n * std::max<int64_t>(cost, 1);
  if (n < 2 || work < 32768) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t t = omp_get_thread_num();
    const int64_t begin = n * t / threads;
    const int64_t end = n * (t + 1) / threads;
    if (begin < end) body(begin, end);
  }
}

// The input viewed as kept and reduced axes: dims of size 1 dropped, runs of adjacent axes of
// the same kind merged. Outputs enumerate the kept axes in row-major order.
struct Geometry {
  std::vector<int64_t> kept_dims, kept_strides;
  std::vector<int64_t> red_dims, red_strides;
  int64_t out_count = 1;
  int64_t red_count = 1;
};

inline Geometry make_geometry(const ConcreteShape& dims, const std::vector<bool>& reduced) {
  Geometry g;
  const std::vector<int64_t> strides = row_major_strides(dims);
  int last_kind = -1;  // 0 kept, 1 reduced
  for (size_t d = 0; d < dims.size(); ++d) {
    const int kind = reduced[d] ? 1 : 0;
    if (kind == 1)
      g.red_count *= dims[d];
    else
      g.out_count *= dims[d];
    if (dims[d] == 1) continue;
    auto& ds = kind == 1 ? g.red_dims : g.kept_dims;
    auto& ss = kind == 1 ? g.red_strides : g.kept_strides;
    if (kind == last_kind) {
      ds.back() *= dims[d];
      ss.back() = strides[d];
    } else {
      ds.push_back(dims[d]);
      ss.push_back(strides[d]);
    }
    last_kind = kind;
  }
  return g;
}

// The input offset of output `o`'s first reduced element.
inline int64_t kept_offset(const Geometry& g, int64_t o) {
  int64_t base = 0;
  for (size_t k = g.kept_dims.size(); k-- > 0;) {
    base += (o % g.kept_dims[k]) * g.kept_strides[k];
    o /= g.kept_dims[k];
  }
  return base;
}

// Calls f(offset) for every input element reduced into the output whose kept-axes offset is
// `base`, in row-major order of the reduced axes. `idx` is scratch of red_dims.size() entries.
template <typename F>
inline void visit_reduced(const Geometry& g, int64_t base, std::vector<int64_t>& idx, F&& f) {
  const size_t m = g.red_dims.size();
  if (g.red_count == 0) return;
  if (m == 0) {
    f(base);
    return;
  }
  const int64_t n = g.red_dims[m - 1];
  const int64_t s = g.red_strides[m - 1];
  std::fill(idx.begin(), idx.end(), 0);
  int64_t outer = base;
  while (true) {
    for (int64_t i = 0; i < n; ++i) f(outer + i * s);
    // Advance the odometer over reduced axes 0 .. m-2.
    size_t k = m - 1;
    while (true) {
      if (k == 0) return;
      --k;
      ++idx[k];
      outer += g.red_strides[k];
      if (idx[k] < g.red_dims[k]) break;
      outer -= idx[k] * g.red_strides[k];
      idx[k] = 0;
    }
  }
}

}  // namespace kiln::kernels
