// Comparisons and logic with bool results (shaders/compare.comp: Equal, Less, Greater,
// LessOrEqual, GreaterOrEqual on f32/i32/i64/bool, Not, And, Or, Xor on bool), Where
// (shaders/where.comp: bool condition, 4- or 8-byte x and y) with numpy broadcasting of every
// operand (broadcast.h), and Cast between f32, i32, i64, bool and u8 (shaders/cast.comp, kiln's
// conversion rules: kernels/numeric_convert.h). Bool is one byte per element: these kernels need
// the device's 8-bit storage, Cast also shaderInt64; without them they return Unimplemented and
// the dispatch runs on the CPU.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "kiln/hal/vulkan/broadcast.h"
#include "kiln/hal/vulkan/kernel_builder.h"
#include "kiln/hal/vulkan/op_table.h"
#include "kiln/kernels/infer_util.h"

namespace kiln::hal::vulkan {
namespace {

Status need_8bit_storage(const KernelBuilder& b) {
  if (b.device().storage_buffer_8bit) return ok_status();
  return unimplemented("{} needs 8-bit storage buffers (storageBuffer8BitAccess), which {} lacks",
                       b.dispatch().op_type, b.device().name);
}

Status check_rank(const ConcreteShape& y) {
  if (y.size() > kMaxBroadcastRank) {
    return unimplemented("rank {} (the Vulkan kernel takes up to {})", y.size(), kMaxBroadcastRank);
  }
  return ok_status();
}

// compare.comp's TYPE code of a comparison operand.
std::optional<uint32_t> compare_type(DType t) {
  switch (t) {
    case DType::kF32: return 0u;
    case DType::kI32: return 1u;
    case DType::kI64: return 2u;
    case DType::kBool: return 3u;
    default: return std::nullopt;
  }
}

// cast.comp's SRC/DST code.
std::optional<uint32_t> cast_type(DType t) {
  switch (t) {
    case DType::kF32: return 0u;
    case DType::kI32: return 1u;
    case DType::kI64: return 2u;
    case DType::kBool: return 3u;
    case DType::kU8: return 4u;
    default: return std::nullopt;
  }
}

}  // namespace

Status build_compare(KernelBuilder& b) {
  static constexpr std::string_view kOps[] = {
      "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not"};
  const std::string& op = b.dispatch().op_type;
  uint32_t code = 0;
  while (code < std::size(kOps) && kOps[code] != op) ++code;
  if (code == std::size(kOps)) return unimplemented("no Vulkan kernel for {}", op);
  KILN_RETURN_IF_ERROR(need_8bit_storage(b));
  const bool unary = op == "Not";
  const size_t inputs = unary ? 1 : 2;
  const std::optional<uint32_t> type = compare_type(b.input(0).dtype);
  if (!type) {
    return unimplemented("'{}' is {}; the Vulkan kernel takes f32, i32, i64 or bool",
                         b.input(0).name, dtype_name(b.input(0).dtype));
  }
  if (code >= 5 && *type != 3) return unimplemented("{} of {}", op, dtype_name(b.input(0).dtype));
  if (code >= 1 && code <= 4 && *type == 3) return unimplemented("{} of bool", op);
  if (!unary) KILN_RETURN_IF_ERROR(b.expect_dtype(b.input(1), b.input(0).dtype));
  KILN_RETURN_IF_ERROR(b.expect_dtype(b.output(0), DType::kBool));
  const ConcreteShape& y = b.output(0).shape;
  KILN_RETURN_IF_ERROR(check_rank(y));
  const uint64_t n = static_cast<uint64_t>(kernels::product(y));
  if (n == 0) return ok_status();

  std::vector<uint32_t> params = {static_cast<uint32_t>(n), static_cast<uint32_t>(y.size())};
  const std::vector<uint32_t> dims = broadcast_dims(y);
  params.insert(params.end(), dims.begin(), dims.end());
  for (size_t i = 0; i < 2; ++i) {
    const std::vector<uint32_t> s = broadcast_strides(b.input(std::min(i, inputs - 1)).shape, y);
    params.insert(params.end(), s.begin(), s.end());
  }
  KILN_ASSIGN_OR_RETURN(Operand a, b.input_operand(0));
  Operand c = a;
  if (!unary) {
    KILN_ASSIGN_OR_RETURN(c, b.input_operand(1));
  }
  b.describe(
      fmt::format("vulkan compare {} of {} ({} elements)", op, dtype_name(b.input(0).dtype), n));
  return b.launch("compare", {code, *type}, n, {a, c, b.output_operand(0)}, std::move(params));
}

Status build_where(KernelBuilder& b) {
  KILN_RETURN_IF_ERROR(need_8bit_storage(b));
  KILN_RETURN_IF_ERROR(b.expect_dtype(b.input(0), DType::kBool));
  const DType dtype = b.output(0).dtype;
  const size_t size = dtype_size(dtype);
  if (size != 4 && size != 8) {
    return unimplemented("Where of {} (the Vulkan kernel takes 4- and 8-byte dtypes)",
                         dtype_name(dtype));
  }
  for (size_t i = 1; i < 3; ++i) KILN_RETURN_IF_ERROR(b.expect_dtype(b.input(i), dtype));
  const ConcreteShape& y = b.output(0).shape;
  KILN_RETURN_IF_ERROR(check_rank(y));
  const uint64_t n = static_cast<uint64_t>(kernels::product(y));
  if (n == 0) return ok_status();

  std::vector<uint32_t> table = broadcast_dims(y);
  for (size_t i = 0; i < 3; ++i) {
    const std::vector<uint32_t> s = broadcast_strides(b.input(i).shape, y);
    table.insert(table.end(), s.begin(), s.end());
  }
  KILN_ASSIGN_OR_RETURN(Operand table_operand, b.owned_constant(std::as_bytes(std::span(table))));
  KILN_ASSIGN_OR_RETURN(Operand c, b.input_operand(0));
  KILN_ASSIGN_OR_RETURN(Operand x, b.input_operand(1));
  KILN_ASSIGN_OR_RETURN(Operand z, b.input_operand(2));
  b.describe(fmt::format("vulkan Where of {} ({} elements)", dtype_name(dtype), n));
  return b.launch("where", {size == 8 ? 1u : 0u}, n, {c, x, z, b.output_operand(0), table_operand},
                  {static_cast<uint32_t>(n), static_cast<uint32_t>(y.size())});
}

Status build_cast(KernelBuilder& b) {
  const DType from = b.input(0).dtype, to = b.output(0).dtype;
  const std::optional<uint32_t> src = cast_type(from), dst = cast_type(to);
  if (!src || !dst) {
    return unimplemented("Cast from {} to {} (the Vulkan kernel takes f32, i32, i64, bool, u8)",
                         dtype_name(from), dtype_name(to));
  }
  const uint64_t n = static_cast<uint64_t>(kernels::product(b.output(0).shape));
  if (n == 0) return ok_status();
  KILN_ASSIGN_OR_RETURN(Operand x, b.input_operand(0));
  if (from == to) {
    b.describe(fmt::format("vulkan Cast to the same dtype ({}): copy", dtype_name(to)));
    b.copy(x, b.output_operand(0), n * dtype_size(to));
    return ok_status();
  }
  KILN_RETURN_IF_ERROR(need_8bit_storage(b));
  if (!b.device().shader_int64) {
    return unimplemented("Cast needs shaderInt64, which {} lacks", b.device().name);
  }
  b.describe(
      fmt::format("vulkan Cast {} to {} ({} elements)", dtype_name(from), dtype_name(to), n));
  return b.launch("cast", {*src, *dst}, n, {x, b.output_operand(0)}, {static_cast<uint32_t>(n)});
}

}  // namespace kiln::hal::vulkan
