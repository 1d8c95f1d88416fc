#include "kiln/tooling/tensor_io.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/base/checked_math.h"
#include "kiln/base/file_util.h"
#include "kiln/base/half.h"
#include "kiln/tooling/comparator.h"
#include "kiln/tooling/npy.h"
#include "kiln/tooling/tensor_file_codec.h"
#include "kiln/tooling/tensor_spec.h"

namespace kiln {
namespace {

static_assert(std::endian::native == std::endian::little, "raw tensor files are little-endian");

bool ends_with_ignoring_case(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(suffix.begin(), suffix.end(), s.end() - suffix.size(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) ==
           std::tolower(static_cast<unsigned char>(b));
  });
}

// A default-constructed or hand-made tensor may claim elements it has no bytes for.
Status check_writable(const Tensor& tensor) {
  if (checked_product(tensor.shape()).value_or(-1) != tensor.element_count() ||
      (tensor.byte_size() > 0 && tensor.data() == nullptr)) {
    return invalid_argument("cannot write tensor {}: it has no valid storage",
                            format_tensor_type(tensor.dtype(), tensor.shape()));
  }
  return ok_status();
}

std::string_view bytes_of(const Tensor& tensor) {
  return {reinterpret_cast<const char*>(tensor.data()), tensor.byte_size()};
}

}  // namespace

StatusOr<TensorFileFormat> tensor_file_format(std::string_view path) {
  if (ends_with_ignoring_case(path, ".npy")) return TensorFileFormat::kNpy;
  if (ends_with_ignoring_case(path, ".bin")) return TensorFileFormat::kRaw;
  if (find_tensor_file_codec(path) != nullptr) return TensorFileFormat::kCodec;
  return invalid_argument(
      "cannot tell the tensor file format of '{}': its extension must be .bin (raw little-endian) "
      "or .npy",
      path);
}

StatusOr<Tensor> read_raw_tensor_file(const std::string& path, DType dtype,
                                      const ConcreteShape& shape) {
  const std::string type = format_tensor_type(dtype, shape);
  auto count = checked_product(shape);
  auto expected =
      count ? checked_mul(*count, static_cast<int64_t>(dtype_size(dtype))) : std::nullopt;
  if (!expected || static_cast<uint64_t>(*expected) > kMaxTensorFileBytes) {
    return out_of_range("tensor {} for file '{}' is too large (limit {} bytes)", type, path,
                        kMaxTensorFileBytes);
  }
  auto bytes = read_file(path, static_cast<uint64_t>(*expected));
  if (!bytes.ok()) {
    if (bytes.status().code() != StatusCode::kOutOfRange) return std::move(bytes).status();
    // read_file stopped at the expected size; the actual size is only known for regular files.
    std::error_code ec;
    const uintmax_t actual = std::filesystem::file_size(path, ec);
    std::string actual_text =
        ec ? fmt::format("more than {} bytes", *expected) : fmt::format("{} bytes", actual);
    return data_loss("raw tensor file '{}' holds {}, but {} needs exactly {} bytes", path,
                     actual_text, type, *expected);
  }
  if (bytes->size() != static_cast<size_t>(*expected)) {
    return data_loss("raw tensor file '{}' holds {} bytes, but {} needs exactly {} bytes", path,
                     bytes->size(), type, *expected);
  }
  if (dtype == DType::kBool) {
    for (size_t i = 0; i < bytes->size(); ++i) {
      const auto byte = static_cast<unsigned char>((*bytes)[i]);
      if (byte > 1) {
        return invalid_argument(
            "raw tensor file '{}': bool element {} has byte value {} (not 0 or 1)", path, i, byte);
      }
    }
  }
  KILN_ASSIGN_OR_RETURN(Tensor tensor, Tensor::create(dtype, shape));
  if (!bytes->empty()) std::memcpy(tensor.mutable_data(), bytes->data(), bytes->size());
  return tensor;
}

Status write_tensor_file(const std::string& path, const Tensor& tensor) {
  KILN_ASSIGN_OR_RETURN(TensorFileFormat format, tensor_file_format(path));
  return write_tensor_file(path, tensor, format);
}

Status write_tensor_file(const std::string& path, const Tensor& tensor, TensorFileFormat format) {
  KILN_RETURN_IF_ERROR(check_writable(tensor));
  if (format == TensorFileFormat::kRaw) return write_file_atomically(path, bytes_of(tensor));
  if (format == TensorFileFormat::kCodec) {
    const TensorFileCodec* codec = find_tensor_file_codec(path);
    if (codec == nullptr || !codec->write) {
      return invalid_argument(
          "cannot write '{}': no tensor file writer is registered for its "
          "extension",
          path);
    }
    return codec->write(path, tensor);
  }

  KILN_ASSIGN_OR_RETURN(std::string header, serialize_npy_header(tensor));
  KILN_ASSIGN_OR_RETURN(AtomicFileWriter out, AtomicFileWriter::open(path));
  KILN_RETURN_IF_ERROR(out.append(header));
  if (tensor.dtype() == DType::kBool) {
    std::string normalized(bytes_of(tensor));
    for (char& c : normalized) c = c != 0 ? 1 : 0;
    KILN_RETURN_IF_ERROR(out.append(normalized));
  } else {
    KILN_RETURN_IF_ERROR(out.append(bytes_of(tensor)));
  }
  return out.commit();
}

std::string format_element(const Tensor& tensor, int64_t index) {
  switch (tensor.dtype()) {
    case DType::kF32: return fmt::format("{}", tensor.values<float>()[index]);
    case DType::kF64: return fmt::format("{}", tensor.values<double>()[index]);
    case DType::kF16:
      return fmt::format("{}", half_bits_to_float(tensor.values<uint16_t>()[index]));
    case DType::kBF16:
      return fmt::format("{}", bfloat16_bits_to_float(tensor.values<uint16_t>()[index]));
    case DType::kU64: return fmt::format("{}", tensor.values<uint64_t>()[index]);
    case DType::kBool: return tensor.values<uint8_t>()[index] != 0 ? "1" : "0";
    default: return fmt::format("{}", element_as_int64(tensor, index));
  }
}

std::string format_tensor(const Tensor& tensor, int line_width) {
  std::string out = format_tensor_type(tensor.dtype(), tensor.shape());
  out += '\n';
  if (tensor.element_count() == 0) return out;
  if (tensor.rank() == 0) return out + format_element(tensor, 0) + '\n';

  const int64_t row = tensor.shape().back();
  const auto width = static_cast<size_t>(std::max(line_width, 1));
  std::string line;
  for (int64_t i = 0; i < tensor.element_count(); ++i) {
    std::string value = format_element(tensor, i);
    const bool row_start = i % row == 0;
    if (!row_start && line.size() + 1 + value.size() > width) {
      out += line;
      out += '\n';
      line.clear();
    }
    if (row_start && !line.empty()) {
      out += line;
      out += '\n';
      line.clear();
    }
    if (line.empty()) line = format_index(i, tensor.shape()) + ":";
    line += ' ';
    line += value;
  }
  out += line;
  out += '\n';
  return out;
}

namespace {

// The rows of a summarized tensor: leading dims longer than 2 * edge show their first and last
// `edge` indices with a "..." line between; rows longer than that show their ends around "...".
void summarize_rows(const Tensor& tensor, int64_t edge, size_t dim, int64_t offset,
                    std::string& out) {
  const ConcreteShape& shape = tensor.shape();
  int64_t stride = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d) stride *= shape[d];
  if (dim + 1 == shape.size()) {
    out += format_index(offset, shape) + ":";
    for (int64_t i = 0; i < shape[dim]; ++i) {
      if (shape[dim] > 2 * edge && i == edge) {
        out += " ...";
        i = shape[dim] - edge;
      }
      out += ' ';
      out += format_element(tensor, offset + i);
    }
    out += '\n';
    return;
  }
  for (int64_t i = 0; i < shape[dim]; ++i) {
    if (shape[dim] > 2 * edge && i == edge) {
      out += "...\n";
      i = shape[dim] - edge;
    }
    summarize_rows(tensor, edge, dim + 1, offset + i * stride, out);
  }
}

}  // namespace

std::string format_tensor_summary(const Tensor& tensor, int64_t edge_items) {
  if (tensor.element_count() <= kSummarizeOver || tensor.rank() == 0) return format_tensor(tensor);
  std::string out = format_tensor_type(tensor.dtype(), tensor.shape());
  out += '\n';
  summarize_rows(tensor, std::max<int64_t>(edge_items, 1), 0, 0, out);
  out += fmt::format(
      "({} values; the first and last {} along each dim shown, --print-all shows all)\n",
      tensor.element_count(), std::max<int64_t>(edge_items, 1));
  return out;
}

}  // namespace kiln
