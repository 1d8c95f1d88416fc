// Ops whose output is known when the dispatch is prepared: ConstantOfShape (shaders/fill.comp,
// 4- and 8-byte dtypes; 1-byte ones, bool and u8, copied from a constant made here) and Range
// (start and delta from constants or values the shape program knows: the output is computed
// here, exactly as kernels/generate.cc computes it, and copied from a constant). Range outputs are
// short (shape computations): longer than kMaxRangeElements runs on the CPU.
#include <fmt/format.h>

#include <cstring>
#include <variant>

#include "kiln/hal/vulkan/kernel_builder.h"
#include "kiln/hal/vulkan/op_table.h"
#include "kiln/kernels/infer_util.h"

namespace kiln::hal::vulkan {
namespace {

constexpr int64_t kMaxRangeElements = int64_t{1} << 20;

// The one element of Range's scalar input i: a constant or a known value.
const Tensor* scalar_input(const KernelBuilder& b, size_t i) {
  const ValueSpec& v = b.input(i);
  if (v.role == ValueRole::kConstant && v.constant != nullptr) return v.constant;
  if (v.known_value) return &*v.known_value;
  return nullptr;
}

template <typename T>
void append(std::vector<std::byte>& bytes, T v) {
  const size_t at = bytes.size();
  bytes.resize(at + sizeof(T));
  std::memcpy(bytes.data() + at, &v, sizeof(T));
}

}  // namespace

Status build_range(KernelBuilder& b) {
  const DType dtype = b.output(0).dtype;
  if (dtype != DType::kF32 && dtype != DType::kI32 && dtype != DType::kI64) {
    return unimplemented("Range of {} (the Vulkan kernel takes f32, i32, i64)", dtype_name(dtype));
  }
  const Tensor* start = scalar_input(b, 0);
  const Tensor* delta = scalar_input(b, 2);
  if (start == nullptr || delta == nullptr) {
    return unimplemented("Range's start or delta is computed at run time");
  }
  const int64_t n = b.output(0).shape.at(0);
  if (n == 0) return ok_status();
  if (n > kMaxRangeElements) return unimplemented("Range of {} elements", n);
  std::vector<std::byte> bytes;
  bytes.reserve(static_cast<size_t>(n) * dtype_size(dtype));
  if (dtype == DType::kF32) {
    // kernels/generate.cc: start + i * delta in double, rounded once.
    const double s = element_as_double(*start, 0), d = element_as_double(*delta, 0);
    for (int64_t i = 0; i < n; ++i) {
      append(bytes, static_cast<float>(s + static_cast<double>(i) * d));
    }
  } else {
    // Wrapping arithmetic, as the definition's.
    const auto s = static_cast<uint64_t>(element_as_int64(*start, 0));
    const auto d = static_cast<uint64_t>(element_as_int64(*delta, 0));
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t v = s + static_cast<uint64_t>(i) * d;
      if (dtype == DType::kI32) {
        append(bytes, static_cast<int32_t>(v));
      } else {
        append(bytes, static_cast<int64_t>(v));
      }
    }
  }
  KILN_ASSIGN_OR_RETURN(Operand values, b.owned_constant(bytes));
  b.describe(
      fmt::format("vulkan Range of {} ({} elements, known when prepared)", dtype_name(dtype), n));
  b.copy(values, b.output_operand(0), bytes.size());
  return ok_status();
}

Status build_constant_of_shape(KernelBuilder& b) {
  const DType dtype = b.output(0).dtype;
  // The attribute 'value' as the importer stores it (kernels/generate.cc's read_fill; the
  // definition's checks have passed): an int or a float; absent is 0.
  double real = 0;
  int64_t integer = 0;
  const auto& all = b.attributes().all();
  if (auto it = all.find("value"); it != all.end()) {
    if (const auto* i = std::get_if<int64_t>(&it->second)) {
      integer = *i;
      real = static_cast<double>(*i);
    } else if (const auto* f = std::get_if<double>(&it->second)) {
      real = *f;
    }
  }
  std::vector<std::byte> element;
  switch (dtype) {
    case DType::kF32: append(element, static_cast<float>(real)); break;
    case DType::kF64: append(element, real); break;
    case DType::kI32: append(element, static_cast<int32_t>(integer)); break;
    case DType::kI64: append(element, integer); break;
    case DType::kBool: append(element, static_cast<uint8_t>(integer != 0 ? 1 : 0)); break;
    case DType::kU8: append(element, static_cast<uint8_t>(integer)); break;
    default:
      return unimplemented(
          "ConstantOfShape of {} (the Vulkan kernel takes f32, f64, i32, i64, "
          "bool, u8)",
          dtype_name(dtype));
  }
  const uint64_t n = static_cast<uint64_t>(kernels::product(b.output(0).shape));
  if (n == 0) return ok_status();
  if (element.size() == 1) {
    constexpr uint64_t kMaxByteFill = uint64_t{1} << 20;
    if (n > kMaxByteFill) return unimplemented("ConstantOfShape of {} bytes", n);
    std::vector<std::byte> bytes(n, element[0]);
    KILN_ASSIGN_OR_RETURN(Operand values, b.owned_constant(bytes));
    b.describe(
        fmt::format("vulkan ConstantOfShape of {} ({} elements, copied)", dtype_name(dtype), n));
    b.copy(values, b.output_operand(0), bytes.size());
    return ok_status();
  }
  uint32_t words[2] = {0, 0};
  std::memcpy(words, element.data(), element.size());
  b.describe(fmt::format("vulkan ConstantOfShape of {} ({} elements)", dtype_name(dtype), n));
  return b.launch("fill", {element.size() == 8 ? 1u : 0u}, n, {b.output_operand(0)},
                  {static_cast<uint32_t>(n), words[0], words[1]});
}

}  // namespace kiln::hal::vulkan
