// Byte-level copies for the data movement kernels (movement.cc, layout.cc). They work by element
// size (1, 2, 4 or 8 bytes), so one instance serves every dtype of that size. Every output element
// is a copy of one source element, so results never depend on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kiln/kernels/kernel.h"

namespace kiln::kernels {

// A strided view of a source buffer: element (i_0, ..., i_{n-1}) of a row-major output of `dims`
// is source element offset + sum(i_k * strides[k]). Strides may be zero (broadcast) or negative
// (reversed slices); the caller guarantees every addressed element lies inside the source.
struct StridedView {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

// Copies the elements of `view` over `src` into `dst` (row-major over view.dims). Inner runs with
// stride 1 are memcpy'd; a permutation whose innermost source axis moved is copied in tiles.
// `element_size` is 1, 2, 4 or 8.
void strided_copy(const std::byte* src, std::byte* dst, size_t element_size,
                  const StridedView& view);

// The view of a row-major source of `dims` whose output axis i is source axis perm[i].
StridedView permuted_view(std::span<const int64_t> dims, std::span<const int64_t> perm);

// Kernels: input 0 through a fixed view into output 0; input 0's bytes into output 0 (Reshape and
// the other ops that only relabel dims).
std::unique_ptr<Kernel> make_view_kernel(StridedView view);
std::unique_ptr<Kernel> make_copy_kernel();

// Runs body(begin, end) over [0, rows) split into contiguous chunks, across the OpenMP threads
// when rows * row_elements is large.
template <typename Body>
void for_row_chunks(int64_t rows, int64_t row_elements, Body&& body) {
  constexpr int64_t kParallelElements = 1 << 16;
  if (rows < 2 || rows * row_elements < kParallelElements) {
    if (rows > 0) body(int64_t{0}, rows);
    return;
  }
  const int64_t chunks = rows < 256 ? rows : 256;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const auto begin = static_cast<int64_t>(static_cast<__int128>(rows) * c / chunks);
    const auto end = static_cast<int64_t>(static_cast<__int128>(rows) * (c + 1) / chunks);
    body(begin, end);
  }
}

// Calls f.template operator()<U>() with U the unsigned integer type of `element_size` bytes
// (1, 2, 4 or 8: every kiln dtype).
template <typename F>
decltype(auto) visit_element_size(size_t element_size, F&& f) {
  switch (element_size) {
    case 1: return f.template operator()<uint8_t>();
    case 2: return f.template operator()<uint16_t>();
    case 4: return f.template operator()<uint32_t>();
    default: return f.template operator()<uint64_t>();
  }
}

}  // namespace kiln::kernels
