// Seeded input values for the test suite, so a suite needs no data files. Element i of an input
// is a pure function of (seed, input name, i): the first sample of a batch of B equals the batch
// of 1, and the values are the same on every platform (std::*_distribution are not, so kiln
// uses its own splitmix64 counter-based generator).
//   uniform: floats in [low, high) (f16/bf16: drawn as f32, then rounded to nearest even);
//            integers uniform over the integers in [low, high] (which must end below 2^63);
//            bool 0/1
//   normal:  mean + std * z (Box-Muller); integers rounded and clamped to the dtype
#pragma once

#include <string_view>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"
#include "kiln/suite/manifest.h"

namespace kiln::suite {

// A tensor of `dtype` and `shape` filled by `generator` for the input called `input_name`.
// Errors: an integer range with no integer in it, outside the dtype's range or reaching 2^63 (out
// of range); an overflowing shape.
StatusOr<Tensor> generate_tensor(const Generator& generator, std::string_view input_name,
                                 DType dtype, const ConcreteShape& shape);

}  // namespace kiln::suite
