// ConvertStep: f32 <-> f16 / bf16 conversion of a buffer, element by element in storage order,
// for values whose layouts differ only in the data type (ProgramBuilder::add_reorder uses it for
// every such conversion: oneDNN 2.6's f16 reorder is its generic reference loop, about a hundred
// times slower). Narrowing rounds to nearest even; NaN stays NaN and overflow becomes infinity
// (kiln/base/half.h, and the F16C instructions where the CPU has them, give the same values).
// OpenMP-parallel in one piece a thread (parallel_pieces.h).
#pragma once

#include <cstddef>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "kiln/base/status.h"
#include "kiln/hal/cpu/step.h"

namespace kiln::hal::cpu {

// Converts `count` elements (ConvertStep::converts(from_type, to_type) must hold), in parallel.
void convert_elements(dnnl::memory::data_type from_type, const std::byte* from,
                      dnnl::memory::data_type to_type, std::byte* to, size_t count);

class ConvertStep : public Step {
 public:
  using Type = dnnl::memory::data_type;
  // Whether this step converts `from` to `to`: f32 to f16 or bf16, or back.
  static bool converts(Type from, Type to);

  // `count` elements of `from_type` at `from` into `to_type` at `to` (converts() must hold).
  ConvertStep(std::string label, BufferRef from, Type from_type, BufferRef to, Type to_type,
              size_t count)
      : label_(std::move(label)),
        from_(from),
        to_(to),
        from_type_(from_type),
        to_type_(to_type),
        count_(count) {}
  Status run(const ExecContext& ctx) override;
  std::string describe() const override { return label_; }

 private:
  std::string label_;
  BufferRef from_, to_;
  Type from_type_, to_type_;
  size_t count_;
};

}  // namespace kiln::hal::cpu
