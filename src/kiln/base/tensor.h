// Tensor: a dense, row-major host tensor (dtype, concrete dims, 64-byte aligned bytes). Copies
// share storage (cheap, like a shared_ptr); call clone() for an independent copy. Used for
// constants, reference evaluation, runtime inputs/outputs and file IO.
//
// A tensor made by borrow_from_file holds a range of a mapped file and reads nothing at creation:
// data() gives the bytes in place where they are 64-byte aligned, else copies them into aligned
// memory the first time it is called (once, whichever copy of the tensor asks, from any thread);
// bytes() reads them in place, so a writer that only streams them out (module::write_module)
// never copies them into memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kiln/base/dtype.h"
#include "kiln/base/status.h"

namespace kiln {

using ConcreteShape = std::vector<int64_t>;

class MappedFile;

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled. Error if the byte size overflows or any dim is negative.
  static StatusOr<Tensor> create(DType dtype, ConcreteShape shape);
  // create() without the zero fill, for a caller that writes every byte at once (a model's
  // weights copied or read in: there the fill would cost as much as the copy).
  static StatusOr<Tensor> create_uninitialized(DType dtype, ConcreteShape shape);
  // Wraps external memory without copying, read only; `keep_alive` owns it (e.g. an mmap'd
  // module) or is null when the caller keeps the memory alive itself.
  static Tensor borrow(DType dtype, ConcreteShape shape, const std::byte* data,
                       std::shared_ptr<const void> keep_alive);
  // borrow() for memory kiln may write: a caller's buffer that a run writes its outputs into
  // (runtime::Session::run_into). The caller keeps the memory alive (or `keep_alive` owns it)
  // and does not read or write it while kiln writes it.
  static Tensor borrow_mutable(DType dtype, ConcreteShape shape, std::byte* data,
                               std::shared_ptr<const void> keep_alive);
  // borrow() for bytes inside a MappedFile (kiln/base/mapped_file.h), which release_resident() may
  // drop from memory.
  static Tensor borrow_mapped(DType dtype, ConcreteShape shape, const std::byte* data,
                              std::shared_ptr<const void> keep_alive);

  // The `shape` tensor in `file`'s bytes from `offset`, read only; see above. The file holds the
  // tensor's byte size from `offset` (checked by the caller). The tensor keeps the file mapped.
  static Tensor borrow_from_file(DType dtype, ConcreteShape shape,
                                 std::shared_ptr<const MappedFile> file, size_t offset);

  // Hint that these bytes will not be read for a while (e.g. weights copied into another
  // layout): a tensor from borrow_mapped() or borrow_from_file() leaves resident memory and is
  // read back from its file when touched; for any other tensor nothing happens. Contents never
  // change. With a range, only the whole pages inside bytes [first, first + count) leave.
  void release_resident() const { release_resident(0, byte_size()); }
  void release_resident(size_t first, size_t count) const;

  DType dtype() const { return dtype_; }
  const ConcreteShape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t element_count() const { return element_count_; }
  size_t byte_size() const { return element_count_ * dtype_size(dtype_); }
  bool empty_storage() const { return data_ == nullptr && file_ == nullptr; }

  // The bytes, 64-byte aligned (a borrow_from_file tensor's may be copied here, see above).
  const std::byte* data() const {
    return data_ != nullptr || file_ == nullptr ? data_ : file_bytes_copy();
  }
  // The bytes as they are stored, at any alignment and never copied: for readers of raw bytes
  // (a file writer, a checksum), not for typed access.
  std::span<const std::byte> bytes() const;
  // OK unless the bytes are a file's (borrow_from_file) and the file changed on disk since it was
  // mapped: then MappedFile::check_unchanged's error, and what was read from it is not to be
  // trusted.
  Status source_unchanged() const;
  // Writable bytes; only valid for tensors made by create(), clone() or borrow_mutable() (and
  // their copies, which share those bytes).
  std::byte* mutable_data() { return const_cast<std::byte*>(data_); }

  template <typename T>
  std::span<const T> values() const {
    return {reinterpret_cast<const T*>(data()), static_cast<size_t>(element_count_)};
  }
  template <typename T>
  std::span<T> mutable_values() {
    return {reinterpret_cast<T*>(mutable_data()), static_cast<size_t>(element_count_)};
  }

  Tensor clone() const;
  // Same storage, new dims with the same element count (checked by the caller).
  Tensor reshaped(ConcreteShape shape) const;

 private:
  struct FileBytes;  // a borrow_from_file tensor's file, its bytes there, and their copy
  static StatusOr<Tensor> allocate(DType dtype, ConcreteShape shape, bool zero);
  const std::byte* file_bytes_copy() const;

  DType dtype_ = DType::kF32;
  ConcreteShape shape_;
  int64_t element_count_ = 0;
  const std::byte* data_ = nullptr;
  std::shared_ptr<const void> storage_;
  bool mapped_ = false;  // data_ lies in a MappedFile
  // Set by borrow_from_file only; data_ then points into the file where it is aligned, else it
  // stays null and data() asks file_bytes_copy().
  std::shared_ptr<FileBytes> file_;
};

// Reads element `index` of a numeric tensor as double (any dtype).
double element_as_double(const Tensor& tensor, int64_t index);
// Reads element `index` of an integer or bool tensor as int64; a u64 value above INT64_MAX wraps
// (two's complement), so callers that need the full u64 range read values<uint64_t>() instead.
int64_t element_as_int64(const Tensor& tensor, int64_t index);
// Writes `value` to element `index` of a tensor made by create(): truncated to the dtype's width
// (two's complement) for an integer or bool tensor, converted (rounded to nearest) for f32/f64.
void set_element_from_int64(Tensor& tensor, int64_t index, int64_t value);

}  // namespace kiln
