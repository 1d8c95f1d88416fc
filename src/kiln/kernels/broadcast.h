// Numpy multidirectional broadcasting, symbolic (for shape inference) and concrete (for kernels).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/shape/shape.h"

namespace kiln::kernels {

// Broadcasts shapes right-aligned. Per dim: equal DimExprs match; a constant 1 takes the other
// dim. Anything else is an error naming the inputs (`labels`, one per shape) and the dims:
// InvalidArgument for two different constants, Unimplemented when a symbol is involved
// (e.g. N against 5 or N against M), since kiln cannot prove the result.
StatusOr<Shape> broadcast_shapes(std::span<const Shape> shapes,
                                 std::span<const std::string> labels);

// The shape concrete `a` and `b` broadcast to, right-aligned (a 1 takes the other dim). For shapes
// the op's shape rule has accepted; an incompatible pair gives the larger dim.
ConcreteShape broadcast_concrete(const ConcreteShape& a, const ConcreteShape& b);

// For an `input` shape that broadcasts to `output`: the flat input index of every output element,
// in output row-major order.
std::vector<int64_t> broadcast_index_map(const ConcreteShape& input, const ConcreteShape& output);

// Iteration over an output with inputs broadcast to it (numpy rules, each input's dims a suffix
// of the output's, each dim 1 or the output's). The dims are collapsed first (dims of size 1
// dropped, adjacent dims merged where every input spans or broadcasts both), so the inner run is
// as long as the layouts allow: same-shape inputs give one run per chunk.
class BroadcastIter {
 public:
  // InvalidArgument when an input does not broadcast to `output`.
  static StatusOr<BroadcastIter> make(std::span<const ConcreteShape> inputs,
                                      const ConcreteShape& output);

  int64_t count() const { return count_; }
  size_t input_count() const { return inputs_; }

  // Calls fn(out_begin, length, offsets, strides) for runs of consecutive output elements
  // [out_begin, out_begin + length), with std::array<int64_t, N> offsets and strides: input k's
  // element for output out_begin + j is at offsets[k] + j * strides[k]. N must equal
  // input_count(). Large outputs are split into fixed chunks across the OpenMP threads; the runs
  // (and so every element's expression) do not depend on the thread count.
  template <size_t N, typename Fn>
  void for_each(Fn&& fn) const;

 private:
  static constexpr int64_t kChunk = 16384;
  template <size_t N, typename Fn>
  void run_chunk(int64_t begin, int64_t end, Fn& fn) const;

  size_t inputs_ = 0;
  int64_t count_ = 0;
  std::vector<int64_t> dims_;     // collapsed output dims, at least one
  std::vector<int64_t> strides_;  // strides_[k * dims_.size() + d]: input k's stride for dim d
};

template <size_t N, typename Fn>
void BroadcastIter::run_chunk(int64_t begin, int64_t end, Fn& fn) const {
  const size_t rank = dims_.size();
  const int64_t inner = dims_.back();
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = strides_[k * rank + rank - 1];
  int64_t flat = begin;
  while (flat < end) {
    int64_t row = flat / inner;
    const int64_t col = flat % inner;
    const int64_t length = std::min(inner - col, end - flat);
    std::array<int64_t, N> offsets;
    for (size_t k = 0; k < N; ++k) offsets[k] = col * inner_strides[k];
    for (size_t d = rank - 1; d-- > 0;) {
      const int64_t index = row % dims_[d];
      row /= dims_[d];
      for (size_t k = 0; k < N; ++k) offsets[k] += index * strides_[k * rank + d];
    }
    fn(flat, length, offsets, inner_strides);
    flat += length;
  }
}

template <size_t N, typename Fn>
void BroadcastIter::for_each(Fn&& fn) const {
  KILN_CHECK(N == inputs_);
  if (count_ <= 0) return;
  const int64_t chunks = (count_ + kChunk - 1) / kChunk;
  if (chunks < 2) {
    run_chunk<N>(0, count_, fn);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    run_chunk<N>(c * kChunk, std::min(count_, (c + 1) * kChunk), fn);
  }
}

}  // namespace kiln::kernels
