#include "kiln/tooling/npy.h"

#include <bit>
#include <charconv>
#include <cstring>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/base/checked_math.h"
#include "kiln/base/file_util.h"

namespace kiln {
namespace {

// Tensor bytes are host order; .npy data is written and read as '<' without swapping.
static_assert(std::endian::native == std::endian::little, "kiln's .npy IO assumes little-endian");

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kAlignment = 64;

struct NpyHeader {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<ConcreteShape> shape;
};

// What numpy's own reader accepts from ast.literal_eval, restricted to the one dict shape np.save
// writes: {'descr': STR, 'fortran_order': BOOL, 'shape': TUPLE-OF-INTS}.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view file) : text_(text), file_(file) {}

  StatusOr<NpyHeader> parse() {
    NpyHeader header;
    skip_space();
    if (!consume('{')) return error("expected '{'");
    skip_space();
    while (!at('}')) {
      KILN_ASSIGN_OR_RETURN(std::string key, parse_string());
      skip_space();
      if (!consume(':')) return error(fmt::format("expected ':' after key '{}'", key));
      skip_space();
      if (key == "descr") {
        if (header.descr) return error("duplicate key 'descr'");
        if (at('[')) {
          return Status(
              unimplemented("{}: structured dtypes (a list 'descr') are not supported", where()));
        }
        KILN_ASSIGN_OR_RETURN(header.descr, parse_string());
      } else if (key == "fortran_order") {
        if (header.fortran_order) return error("duplicate key 'fortran_order'");
        KILN_ASSIGN_OR_RETURN(header.fortran_order, parse_bool());
      } else if (key == "shape") {
        if (header.shape) return error("duplicate key 'shape'");
        KILN_ASSIGN_OR_RETURN(header.shape, parse_shape());
      } else {
        return error(fmt::format("unexpected key '{}'", key));
      }
      skip_space();
      if (consume(',')) {
        skip_space();
      } else if (!at('}')) {
        return error("expected ',' or '}'");
      }
    }
    ++pos_;  // '}'
    skip_space();
    if (pos_ != text_.size()) return error("unexpected text after the header dict");
    if (!header.descr) return error("missing key 'descr'");
    if (!header.fortran_order) return error("missing key 'fortran_order'");
    if (!header.shape) return error("missing key 'shape'");
    return header;
  }

 private:
  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  bool consume(char c) {
    if (!at(c)) return false;
    ++pos_;
    return true;
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool consume_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  std::string where() const { return fmt::format("invalid .npy file '{}'", file_); }

  Status error(std::string_view what) const {
    std::string_view shown = text_.substr(0, 200);
    while (!shown.empty() && (shown.back() == ' ' || shown.back() == '\n')) shown.remove_suffix(1);
    return invalid_argument("{}: header {} at offset {} of \"{}\"", where(), what, pos_, shown);
  }

  StatusOr<std::string> parse_string() {
    if (!at('\'') && !at('"')) return error("expected a quoted string");
    const char quote = text_[pos_++];
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' || text_[pos_] == '\n') {
        return error("unsupported character in string");
      }
      ++pos_;
    }
    if (pos_ == text_.size()) return error("unterminated string");
    return std::string(text_.substr(start, pos_++ - start));
  }

  StatusOr<bool> parse_bool() {
    if (consume_word("True")) return true;
    if (consume_word("False")) return false;
    return error("expected True or False for 'fortran_order'");
  }

  StatusOr<int64_t> parse_dim() {
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    std::string_view digits = text_.substr(start, pos_ - start);
    if (digits.empty()) {
      if (at('-')) return error("negative dim in 'shape'");
      return error("expected a non-negative integer in 'shape'");
    }
    if (digits.size() > 1 && digits[0] == '0') return error("dim with a leading zero in 'shape'");
    int64_t dim = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), dim);
    if (ec != std::errc() || end != digits.data() + digits.size()) {
      return Status(out_of_range("{}: dim {} in 'shape' is too large", where(), digits));
    }
    if (!consume('L')) consume('l');  // Python 2 longs, as old numpy wrote them
    return dim;
  }

  StatusOr<ConcreteShape> parse_shape() {
    if (!consume('(')) return error("expected a tuple for 'shape'");
    ConcreteShape shape;
    bool trailing_comma = false;
    skip_space();
    while (!consume(')')) {
      KILN_ASSIGN_OR_RETURN(int64_t dim, parse_dim());
      shape.push_back(dim);
      skip_space();
      trailing_comma = consume(',');
      skip_space();
      if (!trailing_comma && !at(')')) return error("expected ',' or ')' in 'shape'");
    }
    // (3) is the integer 3 in Python, not a tuple; numpy rejects it too.
    if (shape.size() == 1 && !trailing_comma) {
      return error("'shape' (N) is not a tuple; write (N,)");
    }
    return shape;
  }

  std::string_view text_;
  std::string_view file_;
  size_t pos_ = 0;
};

StatusOr<DType> dtype_from_descr(std::string_view descr, std::string_view file) {
  auto bad = [&]() {
    return invalid_argument("invalid .npy file '{}': malformed 'descr' '{}'", file, descr);
  };
  if (descr.size() < 3) return bad();
  const char order = descr[0];
  const char kind = descr[1];
  int size = 0;
  std::string_view digits = descr.substr(2);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size);
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    return unimplemented(".npy file '{}': dtype '{}' is not supported", file, descr);
  }
  if (order != '<' && order != '>' && order != '|' && order != '=') return bad();
  if (size > 1) {
    if (order == '>') {
      return unimplemented(
          ".npy file '{}': big-endian data ('descr' '{}') is not supported; convert it with "
          "numpy: a.astype(a.dtype.newbyteorder('<'))",
          file, descr);
    }
    if (order != '<') {
      return unimplemented(".npy file '{}': byte order '{}' in 'descr' '{}' is not supported", file,
                           order, descr);
    }
  }
  std::optional<DType> dtype;
  if (kind == 'f' && size == 2) dtype = DType::kF16;
  if (kind == 'f' && size == 4) dtype = DType::kF32;
  if (kind == 'f' && size == 8) dtype = DType::kF64;
  if (kind == 'i' && size == 8) dtype = DType::kI64;
  if (kind == 'i' && size == 4) dtype = DType::kI32;
  if (kind == 'i' && size == 2) dtype = DType::kI16;
  if (kind == 'i' && size == 1) dtype = DType::kI8;
  if (kind == 'u' && size == 8) dtype = DType::kU64;
  if (kind == 'u' && size == 4) dtype = DType::kU32;
  if (kind == 'u' && size == 2) dtype = DType::kU16;
  if (kind == 'u' && size == 1) dtype = DType::kU8;
  if (kind == 'b' && size == 1) dtype = DType::kBool;
  if (!dtype) {
    return unimplemented(
        ".npy file '{}': dtype '{}' is not supported (supported: f2 f4 f8 i8 i4 i2 i1 u8 u4 u2 "
        "u1 b1)",
        file, descr);
  }
  return *dtype;
}

std::string_view descr_for(DType dtype) {
  switch (dtype) {
    case DType::kF16: return "<f2";
    case DType::kF32: return "<f4";
    case DType::kF64: return "<f8";
    case DType::kI64: return "<i8";
    case DType::kI32: return "<i4";
    case DType::kI16: return "<i2";
    case DType::kI8: return "|i1";
    case DType::kU64: return "<u8";
    case DType::kU32: return "<u4";
    case DType::kU16: return "<u2";
    case DType::kU8: return "|u1";
    case DType::kBool: return "|b1";
    case DType::kBF16: break;  // numpy has no bfloat16
  }
  return "";
}

uint32_t read_le(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

StatusOr<Tensor> parse_npy(std::span<const std::byte> bytes, std::string_view name) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t size = bytes.size();
  if (size < 10 || std::memcmp(p, kMagic.data(), kMagic.size()) != 0) {
    return invalid_argument("'{}' is not a .npy file: it does not start with \"\\x93NUMPY\"", name);
  }
  const int major = p[6];
  const int minor = p[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    return unimplemented(".npy file '{}' has format version {}.{}; supported: 1.0, 2.0, 3.0", name,
                         major, minor);
  }
  const size_t prefix = major == 1 ? 10 : 12;
  if (size < prefix) return data_loss(".npy file '{}' is truncated inside its header", name);
  const uint64_t header_len = read_le(p + 8, major == 1 ? 2 : 4);
  if (header_len > size - prefix) {
    return data_loss(
        ".npy file '{}' is truncated: header says {} bytes, file has {} after the "
        "{}-byte prefix",
        name, header_len, size - prefix, prefix);
  }
  std::string_view text(reinterpret_cast<const char*>(p + prefix), header_len);
  KILN_ASSIGN_OR_RETURN(NpyHeader header, HeaderParser(text, name).parse());
  KILN_ASSIGN_OR_RETURN(DType dtype, dtype_from_descr(*header.descr, name));
  if (*header.fortran_order) {
    return unimplemented(
        ".npy file '{}': fortran_order True (column-major) is not supported; save a C-ordered "
        "array (np.ascontiguousarray)",
        name);
  }
  const ConcreteShape& shape = *header.shape;
  auto count = checked_product(shape);
  auto data_bytes =
      count ? checked_mul(*count, static_cast<int64_t>(dtype_size(dtype))) : std::nullopt;
  if (!data_bytes) {
    return out_of_range(".npy file '{}': shape ({}) is too large", name, fmt::join(shape, ", "));
  }
  const uint64_t available = size - prefix - header_len;
  if (available != static_cast<uint64_t>(*data_bytes)) {
    return data_loss(
        ".npy file '{}': shape ({}) of '{}' needs {} data bytes, file has {}{}", name,
        fmt::join(shape, ", "), *header.descr, *data_bytes, available,
        available < static_cast<uint64_t>(*data_bytes) ? " (truncated)" : " (trailing bytes)");
  }
  const unsigned char* data = p + prefix + header_len;
  if (dtype == DType::kBool) {
    for (int64_t i = 0; i < *count; ++i) {
      if (data[i] > 1) {
        return invalid_argument(".npy file '{}': bool element {} has byte value {} (not 0 or 1)",
                                name, i, data[i]);
      }
    }
  }
  KILN_ASSIGN_OR_RETURN(Tensor tensor, Tensor::create(dtype, shape));
  if (*data_bytes > 0) std::memcpy(tensor.mutable_data(), data, static_cast<size_t>(*data_bytes));
  return tensor;
}

StatusOr<Tensor> parse_npy(std::string_view bytes, std::string_view name) {
  return parse_npy(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())), name);
}

StatusOr<Tensor> read_npy_file(const std::string& path, uint64_t max_bytes) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(path, max_bytes));
  return parse_npy(std::string_view(bytes), path);
}

StatusOr<std::string> serialize_npy_header(const Tensor& tensor) {
  const std::string_view descr = descr_for(tensor.dtype());
  if (descr.empty()) {
    return unimplemented(
        "cannot write a {} tensor as .npy: numpy has no {} dtype (write raw .bin instead)",
        dtype_name(tensor.dtype()), dtype_name(tensor.dtype()));
  }
  std::string shape;
  for (int64_t d : tensor.shape()) shape += fmt::format("{}, ", d);
  if (tensor.rank() > 1) shape.resize(shape.size() - 2);  // numpy writes (3,) but (2, 3)
  if (tensor.rank() == 1) shape.pop_back();
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, shape);
  const size_t prefix = 10 + dict.size() + 1 > 65535 ? 12 : 10;
  const size_t total = (prefix + dict.size() + 1 + kAlignment - 1) / kAlignment * kAlignment;
  const size_t header_len = total - prefix;
  std::string out(kMagic);
  out.push_back(prefix == 10 ? '\x01' : '\x02');
  out.push_back('\x00');
  for (size_t i = 0; i < prefix - 8; ++i) {
    out.push_back(static_cast<char>((header_len >> (8 * i)) & 0xff));
  }
  out.append(dict);
  out.append(header_len - dict.size() - 1, ' ');
  out.push_back('\n');
  return out;
}

StatusOr<std::string> serialize_npy(const Tensor& tensor) {
  KILN_ASSIGN_OR_RETURN(std::string out, serialize_npy_header(tensor));
  const auto* data = reinterpret_cast<const char*>(tensor.data());
  if (tensor.dtype() == DType::kBool) {
    for (size_t i = 0; i < tensor.byte_size(); ++i) out.push_back(data[i] != 0 ? '\x01' : '\x00');
  } else if (tensor.byte_size() > 0) {
    out.append(data, tensor.byte_size());
  }
  return out;
}

}  // namespace kiln
