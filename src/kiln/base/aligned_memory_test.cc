#include "kiln/base/aligned_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kiln/base/tensor.h"

namespace kiln {
namespace {

bool aligned_to(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

TEST(AlignedMemory, SmallBlocksTakeTheAskedAlignmentBigOnesAHugePage) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, size_t{4096}}) {
    void* p = allocate_aligned_memory(bytes, 64);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_TRUE(aligned_to(p, 64)) << bytes;
    std::memset(p, 0xab, bytes);
    std::free(p);
  }
  void* segment = allocate_aligned_memory(100, 4096);
  ASSERT_NE(segment, nullptr);
  EXPECT_TRUE(aligned_to(segment, 4096));
  std::free(segment);
  for (size_t bytes : {kHugePageThreshold, kHugePageThreshold + 12345}) {
    auto* p = static_cast<unsigned char*>(allocate_aligned_memory(bytes));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned_to(p, size_t{2} << 20));
    std::memset(p, 0x5a, bytes);  // every byte is there and writable
    EXPECT_EQ(p[bytes - 1], 0x5a);
    std::free(p);
  }
}

TEST(AlignedMemory, ImpossibleSizesGiveNull) {
  EXPECT_EQ(allocate_aligned_memory(SIZE_MAX - 10), nullptr);
}

TEST(AlignedMemory, TensorsZeroFillUnlessAskedNotTo) {
  // A big block reused from a freed, written one must still read as zeros through create().
  for (int round = 0; round < 2; ++round) {
    auto t = Tensor::create(DType::kF32, {int64_t{3} << 20});
    ASSERT_TRUE(t.ok());
    for (float v : t->values<float>()) ASSERT_EQ(v, 0.0f);
    std::memset(t->mutable_data(), 0xff, t->byte_size());
  }
  auto u = Tensor::create_uninitialized(DType::kF32, {5, 7});
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->byte_size(), 140u);
  EXPECT_TRUE(aligned_to(u->data(), 64));
  EXPECT_FALSE(Tensor::create_uninitialized(DType::kF32, {-1}).ok());
  auto copy = Tensor::create(DType::kI32, {4}).value();
  copy.mutable_values<int32_t>()[2] = 7;
  Tensor cloned = copy.clone();
  EXPECT_NE(cloned.data(), copy.data());
  EXPECT_EQ(cloned.values<int32_t>()[2], 7);
}

}  // namespace
}  // namespace kiln
