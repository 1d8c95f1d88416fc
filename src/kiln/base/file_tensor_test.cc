// Tensor::borrow_from_file: a tensor that holds a range of a mapped file, reads it in place
// (bytes()), gives it aligned on demand (data(), copied once when the range is not aligned), and
// says when the file changed under it (source_unchanged()).
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/base/mapped_file.h"
#include "kiln/base/tensor.h"
#include "tests/support/files.h"

namespace kiln {
namespace {

using ::kiln::testing::TempDir;
using ::kiln::testing::write_plain_file;
using ::testing::HasSubstr;

// `header` bytes of 'x', then `count` floats 0.5, 1.5, 2.5, ... (several pages for big counts).
std::string file_with_floats(size_t header, size_t count) {
  std::string bytes(header, 'x');
  for (size_t i = 0; i < count; ++i) {
    const float v = static_cast<float>(i) + 0.5f;
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  return bytes;
}

std::shared_ptr<const MappedFile> map_file(const std::string& path) {
  auto mapped = MappedFile::open(path);
  EXPECT_TRUE(mapped.ok()) << mapped.status().to_string();
  return std::make_shared<const MappedFile>(std::move(mapped).value());
}

// A file of `header` bytes, then `count` floats (file_with_floats): its mapping, and the tensor
// of the floats in it.
struct FloatsInFile {
  std::shared_ptr<const MappedFile> file;
  Tensor tensor;
};

FloatsInFile floats_in_file(const TempDir& dir, size_t header, size_t count) {
  write_plain_file(dir.file("w.bin"), file_with_floats(header, count));
  auto file = map_file(dir.file("w.bin"));
  Tensor tensor =
      Tensor::borrow_from_file(DType::kF32, {static_cast<int64_t>(count)}, file, header);
  return {std::move(file), std::move(tensor)};
}

void expect_floats(const Tensor& t, size_t count) {
  ASSERT_EQ(t.element_count(), static_cast<int64_t>(count));
  auto values = t.values<float>();
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(values[i], static_cast<float>(i) + 0.5f) << "element " << i;
  }
}

bool inside(const std::byte* p, const MappedFile& file) {
  return p >= file.data() && p < file.data() + file.size();
}

TEST(FileTensor, AnAlignedRangeIsReadInPlace) {
  TempDir dir;
  auto [file, t] = floats_in_file(dir, 64, 6);
  EXPECT_FALSE(t.empty_storage());
  EXPECT_EQ(t.data(), file->data() + 64);
  EXPECT_EQ(t.bytes().data(), file->data() + 64);
  EXPECT_EQ(t.bytes().size(), 24u);
  expect_floats(t, 6);
  EXPECT_TRUE(t.source_unchanged().ok());
}

TEST(FileTensor, AnUnalignedRangeIsCopiedOnceWhenAskedForAligned) {
  TempDir dir;
  const size_t count = 3000;  // a few pages
  auto [file, t] = floats_in_file(dir, 3, count);
  EXPECT_FALSE(t.empty_storage());
  // In place until data() is asked for: bytes() reads the file's own bytes.
  EXPECT_EQ(t.bytes().data(), file->data() + 3);
  const std::byte* aligned = t.data();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(aligned) % 64, 0u);
  EXPECT_FALSE(inside(aligned, *file));
  expect_floats(t, count);
  // Once: every copy of the tensor, and a reshaped view, share that copy.
  Tensor copy = t;
  EXPECT_EQ(copy.data(), aligned);
  EXPECT_EQ(t.reshaped({60, 50}).data(), aligned);
  EXPECT_EQ(t.data(), aligned);
  // clone() is an independent aligned copy with the same values.
  Tensor cloned = t.clone();
  EXPECT_NE(cloned.data(), aligned);
  expect_floats(cloned, count);
}

TEST(FileTensor, ThreadsAskingAtOnceGetOneCopy) {
  TempDir dir;
  const Tensor t = floats_in_file(dir, 5, 1000).tensor;
  std::vector<const std::byte*> seen(4, nullptr);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&seen, i, copy = t] { seen[i] = copy.data(); });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::byte* p : seen) EXPECT_EQ(p, seen[0]);
  expect_floats(t, 1000);
}

TEST(FileTensor, KeepsItsFileMapped) {
  TempDir dir;
  const Tensor t = floats_in_file(dir, 7, 10).tensor;  // the only holder of the mapping
  std::filesystem::remove(dir.file("w.bin"));
  expect_floats(t, 10);
}

TEST(FileTensor, ReleasedPagesReadBackAndOtherTensorsKeepTheirBytes) {
  TempDir dir;
  const size_t count = 5000;  // spans whole pages
  const Tensor in_place = floats_in_file(dir, 64, count).tensor;
  in_place.release_resident();
  in_place.release_resident(4096, 8192);
  in_place.release_resident(3 * count, 1 << 20);  // a range running past the end
  expect_floats(in_place, count);
  // A tensor in ordinary memory keeps its bytes: releasing them would zero them.
  Tensor heap = in_place.clone();
  heap.release_resident();
  heap.release_resident(0, 8192);
  expect_floats(heap, count);
}

TEST(FileTensor, SourceUnchangedReportsAFileRewrittenInPlace) {
  TempDir dir;
  const std::string bytes = file_with_floats(3, 100);
  write_plain_file(dir.file("w.bin"), bytes);
  auto file = map_file(dir.file("w.bin"));
  Tensor t = Tensor::borrow_from_file(DType::kF32, {100}, file, 3);
  ASSERT_TRUE(t.source_unchanged().ok());
  // File systems stamp changes at a clock tick of a few milliseconds.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::string other = bytes;
  other[40] ^= 0x55;
  write_plain_file(dir.file("w.bin"), other);
  Status changed = t.source_unchanged();
  ASSERT_FALSE(changed.ok());
  EXPECT_EQ(changed.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(changed.message(), HasSubstr(dir.file("w.bin")));
  // A tensor of its own bytes has no file to change.
  EXPECT_TRUE(t.clone().source_unchanged().ok());
}

}  // namespace
}  // namespace kiln
