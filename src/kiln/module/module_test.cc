#include "kiln/module/module.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/base/file_util.h"
#include "kiln/base/mapped_file.h"
#include "kiln/module/module_header.h"
#include "tests/support/module/module_test_util.h"

namespace kiln::module {
namespace {

using test_util::expect_same_contents;
using test_util::sample_contents;
using test_util::ScratchDir;
using ::testing::HasSubstr;

std::string sample_bytes(ScratchDir& dir) {
  std::string path = dir.file("sample.kmod");
  Status s = write_module(sample_contents(), path);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return read_file(path, 1 << 20).value();
}

// The [start, end) address range of the mapping of `path` in this process, from /proc/self/maps.
std::pair<uintptr_t, uintptr_t> mapping_of(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.size() < path.size() ||
        line.compare(line.size() - path.size(), path.size(), path) != 0) {
      continue;
    }
    uintptr_t start = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &start, &end) == 2) return {start, end};
  }
  return {0, 0};
}

TEST(Module, RoundTripPreservesEveryField) {
  ScratchDir dir;
  ModuleContents original = sample_contents();
  ASSERT_TRUE(verify_contents(original).ok()) << verify_contents(original).to_string();
  std::string path = dir.file("m.kmod");
  Status written = write_module(original, path);
  ASSERT_TRUE(written.ok()) << written.to_string();
  EXPECT_THAT(dir.files(), ::testing::ElementsAre("m.kmod"));

  auto loaded = load_module(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_same_contents(original, **loaded);
}

TEST(Module, SerializedBytesEqualTheWrittenFileAndLoadBack) {
  ScratchDir dir;
  const std::string file_bytes = sample_bytes(dir);
  auto bytes = serialize_module(sample_contents());
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  ASSERT_EQ(bytes->size(), file_bytes.size());
  EXPECT_EQ(std::memcmp(bytes->data(), file_bytes.data(), file_bytes.size()), 0);
  auto loaded = load_module_from_bytes(bytes->data(), bytes->size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_same_contents(sample_contents(), **loaded);
}

TEST(Module, SerializingInvalidContentsFailsNamingTheModule) {
  ModuleContents broken = sample_contents();
  broken.outputs.push_back(9999);
  auto bytes = serialize_module(broken);
  ASSERT_FALSE(bytes.ok());
  EXPECT_THAT(bytes.status().message(), HasSubstr("cannot write module:"));
}

TEST(Module, FileLayoutMatchesTheHeaderContract) {
  ScratchDir dir;
  std::string bytes = sample_bytes(dir);
  ASSERT_GE(bytes.size(), kHeaderSize);
  EXPECT_EQ(bytes.substr(0, 8), std::string("KILNMOD\0", 8));
  EXPECT_EQ(bytes.size() % 64, 0u);
  auto header = decode_header(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size());
  ASSERT_TRUE(header.ok()) << header.status().to_string();
  EXPECT_EQ(header->version, kFormatVersion);
  EXPECT_EQ(header->metadata_offset, 64u);
  EXPECT_EQ(header->constants_offset % 64, 0u);
  EXPECT_EQ(header->constants_offset + header->constants_size, bytes.size());
  EXPECT_EQ(header->checksum,
            file_checksum(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()));
  EXPECT_EQ(bytes.substr(56, 8), std::string(8, '\0'));
}

TEST(Module, ConstantsAreBorrowedAlignedAndInsideTheMapping) {
  ScratchDir dir;
  std::string path = dir.file("m.kmod");
  ASSERT_TRUE(write_module(sample_contents(), path).ok());
  auto loaded = load_module(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  auto [start, end] = mapping_of(path);
  ASSERT_NE(start, 0u) << "no mapping of " << path << " in /proc/self/maps";
  int constants = 0;
  for (const ModuleValue& value : (*loaded)->values) {
    if (value.kind != ValueKind::kConstant) continue;
    ++constants;
    auto address = reinterpret_cast<uintptr_t>(value.constant.data());
    EXPECT_EQ(address % 64, 0u) << value.name;
    EXPECT_GE(address, start) << value.name;
    EXPECT_LE(address + value.constant.byte_size(), end) << value.name;
  }
  EXPECT_EQ(constants, 5);
}

TEST(Module, ConstantsKeepTheMappingAlive) {
  ScratchDir dir;
  std::string path = dir.file("m.kmod");
  ASSERT_TRUE(write_module(sample_contents(), path).ok());
  Tensor weights;
  {
    auto loaded = load_module(path);
    ASSERT_TRUE(loaded.ok());
    weights = (*loaded)->values[1].constant;
  }
  ASSERT_NE(mapping_of(path).first, 0u);
  ASSERT_EQ(weights.element_count(), 6);
  EXPECT_EQ(weights.values<float>()[5], 6.0f);
  weights = Tensor();
  EXPECT_EQ(mapping_of(path).first, 0u) << "the mapping outlived every user";
}

TEST(Module, SymbolicDimsSurvive) {
  ScratchDir dir;
  std::string path = dir.file("m.kmod");
  ASSERT_TRUE(write_module(sample_contents(), path).ok());
  auto loaded = load_module(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const Shape& odd = (*loaded)->values[8].shape;
  ASSERT_EQ(odd.size(), 3u);
  EXPECT_EQ(odd[0], (DimExpr::symbol("N") + 1).floor_div(2));
  EXPECT_EQ(odd[1], 2 * DimExpr::symbol("N") + 3);
  EXPECT_EQ(odd[2], DimExpr::symbol("seq len") * DimExpr::symbol("N"));
  auto value = odd[0].evaluate({{"N", 7}});
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 4);
  EXPECT_EQ((*loaded)->values[6].shape[0], DimExpr::symbol("seq len"));
}

TEST(Module, AssumptionsRoundTripAndBadKindsAreRefused) {
  ScratchDir dir;
  ModuleContents original = sample_contents();
  const DimExpr n = DimExpr::symbol("N");
  const DimExpr seq = DimExpr::symbol("seq len");
  original.assumptions = {
      Assumption{Assumption::Kind::kEqual, n.floor_div(2) * 2, n, "node 'add' (Add)"},
      Assumption{Assumption::Kind::kDivisible, seq, DimExpr(4), "node 's2d' (SpaceToDepth)"},
      Assumption{Assumption::Kind::kNonNegative, DimExpr::max(seq - 3, n) - 2, DimExpr(0), ""}};
  std::string path = dir.file("m.kmod");
  ASSERT_TRUE(write_module(original, path).ok());
  auto loaded = load_module(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  ASSERT_EQ((*loaded)->assumptions.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*loaded)->assumptions[i], original.assumptions[i]);
    EXPECT_EQ((*loaded)->assumptions[i].origin, original.assumptions[i].origin);
  }
  EXPECT_EQ((*loaded)->assumptions[1].to_string(), "\"seq len\" % 4 == 0");
  Status broken = (*loaded)->assumptions[0].check({{"N", 5}});
  EXPECT_THAT(broken.message(), HasSubstr("'2*floor(N/2) == N' made for node 'add' (Add)"));
  EXPECT_THAT(broken.message(), HasSubstr("N = 5"));

  original.assumptions[0].kind = static_cast<Assumption::Kind>(7);
  ASSERT_TRUE(write_module(original, path).ok());
  auto refused = load_module(path);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("assumption 0: invalid kind code 7"));
}

TEST(Module, LoadFromBytesMatchesLoadFromFile) {
  ScratchDir dir;
  std::string bytes = sample_bytes(dir);
  auto loaded = load_module_from_bytes(bytes.data(), bytes.size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_same_contents(sample_contents(), **loaded);
  for (const ModuleValue& value : (*loaded)->values) {
    if (value.kind == ValueKind::kConstant) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(value.constant.data()) % 64, 0u) << value.name;
    }
  }
}

TEST(Module, EmptyModuleRoundTrips) {
  ScratchDir dir;
  ModuleContents empty;
  std::string path = dir.file("empty.kmod");
  ASSERT_TRUE(write_module(empty, path).ok());
  auto loaded = load_module(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_same_contents(empty, **loaded);
}

TEST(Module, EveryByteFlipIsDetected) {
  ScratchDir dir;
  std::string bytes = sample_bytes(dir);
  for (size_t offset = 0; offset < bytes.size(); ++offset) {
    for (unsigned char mask : {0x01, 0x80, 0xff}) {
      std::string damaged = bytes;
      damaged[offset] = static_cast<char>(damaged[offset] ^ mask);
      auto loaded = load_module_from_bytes(damaged.data(), damaged.size());
      EXPECT_FALSE(loaded.ok()) << "flip " << int{mask} << " at byte " << offset << " of "
                                << bytes.size() << " went undetected";
    }
  }
}

TEST(Module, ByteFlipsWithoutChecksumNeverCrash) {
  ScratchDir dir;
  std::string bytes = sample_bytes(dir);
  LoadOptions trust;
  trust.verify_checksum = false;
  int accepted = 0;
  for (size_t offset = 0; offset < bytes.size(); ++offset) {
    for (unsigned char mask : {0x01, 0x80, 0xff}) {
      std::string damaged = bytes;
      damaged[offset] = static_cast<char>(damaged[offset] ^ mask);
      auto loaded = load_module_from_bytes(damaged.data(), damaged.size(), trust);
      if (!loaded.ok()) continue;
      ++accepted;
      // Whatever was accepted passed verify_contents, so it is safe to walk.
      EXPECT_TRUE(verify_contents(**loaded).ok());
      for (const ModuleValue& value : (*loaded)->values) {
        if (value.kind == ValueKind::kConstant && value.constant.byte_size() > 0) {
          volatile std::byte last = value.constant.data()[value.constant.byte_size() - 1];
          (void)last;
        }
      }
      // Only the checksum field of the header may change unnoticed.
      if (offset < kHeaderSize) {
        EXPECT_TRUE(offset >= 48 && offset < 56) << "header byte " << offset << " flip accepted";
      }
    }
  }
  EXPECT_GT(accepted, 0);  // e.g. flips inside padding and constant data
}

TEST(Module, RandomDamageWithoutChecksumNeverCrashes) {
  ScratchDir dir;
  std::string bytes = sample_bytes(dir);
  auto header = decode_header(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size());
  ASSERT_TRUE(header.ok());
  size_t metadata_end = kHeaderSize + header->metadata_size;
  LoadOptions trust;
  trust.verify_checksum = false;
  std::mt19937 random(12345);
  for (int round = 0; round < 20000; ++round) {
    std::string damaged = bytes;
    int changes = 1 + static_cast<int>(random() % 8);
    for (int i = 0; i < changes; ++i) {
      size_t at = kHeaderSize + random() % (metadata_end - kHeaderSize);
      damaged[at] = static_cast<char>(random() % 4 == 0 ? 0xff : random() & 0xff);
    }
    auto loaded = load_module_from_bytes(damaged.data(), damaged.size(), trust);
    if (loaded.ok()) {
      EXPECT_TRUE(verify_contents(**loaded).ok());
    }
  }
}

TEST(Module, EveryTruncationIsDetected) {
  ScratchDir dir;
  std::string bytes = sample_bytes(dir);
  LoadOptions trust;
  trust.verify_checksum = false;
  for (size_t length = 0; length < bytes.size(); ++length) {
    EXPECT_FALSE(load_module_from_bytes(bytes.data(), length).ok()) << "length " << length;
    auto trusted = load_module_from_bytes(bytes.data(), length, trust);
    EXPECT_FALSE(trusted.ok()) << "length " << length << " without checksum";
    if (length >= 12 && !trusted.ok()) {
      EXPECT_EQ(trusted.status().code(), StatusCode::kDataLoss) << trusted.status().to_string();
    }
  }
  std::string longer = bytes + std::string(64, '\0');
  EXPECT_FALSE(load_module_from_bytes(longer.data(), longer.size(), trust).ok());
}

TEST(Module, ChecksumMismatchIsDataLoss) {
  ScratchDir dir;
  std::string bytes = sample_bytes(dir);
  bytes[bytes.size() - 1] ^= 0x10;  // constant padding: only the checksum can notice
  auto loaded = load_module_from_bytes(bytes.data(), bytes.size());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("module checksum mismatch: the file is damaged"));
  LoadOptions trust;
  trust.verify_checksum = false;
  EXPECT_TRUE(load_module_from_bytes(bytes.data(), bytes.size(), trust).ok());
}

TEST(Module, OtherFormatVersionIsRefused) {
  ScratchDir dir;
  std::string bytes = sample_bytes(dir);
  bytes[8] = 2;  // the version before values had forms
  std::string path = dir.file("v2.kmod");
  ASSERT_TRUE(write_file_atomically(path, bytes).ok());
  auto loaded = load_module(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("module format version 2, this kiln reads version 3; recompile the model"));
  EXPECT_THAT(loaded.status().message(), HasSubstr(path));

  // A future version may have a different layout: the version is judged before anything else.
  std::string future = bytes.substr(0, 12) + "whatever";
  auto refused = load_module_from_bytes(future.data(), future.size());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
}

TEST(Module, GarbageEmptyAndMissingFilesAreRefused) {
  ScratchDir dir;
  std::string garbage_path = dir.file("garbage.kmod");
  ASSERT_TRUE(write_file_atomically(garbage_path, std::string(4096, 'x')).ok());
  auto garbage = load_module(garbage_path);
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(garbage.status().message(), HasSubstr("not a kiln module"));
  EXPECT_THAT(garbage.status().message(), HasSubstr(garbage_path));

  std::string empty_path = dir.file("empty.kmod");
  ASSERT_TRUE(write_file_atomically(empty_path, "").ok());
  auto empty = load_module(empty_path);
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("not a kiln module"));
  EXPECT_THAT(empty.status().message(), HasSubstr(empty_path));

  auto missing = load_module(dir.file("missing.kmod"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(dir.file("missing.kmod")));

  auto directory = load_module(dir.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_THAT(directory.status().message(), HasSubstr(dir.path()));

  EXPECT_FALSE(load_module_from_bytes(nullptr, 0).ok());
  std::string magic_only("KILNMOD\0", 8);
  EXPECT_FALSE(load_module_from_bytes(magic_only.data(), magic_only.size()).ok());
}

TEST(Module, WriteRefusesBadContentsAndLeavesNothing) {
  ScratchDir dir;
  ModuleContents bad = sample_contents();
  bad.dispatches[1].inputs[0] = 42;
  std::string path = dir.file("bad.kmod");
  Status s = write_module(bad, path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(path));
  EXPECT_THAT(s.message(), HasSubstr("dispatch 1 'd1_reshape' (Reshape)"));
  EXPECT_THAT(s.message(), HasSubstr("value 42"));
  EXPECT_TRUE(dir.files().empty());
}

TEST(Module, FailedWriteKeepsThePreviousModule) {
  ScratchDir dir;
  std::string path = dir.file("m.kmod");
  ASSERT_TRUE(write_module(sample_contents(), path).ok());
  ModuleContents bad = sample_contents();
  bad.values[1].constant = test_util::make_f32({5}, 0);  // shape disagrees with the value
  Status s = write_module(bad, path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("value 1 'conv0_w'"));
  EXPECT_THAT(dir.files(), ::testing::ElementsAre("m.kmod"));
  EXPECT_TRUE(load_module(path).ok());

  Status no_dir = write_module(sample_contents(), dir.file("missing/m.kmod"));
  ASSERT_FALSE(no_dir.ok());
  EXPECT_THAT(no_dir.message(), HasSubstr(dir.file("missing/m.kmod")));
}

// A constant still in its model's file (Tensor::borrow_from_file, at an unaligned offset) is
// written as the same bytes as a copy in memory; a file rewritten before the module is committed
// fails the write and leaves no module.
TEST(Module, ConstantsStillInTheirFileAreStreamedAndChecked) {
  ScratchDir dir;
  const ModuleContents in_memory = sample_contents();
  const Tensor& weights = in_memory.values[1].constant;
  ASSERT_GT(weights.byte_size(), 0u);
  std::string source(5, 'x');
  source.append(reinterpret_cast<const char*>(weights.data()), weights.byte_size());
  {
    std::ofstream out(dir.file("weights.bin"), std::ios::binary);
    out.write(source.data(), static_cast<std::streamsize>(source.size()));
  }
  auto mapped = MappedFile::open(dir.file("weights.bin"));
  ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
  ModuleContents in_file = sample_contents();
  in_file.values[1].constant = Tensor::borrow_from_file(
      weights.dtype(), weights.shape(), std::make_shared<const MappedFile>(std::move(*mapped)), 5);

  ASSERT_TRUE(write_module(in_memory, dir.file("a.kmod")).ok());
  Status written = write_module(in_file, dir.file("b.kmod"));
  ASSERT_TRUE(written.ok()) << written.to_string();
  EXPECT_EQ(read_file(dir.file("a.kmod"), 1 << 20).value(),
            read_file(dir.file("b.kmod"), 1 << 20).value());
  auto serialized = serialize_module(in_file);
  ASSERT_TRUE(serialized.ok()) << serialized.status().to_string();
  const std::string a = read_file(dir.file("a.kmod"), 1 << 20).value();
  EXPECT_EQ(std::string(serialized->begin(), serialized->end()), a);

  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the timestamp tick
  source[6] ^= 0x55;
  {
    std::ofstream out(dir.file("weights.bin"), std::ios::binary | std::ios::in | std::ios::out);
    out.write(source.data(), static_cast<std::streamsize>(source.size()));
  }
  Status changed = write_module(in_file, dir.file("c.kmod"));
  ASSERT_FALSE(changed.ok());
  EXPECT_EQ(changed.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(changed.message(), HasSubstr("a constant's file changed while it was read"));
  EXPECT_THAT(changed.message(), HasSubstr(dir.file("weights.bin")));
  EXPECT_THAT(dir.files(), ::testing::UnorderedElementsAre("weights.bin", "a.kmod", "b.kmod"));
  EXPECT_FALSE(serialize_module(in_file).ok());
}

TEST(Module, LargeConstantsRoundTrip) {
  ScratchDir dir;
  ModuleContents m;
  m.values.push_back({"a",
                      DType::kF32,
                      {1000, 1001},
                      ValueKind::kConstant,
                      test_util::make_f32({1000, 1001}, 0.25f)});
  m.values.push_back({"b", DType::kF32, {3}, ValueKind::kConstant, test_util::make_f32({3}, 9)});
  m.outputs = {1, 0};
  std::string path = dir.file("large.kmod");
  ASSERT_TRUE(write_module(m, path).ok());
  auto loaded = load_module(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_same_contents(m, **loaded);
}

}  // namespace

TEST(Module, KnownValuesSurvive) {
  ScratchDir dir;
  std::string path = dir.file("m.kmod");
  ModuleContents m = sample_contents();
  ModuleValue known{"dims", DType::kI64, {2}, ValueKind::kIntermediate, {}};
  known.known_values = {DimExpr::symbol("N") * 4, DimExpr(-1)};
  m.values.push_back(known);
  m.dispatches.push_back({"d3_shape", "Shape", {5}, {10}, {}, {"shape0"}});
  Status written = write_module(m, path);
  ASSERT_TRUE(written.ok()) << written.to_string();
  auto loaded = load_module(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const ModuleValue& back = (*loaded)->values.back();
  ASSERT_EQ(back.known_values.size(), 2u);
  EXPECT_EQ(back.known_values[0], DimExpr::symbol("N") * 4);
  EXPECT_EQ(back.known_values[1], DimExpr(-1));
  EXPECT_TRUE((*loaded)->values[3].known_values.empty());
}
}  // namespace kiln::module
