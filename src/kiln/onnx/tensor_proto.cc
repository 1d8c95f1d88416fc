#include "kiln/onnx/tensor_proto.h"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "kiln/base/checked_math.h"
#include "kiln/shape/shape.h"

namespace kiln::onnx_import {
namespace {

namespace fs = std::filesystem;
using onnx::TensorProto;

std::optional<uint64_t> parse_u64(const std::string& text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// True when `path` lies strictly inside `dir`; both must already be canonical.
bool is_inside(const fs::path& dir, const fs::path& path) {
  auto dir_it = dir.begin();
  auto path_it = path.begin();
  for (; dir_it != dir.end(); ++dir_it, ++path_it) {
    // A trailing separator shows up as an empty component; it matches anything.
    if (dir_it->empty()) continue;
    if (path_it == path.end() || *dir_it != *path_it) return false;
  }
  return path_it != path.end();
}

struct ExternalRef {
  std::string location;
  std::optional<uint64_t> offset;
  std::optional<uint64_t> length;
};

StatusOr<ExternalRef> parse_external_ref(const TensorProto& proto, std::string_view what) {
  ExternalRef ref;
  bool has_location = false;
  for (const auto& entry : proto.external_data()) {
    const std::string& key = entry.key();
    if (key == "location") {
      ref.location = entry.value();
      has_location = true;
    } else if (key == "offset" || key == "length") {
      auto value = parse_u64(entry.value());
      if (!value) {
        return invalid_argument("{}: external data {} '{}' is not a non-negative integer", what,
                                key, entry.value());
      }
      (key == "offset" ? ref.offset : ref.length) = *value;
    }
    // "checksum" and unknown keys carry nothing kiln needs.
  }
  if (!has_location || ref.location.empty()) {
    return invalid_argument("{}: external data has no 'location'", what);
  }
  return ref;
}

// Resolves `location` inside `model_dir`, refusing every way out of it.
StatusOr<fs::path> resolve_location(const std::string& model_dir, const std::string& location,
                                    std::string_view what) {
  if (model_dir.empty()) {
    return invalid_argument(
        "{}: external data file '{}' refused: the model was given as bytes without a model "
        "directory",
        what, location);
  }
  if (location.find('\0') != std::string::npos) {
    return invalid_argument("{}: external data location contains a NUL byte", what);
  }
  fs::path relative(location);
  if (relative.is_absolute() || relative.has_root_name() || relative.has_root_directory()) {
    return invalid_argument(
        "{}: external data location '{}' is an absolute path; only paths relative to the model "
        "directory '{}' are allowed",
        what, location, model_dir);
  }
  for (const fs::path& part : relative) {
    if (part == "..") {
      return invalid_argument(
          "{}: external data location '{}' contains '..'; only paths inside the model "
          "directory '{}' are allowed",
          what, location, model_dir);
    }
  }
  std::error_code ec;
  fs::path dir = fs::canonical(model_dir, ec);
  if (ec) {
    return not_found("{}: model directory '{}' for external data '{}': {}", what, model_dir,
                     location, ec.message());
  }
  fs::path resolved = fs::canonical(dir / relative, ec);
  if (ec) {
    return not_found("{}: external data file '{}' (in '{}'): {}", what, location, model_dir,
                     ec.message());
  }
  if (!is_inside(dir, resolved)) {
    return invalid_argument(
        "{}: external data location '{}' resolves to '{}', outside the model directory '{}' "
        "(through a symlink)",
        what, location, resolved.string(), dir.string());
  }
  if (!fs::is_regular_file(resolved, ec)) {
    return invalid_argument("{}: external data location '{}' ('{}') is not a regular file", what,
                            location, resolved.string());
  }
  return resolved;
}

// Checks the file range before allocating, so a tensor whose dims claim terabytes fails fast.
// With `files`, the tensor holds its range of the mapped file instead of a copy.
StatusOr<Tensor> read_external(const TensorProto& proto, const std::string& model_dir,
                               std::string_view what, DType dtype, const ConcreteShape& dims,
                               int64_t bytes, ExternalDataFiles* files) {
  KILN_ASSIGN_OR_RETURN(ExternalRef ref, parse_external_ref(proto, what));
  KILN_ASSIGN_OR_RETURN(fs::path path, resolve_location(model_dir, ref.location, what));
  std::shared_ptr<const MappedFile> mapped;
  if (files != nullptr && bytes > 0) {
    auto mapping = files->map(path.string());
    if (!mapping.ok()) {
      return Status(mapping.status().code(),
                    fmt::format("{}: external data file: {}", what, mapping.status().message()));
    }
    mapped = std::move(mapping).value();  // null: read in, as without `files`
  }
  uint64_t file_size = 0;
  if (mapped != nullptr) {
    file_size = mapped->size();  // what the mapping holds, checked below like a stat's size
  } else {
    std::error_code ec;
    file_size = fs::file_size(path, ec);
    if (ec) {
      return not_found("{}: cannot stat external data file '{}': {}", what, path.string(),
                       ec.message());
    }
  }
  uint64_t offset = ref.offset.value_or(0);
  if (offset > file_size) {
    return out_of_range("{}: external data offset {} is beyond the end of '{}' ({} bytes)", what,
                        offset, path.string(), file_size);
  }
  uint64_t length = ref.length.value_or(file_size - offset);
  if (length > file_size - offset) {
    return out_of_range(
        "{}: external data range at offset {} with length {} is beyond the end "
        "of '{}' ({} bytes)",
        what, offset, length, path.string(), file_size);
  }
  if (length != static_cast<uint64_t>(bytes)) {
    return invalid_argument("{}: external data in '{}' has {} bytes, but dims {} of {} need {}",
                            what, path.string(), length, shape_to_string(dims), dtype_name(dtype),
                            bytes);
  }
  if (mapped != nullptr) {
    return Tensor::borrow_from_file(dtype, dims, std::move(mapped), static_cast<size_t>(offset));
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::create_uninitialized(dtype, dims));
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) return not_found("{}: cannot open external data file '{}'", what, path.string());
  if (offset > static_cast<uint64_t>(std::numeric_limits<off_t>::max()) ||
      fseeko(file.get(), static_cast<off_t>(offset), SEEK_SET) != 0 ||
      std::fread(out.mutable_data(), 1, length, file.get()) != length) {
    return data_loss("{}: cannot read {} bytes at offset {} of '{}'", what, length, offset,
                     path.string());
  }
  return out;
}

template <typename T, typename Field>
Status copy_typed(const Field& field, std::string_view field_name, std::string_view what,
                  Tensor& out) {
  if (static_cast<int64_t>(field.size()) != out.element_count()) {
    return invalid_argument("{}: {} has {} values, but dims {} need {}", what, field_name,
                            field.size(), shape_to_string(out.shape()), out.element_count());
  }
  auto dst = out.mutable_values<T>();
  for (int64_t i = 0; i < out.element_count(); ++i) {
    auto value = field.Get(static_cast<int>(i));
    if constexpr (std::is_integral_v<T>) {
      if (!std::in_range<T>(value)) {
        return invalid_argument("{}: {}[{}] = {} does not fit in {}", what, field_name, i, value,
                                dtype_name(out.dtype()));
      }
    }
    dst[i] = static_cast<T>(value);
  }
  return ok_status();
}

}  // namespace

std::string onnx_type_name(int32_t elem_type) {
  if (TensorProto::DataType_IsValid(elem_type)) {
    return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(elem_type));
  }
  return fmt::format("type {}", elem_type);
}

StatusOr<DType> dtype_from_onnx(int32_t elem_type, std::string_view what) {
  switch (elem_type) {
    case TensorProto::FLOAT: return DType::kF32;
    case TensorProto::DOUBLE: return DType::kF64;
    case TensorProto::FLOAT16: return DType::kF16;
    case TensorProto::BFLOAT16: return DType::kBF16;
    case TensorProto::INT64: return DType::kI64;
    case TensorProto::INT32: return DType::kI32;
    case TensorProto::INT16: return DType::kI16;
    case TensorProto::INT8: return DType::kI8;
    case TensorProto::UINT64: return DType::kU64;
    case TensorProto::UINT32: return DType::kU32;
    case TensorProto::UINT16: return DType::kU16;
    case TensorProto::UINT8: return DType::kU8;
    case TensorProto::BOOL: return DType::kBool;
    default: break;
  }
  return unimplemented(
      "{} has element type {}, which kiln does not support (supported: FLOAT, "
      "DOUBLE, FLOAT16, BFLOAT16, INT64, INT32, INT16, INT8, UINT64, UINT32, "
      "UINT16, UINT8, BOOL)",
      what, onnx_type_name(elem_type));
}

TensorProto::DataType onnx_type_of(DType dtype) {
  switch (dtype) {
    case DType::kF32: return TensorProto::FLOAT;
    case DType::kF64: return TensorProto::DOUBLE;
    case DType::kF16: return TensorProto::FLOAT16;
    case DType::kBF16: return TensorProto::BFLOAT16;
    case DType::kI64: return TensorProto::INT64;
    case DType::kI32: return TensorProto::INT32;
    case DType::kI16: return TensorProto::INT16;
    case DType::kI8: return TensorProto::INT8;
    case DType::kU64: return TensorProto::UINT64;
    case DType::kU32: return TensorProto::UINT32;
    case DType::kU16: return TensorProto::UINT16;
    case DType::kU8: return TensorProto::UINT8;
    case DType::kBool: return TensorProto::BOOL;
  }
  return TensorProto::UNDEFINED;
}

StatusOr<std::shared_ptr<const MappedFile>> ExternalDataFiles::map(const std::string& path) {
  auto known = files_.find(path);
  if (known != files_.end()) return known->second;
  if (files_.size() >= kMaxFiles) return std::shared_ptr<const MappedFile>();
  KILN_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  auto shared = std::make_shared<const MappedFile>(std::move(file));
  files_.emplace(path, shared);
  return shared;
}

StatusOr<Tensor> tensor_from_proto(const TensorProto& proto, const std::string& model_dir,
                                   std::string_view what, ExternalDataFiles* files) {
  KILN_ASSIGN_OR_RETURN(DType dtype, dtype_from_onnx(proto.data_type(), what));
  if (proto.has_segment())
    return unimplemented("{} is segmented, which kiln does not support", what);
  ConcreteShape dims(proto.dims().begin(), proto.dims().end());
  for (int64_t d : dims) {
    if (d < 0) return invalid_argument("{} has a negative dim in {}", what, shape_to_string(dims));
  }
  auto count = checked_product(dims);
  auto bytes = count ? checked_mul(*count, static_cast<int64_t>(dtype_size(dtype))) : std::nullopt;
  if (!bytes) return out_of_range("{}: dims {} overflow", what, shape_to_string(dims));

  if (proto.data_location() == TensorProto::EXTERNAL) {
    return read_external(proto, model_dir, what, dtype, dims, *bytes, files);
  }
  if (proto.has_raw_data()) {
    if (static_cast<int64_t>(proto.raw_data().size()) != *bytes) {
      return invalid_argument("{}: raw_data has {} bytes, but dims {} of {} need {}", what,
                              proto.raw_data().size(), shape_to_string(dims), dtype_name(dtype),
                              *bytes);
    }
    KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::create_uninitialized(dtype, dims));
    // ONNX raw_data is little-endian, as is every host kiln targets.
    if (*bytes > 0) std::memcpy(out.mutable_data(), proto.raw_data().data(), *bytes);
    return out;
  }
  // Per onnx.proto: u32/u64 live in uint64_data; f16/bf16 (as their uint16 bit patterns),
  // i32, i16, i8, u16, u8 and bool in int32_data.
  int64_t stored = dtype == DType::kF32                           ? proto.float_data_size()
                   : dtype == DType::kF64                         ? proto.double_data_size()
                   : dtype == DType::kI64                         ? proto.int64_data_size()
                   : dtype == DType::kU64 || dtype == DType::kU32 ? proto.uint64_data_size()
                                                                  : proto.int32_data_size();
  if (stored != *count) {
    return invalid_argument("{}: has {} stored values, but dims {} need {}", what, stored,
                            shape_to_string(dims), *count);
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::create(dtype, dims));
  Status copied;
  switch (dtype) {
    case DType::kF32:
      copied = copy_typed<float>(proto.float_data(), "float_data", what, out);
      break;
    case DType::kF64:
      copied = copy_typed<double>(proto.double_data(), "double_data", what, out);
      break;
    case DType::kI64:
      copied = copy_typed<int64_t>(proto.int64_data(), "int64_data", what, out);
      break;
    case DType::kI32:
      copied = copy_typed<int32_t>(proto.int32_data(), "int32_data", what, out);
      break;
    case DType::kI16:
      copied = copy_typed<int16_t>(proto.int32_data(), "int32_data", what, out);
      break;
    case DType::kI8:
      copied = copy_typed<int8_t>(proto.int32_data(), "int32_data", what, out);
      break;
    case DType::kU64:
      copied = copy_typed<uint64_t>(proto.uint64_data(), "uint64_data", what, out);
      break;
    case DType::kU32:
      copied = copy_typed<uint32_t>(proto.uint64_data(), "uint64_data", what, out);
      break;
    case DType::kF16:
    case DType::kBF16:
    case DType::kU16:
      copied = copy_typed<uint16_t>(proto.int32_data(), "int32_data", what, out);
      break;
    case DType::kU8:
    case DType::kBool:
      copied = copy_typed<uint8_t>(proto.int32_data(), "int32_data", what, out);
      break;
  }
  KILN_RETURN_IF_ERROR(copied);
  return out;
}

}  // namespace kiln::onnx_import
