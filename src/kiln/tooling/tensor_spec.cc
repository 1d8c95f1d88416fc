#include "kiln/tooling/tensor_spec.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/base/checked_math.h"
#include "kiln/base/half.h"
#include "kiln/tooling/npy.h"
#include "kiln/tooling/tensor_file_codec.h"

namespace kiln {
namespace {

constexpr std::string_view kSpecForms =
    "expected SHAPExDTYPE=VALUES, SHAPExDTYPE=@FILE or @FILE.npy, e.g. 2x2xf32=1 2 3 4";
constexpr std::string_view kKnownDtypes =
    "f32, f64, f16, bf16, i64, i32, i16, i8, u64, u32, u16, u8, bool";

// Inline specs can hold millions of values; error messages quote only the start.
std::string quote(std::string_view spec) {
  constexpr size_t kMaxQuoted = 80;
  if (spec.size() <= kMaxQuoted) return fmt::format("'{}'", spec);
  return fmt::format("'{}...' ({} chars)", spec.substr(0, kMaxQuoted), spec.size());
}

bool has_extension(std::string_view path, std::string_view ext) {
  if (path.size() < ext.size()) return false;
  std::string_view tail = path.substr(path.size() - ext.size());
  for (size_t i = 0; i < ext.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(tail[i])) != ext[i]) return false;
  }
  return true;
}

bool is_separator(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ','; }

// Splits on runs of whitespace holding at most one comma; a leading, trailing or doubled comma
// would otherwise hide a missing value.
StatusOr<std::vector<std::string_view>> split_values(std::string_view text, std::string_view spec) {
  std::vector<std::string_view> tokens;
  size_t pos = 0;
  while (pos < text.size()) {
    int commas = 0;
    while (pos < text.size() && is_separator(text[pos])) commas += text[pos++] == ',';
    if (commas > 1 || (commas == 1 && (tokens.empty() || pos == text.size()))) {
      return invalid_argument("tensor spec {}: empty value around a ',' after {} values",
                              quote(spec), tokens.size());
    }
    const size_t start = pos;
    while (pos < text.size() && !is_separator(text[pos])) ++pos;
    if (pos > start) tokens.push_back(text.substr(start, pos - start));
  }
  return tokens;
}

// from_chars takes no '+'; accept one so "+1" and "1" mean the same, but not "+-1".
std::string_view strip_plus(std::string_view token) {
  if (token.size() > 1 && token[0] == '+' && token[1] != '-' && token[1] != '+') {
    return token.substr(1);
  }
  return token;
}

template <typename T>
bool parse_float(std::string_view token, T* out) {
  token = strip_plus(token);
  T value{};
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (end != token.data() + token.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    // Overflow is an error; underflow rounds as strtod does (to a subnormal or signed zero).
    const std::string copy(token);
    if constexpr (std::is_same_v<T, float>) {
      value = std::strtof(copy.c_str(), nullptr);
    } else {
      value = std::strtod(copy.c_str(), nullptr);
    }
    if (std::isinf(value)) return false;
  } else if (ec != std::errc()) {
    return false;
  }
  *out = value;
  return true;
}

// f16 and bf16 parse as f32 and round to nearest even; a finite value that rounds to infinity
// overflows the dtype and is refused like an f32 overflow.
bool parse_half(std::string_view token, uint16_t (*from_float)(float), float (*to_float)(uint16_t),
                uint16_t* out) {
  float value = 0;
  if (!parse_float(token, &value)) return false;
  const uint16_t bits = from_float(value);
  if (std::isfinite(value) && std::isinf(to_float(bits))) return false;
  *out = bits;
  return true;
}

template <typename T>
bool parse_integer(std::string_view token, T* out) {
  token = strip_plus(token);
  T value{};
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value, 10);
  if (ec != std::errc() || end != token.data() + token.size()) return false;
  *out = value;
  return true;
}

bool parse_bool(std::string_view token, uint8_t* out) {
  if (token == "1" || token == "true" || token == "True") {
    *out = 1;
    return true;
  }
  if (token == "0" || token == "false" || token == "False") {
    *out = 0;
    return true;
  }
  return false;
}

bool parse_value(std::string_view token, Tensor& tensor, int64_t i) {
  switch (tensor.dtype()) {
    case DType::kF32: return parse_float(token, &tensor.mutable_values<float>()[i]);
    case DType::kF64: return parse_float(token, &tensor.mutable_values<double>()[i]);
    case DType::kF16:
      return parse_half(token, float_to_half_bits, half_bits_to_float,
                        &tensor.mutable_values<uint16_t>()[i]);
    case DType::kBF16:
      return parse_half(token, float_to_bfloat16_bits, bfloat16_bits_to_float,
                        &tensor.mutable_values<uint16_t>()[i]);
    case DType::kI64: return parse_integer(token, &tensor.mutable_values<int64_t>()[i]);
    case DType::kI32: return parse_integer(token, &tensor.mutable_values<int32_t>()[i]);
    case DType::kI16: return parse_integer(token, &tensor.mutable_values<int16_t>()[i]);
    case DType::kI8: return parse_integer(token, &tensor.mutable_values<int8_t>()[i]);
    case DType::kU64: return parse_integer(token, &tensor.mutable_values<uint64_t>()[i]);
    case DType::kU32: return parse_integer(token, &tensor.mutable_values<uint32_t>()[i]);
    case DType::kU16: return parse_integer(token, &tensor.mutable_values<uint16_t>()[i]);
    case DType::kU8: return parse_integer(token, &tensor.mutable_values<uint8_t>()[i]);
    case DType::kBool: return parse_bool(token, &tensor.mutable_values<uint8_t>()[i]);
  }
  return false;
}

// One value for every element ("1x3x224x224xf32=0"), bounded like a tensor file.
StatusOr<Tensor> splat(const TensorType& type, std::string_view token, int64_t count,
                       std::string_view spec) {
  const uint64_t bytes = static_cast<uint64_t>(count) * dtype_size(type.dtype);
  if (bytes > kMaxTensorFileBytes) {
    return out_of_range(
        "tensor spec {}: {} filled with one value is {} bytes, over the limit of {}", quote(spec),
        format_tensor_type(type.dtype, type.shape), bytes, kMaxTensorFileBytes);
  }
  KILN_ASSIGN_OR_RETURN(Tensor tensor, Tensor::create(type.dtype, type.shape));
  if (!parse_value(token, tensor, 0)) {
    return invalid_argument("tensor spec {}: the value '{}' is not a valid {}{}", quote(spec),
                            token, dtype_name(type.dtype),
                            type.dtype == DType::kBool ? " (0, 1, true or false)" : "");
  }
  // Doubling copies of the first element's bytes.
  std::byte* data = tensor.mutable_data();
  const size_t total = tensor.byte_size();
  for (size_t filled = dtype_size(type.dtype); filled < total; filled *= 2) {
    std::memcpy(data + filled, data, std::min(filled, total - filled));
  }
  return tensor;
}

StatusOr<Tensor> parse_inline_values(const TensorType& type, std::string_view text,
                                     std::string_view spec) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::string_view> tokens, split_values(text, spec));
  // Checked before allocating, so a huge shape with few values costs nothing.
  const int64_t count = checked_product(type.shape).value_or(-1);
  if (tokens.size() == 1 && count > 1) return splat(type, tokens[0], count, spec);
  if (static_cast<int64_t>(tokens.size()) != count) {
    return invalid_argument("tensor spec {}: {} needs {} value{}, got {}", quote(spec),
                            format_tensor_type(type.dtype, type.shape), count,
                            count == 1 ? "" : "s", tokens.size());
  }
  KILN_ASSIGN_OR_RETURN(Tensor tensor, Tensor::create(type.dtype, type.shape));
  for (int64_t i = 0; i < count; ++i) {
    if (!parse_value(tokens[i], tensor, i)) {
      return invalid_argument("tensor spec {}: value {} of {} ('{}') is not a valid {}{}",
                              quote(spec), i + 1, count, tokens[i], dtype_name(type.dtype),
                              type.dtype == DType::kBool ? " (0, 1, true or false)" : "");
    }
  }
  return tensor;
}

// A file that carries its own dtype and shape must agree with the spec's, when one is given.
StatusOr<Tensor> check_file_type(const std::optional<TensorType>& type, Tensor tensor,
                                 const std::string& path, std::string_view spec) {
  if (type && (type->dtype != tensor.dtype() || type->shape != tensor.shape())) {
    return invalid_argument("tensor spec {}: the spec says {} but '{}' holds {}", quote(spec),
                            format_tensor_type(type->dtype, type->shape), path,
                            format_tensor_type(tensor.dtype(), tensor.shape()));
  }
  return tensor;
}

StatusOr<Tensor> load_file(std::optional<TensorType> type, std::string_view path_view,
                           std::string_view spec) {
  const std::string path(path_view);
  if (path.empty()) {
    return invalid_argument("tensor spec {}: missing file name after '@'", quote(spec));
  }
  if (const TensorFileCodec* codec = find_tensor_file_codec(path); codec && codec->read) {
    KILN_ASSIGN_OR_RETURN(Tensor tensor, codec->read(path));
    return check_file_type(type, std::move(tensor), path, spec);
  }
  if (has_extension(path, ".pb")) {
    return unimplemented(
        "tensor spec {}: TensorProto (.pb) files are not supported by this program; use "
        ".npy or raw .bin",
        quote(spec));
  }
  if (!has_extension(path, ".npy")) {
    if (!type) {
      return invalid_argument(
          "tensor spec {}: a raw file holds no shape or dtype; write "
          "SHAPExDTYPE=@{} (e.g. 1x3x224x224xf32=@{}), or use a .npy file",
          quote(spec), path, path);
    }
    return read_raw_tensor_file(path, type->dtype, type->shape);
  }
  KILN_ASSIGN_OR_RETURN(Tensor tensor, read_npy_file(path, kMaxTensorFileBytes));
  return check_file_type(type, std::move(tensor), path, spec);
}

}  // namespace

StatusOr<TensorType> parse_tensor_type(std::string_view text) {
  if (text.empty()) {
    return invalid_argument("tensor type '' is empty; expected SHAPExDTYPE, e.g. 2x3xf32");
  }
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t x = text.find('x'); x != std::string_view::npos; x = text.find('x', start)) {
    parts.push_back(text.substr(start, x - start));
    start = x + 1;
  }
  parts.push_back(text.substr(start));

  TensorType type;
  std::string_view dtype_text = parts.back();
  auto dtype = parse_dtype(dtype_text);
  if (!dtype) {
    if (!dtype_text.empty() &&
        dtype_text.find_first_not_of("0123456789") == std::string_view::npos) {
      return invalid_argument("tensor type '{}' has no dtype; it must end in xDTYPE, e.g. 2x3xf32",
                              text);
    }
    return invalid_argument("tensor type '{}': unknown dtype '{}' (known: {})", text, dtype_text,
                            kKnownDtypes);
  }
  type.dtype = *dtype;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    std::string_view part = parts[i];
    if (part.empty()) {
      return invalid_argument("tensor type '{}': empty dim at position {}", text, i);
    }
    if (part[0] == '-') return invalid_argument("tensor type '{}': negative dim '{}'", text, part);
    int64_t dim = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), dim, 10);
    if (ec == std::errc::result_out_of_range) {
      return out_of_range("tensor type '{}': dim '{}' is too large", text, part);
    }
    if (ec != std::errc() || end != part.data() + part.size() || part[0] == '+') {
      return invalid_argument("tensor type '{}': dim '{}' is not a non-negative integer", text,
                              part);
    }
    type.shape.push_back(dim);
  }
  auto count = checked_product(type.shape);
  if (!count || !checked_mul(*count, static_cast<int64_t>(dtype_size(type.dtype)))) {
    return out_of_range("tensor type '{}': the shape overflows a 64-bit byte count", text);
  }
  return type;
}

std::string format_tensor_type(DType dtype, const ConcreteShape& shape) {
  if (shape.empty()) return std::string(dtype_name(dtype));
  return fmt::format("{}x{}", fmt::join(shape, "x"), dtype_name(dtype));
}

namespace {

StatusOr<Tensor> parse_tensor_spec_unnoted(std::string_view spec) {
  if (spec[0] == '@') return load_file(std::nullopt, spec.substr(1), spec);
  const size_t eq = spec.find('=');
  if (eq == std::string_view::npos) {
    std::string hint =
        has_extension(spec, ".npy") ? fmt::format(" (did you mean '@{}'?)", spec) : "";
    return invalid_argument("tensor spec {}: missing '='; {}{}", quote(spec), kSpecForms, hint);
  }
  auto type = parse_tensor_type(spec.substr(0, eq));
  if (!type.ok()) {
    Status status = std::move(type).status();
    return Status(status.code(), fmt::format("tensor spec {}: {}", quote(spec), status.message()));
  }
  std::string_view value = spec.substr(eq + 1);
  if (!value.empty() && value[0] == '@') return load_file(*type, value.substr(1), spec);
  return parse_inline_values(*type, value, spec);
}

}  // namespace

StatusOr<Tensor> parse_tensor_spec(std::string_view spec) {
  if (spec.empty()) return invalid_argument("empty tensor spec; {}", kSpecForms);
  StatusOr<Tensor> tensor = parse_tensor_spec_unnoted(spec);
  if (tensor.ok()) return tensor;
  // Errors from the file layer name the file but not the flag value it came from.
  Status status = std::move(tensor).status();
  if (status.message().find(quote(spec)) == std::string::npos) {
    status.with_note(fmt::format("in tensor spec {}", quote(spec)));
  }
  return status;
}

StatusOr<OutputSpec> parse_output_spec(std::string_view spec) {
  if (spec == "-") return OutputSpec{};
  if (spec.empty() || spec[0] != '@') {
    std::string hint = spec.empty() ? "" : fmt::format(" (did you mean '@{}'?)", spec);
    return invalid_argument("output spec '{}': expected '-' (stdout), '@FILE.bin' or '@FILE.npy'{}",
                            spec, hint);
  }
  std::string_view path = spec.substr(1);
  if (path.empty()) return invalid_argument("output spec '{}': missing file name after '@'", spec);
  auto format = tensor_file_format(path);
  if (!format.ok()) {
    return invalid_argument(
        "output spec '{}': unknown extension; expected '@FILE.bin' (raw "
        "little-endian) or '@FILE.npy'",
        spec);
  }
  return OutputSpec{.to_stdout = false, .path = std::string(path), .format = *format};
}

Status write_output(const OutputSpec& spec, const Tensor& tensor, std::FILE* stdout_stream,
                    bool print_all) {
  if (!spec.to_stdout) return write_tensor_file(spec.path, tensor, spec.format);
  const std::string text = print_all ? format_tensor(tensor) : format_tensor_summary(tensor);
  if (std::fwrite(text.data(), 1, text.size(), stdout_stream) != text.size() ||
      std::fflush(stdout_stream) != 0) {
    return data_loss("could not write tensor {} to stdout",
                     format_tensor_type(tensor.dtype(), tensor.shape()));
  }
  return ok_status();
}

}  // namespace kiln
