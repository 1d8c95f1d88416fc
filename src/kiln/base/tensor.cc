#include "kiln/base/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kiln/base/aligned_memory.h"
#include "kiln/base/checked_math.h"
#include "kiln/base/half.h"
#include "kiln/base/mapped_file.h"

namespace kiln {
namespace {

constexpr size_t kAlignment = 64;

// `bytes` rounded up to the alignment; zero-filled when `zero`, else the caller writes them all.
std::shared_ptr<std::byte> allocate_aligned(size_t bytes, bool zero) {
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  void* raw = allocate_aligned_memory(rounded, kAlignment);
  if (raw == nullptr) return nullptr;
  if (zero) {
    std::memset(raw, 0, rounded);
  } else if (rounded > bytes) {
    std::memset(static_cast<std::byte*>(raw) + bytes, 0, rounded - bytes);  // the padding only
  }
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(raw),
                                    [](std::byte* p) { std::free(p); });
}

}  // namespace

StatusOr<Tensor> Tensor::allocate(DType dtype, ConcreteShape shape, bool zero) {
  auto count = checked_product(shape);
  if (!count) return out_of_range("tensor dims {} overflow or are negative", fmt::join(shape, "x"));
  auto bytes = checked_mul(*count, static_cast<int64_t>(dtype_size(dtype)));
  if (!bytes) return out_of_range("tensor of dims {} is too large", fmt::join(shape, "x"));
  auto storage = allocate_aligned(static_cast<size_t>(*bytes), zero);
  if (storage == nullptr) {
    return out_of_range("cannot allocate {} bytes for a tensor of dims {}", *bytes,
                        fmt::join(shape, "x"));
  }
  Tensor out;
  out.dtype_ = dtype;
  out.shape_ = std::move(shape);
  out.element_count_ = *count;
  out.data_ = storage.get();
  out.storage_ = std::move(storage);
  return out;
}

StatusOr<Tensor> Tensor::create(DType dtype, ConcreteShape shape) {
  return allocate(dtype, std::move(shape), /*zero=*/true);
}

StatusOr<Tensor> Tensor::create_uninitialized(DType dtype, ConcreteShape shape) {
  return allocate(dtype, std::move(shape), /*zero=*/false);
}

Tensor Tensor::borrow(DType dtype, ConcreteShape shape, const std::byte* data,
                      std::shared_ptr<const void> keep_alive) {
  Tensor out;
  out.dtype_ = dtype;
  out.element_count_ = checked_product(shape).value_or(0);
  out.shape_ = std::move(shape);
  out.data_ = data;
  out.storage_ = std::move(keep_alive);
  return out;
}

Tensor Tensor::borrow_mutable(DType dtype, ConcreteShape shape, std::byte* data,
                              std::shared_ptr<const void> keep_alive) {
  return borrow(dtype, std::move(shape), data, std::move(keep_alive));
}

Tensor Tensor::borrow_mapped(DType dtype, ConcreteShape shape, const std::byte* data,
                             std::shared_ptr<const void> keep_alive) {
  Tensor out = borrow(dtype, std::move(shape), data, std::move(keep_alive));
  out.mapped_ = true;
  return out;
}

struct Tensor::FileBytes {
  std::shared_ptr<const MappedFile> file;
  const std::byte* source = nullptr;  // inside file's mapping
  size_t size = 0;
  std::once_flag copied;
  std::shared_ptr<std::byte> copy;  // the bytes, aligned, once data() was asked for them
};

Tensor Tensor::borrow_from_file(DType dtype, ConcreteShape shape,
                                std::shared_ptr<const MappedFile> file, size_t offset) {
  auto bytes = std::make_shared<FileBytes>();
  bytes->source = file->data() + offset;
  bytes->file = std::move(file);
  // In place where aligned; else data_ stays null until data() asks for the aligned copy.
  const bool aligned = reinterpret_cast<uintptr_t>(bytes->source) % kAlignment == 0;
  Tensor out = borrow(dtype, std::move(shape), aligned ? bytes->source : nullptr, nullptr);
  out.mapped_ = aligned;
  bytes->size = out.byte_size();
  out.file_ = std::move(bytes);
  return out;
}

const std::byte* Tensor::file_bytes_copy() const {
  FileBytes& bytes = *file_;
  std::call_once(bytes.copied, [&bytes] {
    bytes.copy = allocate_aligned(bytes.size, /*zero=*/false);
    // data() cannot fail: running out of memory here ends the process, as it does for any
    // allocation without a Status (a std::vector's).
    KILN_CHECK(bytes.copy != nullptr && "out of memory copying a tensor's bytes from its file");
    if (bytes.size > 0) std::memcpy(bytes.copy.get(), bytes.source, bytes.size);
  });
  return bytes.copy.get();
}

std::span<const std::byte> Tensor::bytes() const {
  return {file_ != nullptr ? file_->source : data_, byte_size()};
}

Status Tensor::source_unchanged() const {
  return file_ != nullptr ? file_->file->check_unchanged() : ok_status();
}

void Tensor::release_resident(size_t first, size_t count) const {
  const size_t size = byte_size();
  if ((!mapped_ && file_ == nullptr) || first >= size) return;
  release_mapped_pages(bytes().data() + first, std::min(count, size - first));
}

Tensor Tensor::clone() const {
  auto copy = create_uninitialized(dtype_, shape_);
  KILN_CHECK(copy.ok());
  if (byte_size() > 0) std::memcpy(copy->mutable_data(), bytes().data(), byte_size());
  return std::move(copy).value();
}

Tensor Tensor::reshaped(ConcreteShape shape) const {
  Tensor out = *this;
  KILN_CHECK(checked_product(shape).value_or(-1) == element_count_);
  out.shape_ = std::move(shape);
  return out;
}

double element_as_double(const Tensor& tensor, int64_t index) {
  switch (tensor.dtype()) {
    case DType::kF32: return tensor.values<float>()[index];
    case DType::kF64: return tensor.values<double>()[index];
    case DType::kF16: return half_bits_to_float(tensor.values<uint16_t>()[index]);
    case DType::kBF16: return bfloat16_bits_to_float(tensor.values<uint16_t>()[index]);
    case DType::kI64: return static_cast<double>(tensor.values<int64_t>()[index]);
    case DType::kI32: return tensor.values<int32_t>()[index];
    case DType::kI16: return tensor.values<int16_t>()[index];
    case DType::kI8: return tensor.values<int8_t>()[index];
    case DType::kU64: return static_cast<double>(tensor.values<uint64_t>()[index]);
    case DType::kU32: return tensor.values<uint32_t>()[index];
    case DType::kU16: return tensor.values<uint16_t>()[index];
    case DType::kU8: return tensor.values<uint8_t>()[index];
    case DType::kBool: return tensor.values<uint8_t>()[index] != 0;
  }
  KILN_CHECK(false && "element_as_double: unsupported dtype");
  return 0;
}

int64_t element_as_int64(const Tensor& tensor, int64_t index) {
  switch (tensor.dtype()) {
    case DType::kI64: return tensor.values<int64_t>()[index];
    case DType::kI32: return tensor.values<int32_t>()[index];
    case DType::kI16: return tensor.values<int16_t>()[index];
    case DType::kI8: return tensor.values<int8_t>()[index];
    case DType::kU64: return static_cast<int64_t>(tensor.values<uint64_t>()[index]);
    case DType::kU32: return tensor.values<uint32_t>()[index];
    case DType::kU16: return tensor.values<uint16_t>()[index];
    case DType::kU8: return tensor.values<uint8_t>()[index];
    case DType::kBool: return tensor.values<uint8_t>()[index] != 0;
    case DType::kF32:
    case DType::kF64:
    case DType::kF16:
    case DType::kBF16: break;
  }
  KILN_CHECK(false && "element_as_int64: not an integer dtype");
  return 0;
}

void set_element_from_int64(Tensor& tensor, int64_t index, int64_t value) {
  if (tensor.dtype() == DType::kF32) {
    tensor.mutable_values<float>()[index] = static_cast<float>(value);
    return;
  }
  if (tensor.dtype() == DType::kF64) {
    tensor.mutable_values<double>()[index] = static_cast<double>(value);
    return;
  }
  std::byte* p = tensor.mutable_data() + index * static_cast<int64_t>(dtype_size(tensor.dtype()));
  switch (dtype_size(tensor.dtype())) {
    case 1: *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(value); break;
    case 2: *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(value); break;
    case 4: *reinterpret_cast<uint32_t*>(p) = static_cast<uint32_t>(value); break;
    default: *reinterpret_cast<uint64_t*>(p) = static_cast<uint64_t>(value); break;
  }
  if (tensor.dtype() == DType::kBool) *reinterpret_cast<uint8_t*>(p) = value != 0;
}

}  // namespace kiln
