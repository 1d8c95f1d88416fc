// Loader tests on hand-built files whose header and checksum are right but whose metadata is
// wrong in one specific way; each must be refused with an error naming the item.

#include <xxhash.h>

#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/module/module.h"
#include "kiln/module/module_generated.h"
#include "kiln/module/module_header.h"

namespace kiln::module {
namespace {

using ::testing::HasSubstr;
namespace fbs = flatbuffers;

struct RawAttr {
  std::string name;
  fb::AttrValue type = fb::AttrValue::IntAttr;
  int64_t value = 0;
};

struct RawValue {
  std::string name;
  uint8_t dtype = static_cast<uint8_t>(DType::kF32);
  std::vector<std::string> dims;
  uint8_t kind = static_cast<uint8_t>(ValueKind::kIntermediate);
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct RawDispatch {
  std::string name;
  std::string op_type;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::vector<RawAttr> attributes;
  int shared_origin_repeats = 0;  // > 0: that many references to one 1000-byte string
};

struct RawModule {
  std::vector<std::string> symbols;
  std::vector<RawValue> values;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::vector<RawDispatch> dispatches;
  std::string constants;            // the constants segment, a multiple of 64 bytes
  int shared_dispatch_repeats = 0;  // > 0: the dispatch list is that many references to the first
};

// x[N,4] + w[4] -> y[N,4]
RawModule valid_raw() {
  RawModule m;
  m.symbols = {"N"};
  m.values = {
      {"x", 1, {"N", "4"}, 0, 0, 0}, {"w", 1, {"4"}, 1, 0, 16}, {"y", 1, {"N", "4"}, 2, 0, 0}};
  m.inputs = {0};
  m.outputs = {2};
  m.dispatches = {{"d0_add", "Add", {0, 1}, {2}, {{"axis", fb::AttrValue::IntAttr, 1}}, 0}};
  m.constants = std::string(64, '\0');
  float w[4] = {1, 2, 3, 4};
  std::memcpy(m.constants.data(), w, sizeof(w));
  return m;
}

std::vector<uint8_t> build_metadata(const RawModule& m) {
  fbs::FlatBufferBuilder b;
  auto strings = [&](const std::vector<std::string>& v) {
    std::vector<fbs::Offset<fbs::String>> offsets;
    for (const std::string& s : v) offsets.push_back(b.CreateString(s));
    return b.CreateVector(offsets);
  };
  std::vector<fbs::Offset<fb::Value>> values;
  for (const RawValue& v : m.values) {
    auto name = b.CreateString(v.name);
    auto dims = strings(v.dims);
    values.push_back(fb::CreateValue(b, name, v.dtype, dims, v.kind, v.offset, v.size));
  }
  std::vector<fbs::Offset<fb::Dispatch>> dispatches;
  for (const RawDispatch& d : m.dispatches) {
    std::vector<fbs::Offset<fb::Attr>> attributes;
    for (const RawAttr& a : d.attributes) {
      auto name = b.CreateString(a.name);
      fbs::Offset<void> value;
      if (a.type != fb::AttrValue::NONE) value = fb::CreateIntAttr(b, a.value).Union();
      attributes.push_back(fb::CreateAttr(b, name, a.type, value));
    }
    std::vector<fbs::Offset<fbs::String>> origins;
    if (d.shared_origin_repeats > 0) {
      auto shared = b.CreateString(std::string(1000, 'o'));
      origins.assign(static_cast<size_t>(d.shared_origin_repeats), shared);
    }
    dispatches.push_back(fb::CreateDispatch(b, b.CreateString(d.name), b.CreateString(d.op_type),
                                            b.CreateVector(d.inputs), b.CreateVector(d.outputs),
                                            b.CreateVector(attributes), b.CreateVector(origins)));
  }
  if (m.shared_dispatch_repeats > 0) {
    dispatches.assign(static_cast<size_t>(m.shared_dispatch_repeats), dispatches.at(0));
  }
  auto root = fb::CreateModule(b, b.CreateString("raw"), b.CreateString("test"), strings(m.symbols),
                               b.CreateVector(values), b.CreateVector(m.inputs),
                               b.CreateVector(m.outputs), b.CreateVector(dispatches));
  fb::FinishSizePrefixedModuleBuffer(b, root);
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

// A file with a correct header and checksum around `metadata` and `constants`.
std::string assemble(const std::vector<uint8_t>& metadata, const std::string& constants) {
  ModuleHeader header;
  header.metadata_offset = kHeaderSize;
  header.metadata_size = metadata.size();
  header.constants_offset = align_to_segment(kHeaderSize + metadata.size());
  header.constants_size = constants.size();
  std::string body(metadata.begin(), metadata.end());
  body.resize(header.constants_offset - kHeaderSize, '\0');
  body += constants;
  header.checksum = XXH64(body.data(), body.size(), 0);
  auto bytes = encode_header(header);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()) + body;
}

Status load_raw(const RawModule& m) {
  std::string file = assemble(build_metadata(m), m.constants);
  auto loaded = load_module_from_bytes(file.data(), file.size());
  return loaded.ok() ? ok_status() : loaded.status();
}

void expect_refused(const RawModule& m, std::initializer_list<const char*> fragments) {
  Status s = load_raw(m);
  ASSERT_FALSE(s.ok()) << "accepted";
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("module bytes: "));
  for (const char* fragment : fragments) EXPECT_THAT(s.message(), HasSubstr(fragment));
}

TEST(ModuleReader, ValidRawModuleLoads) {
  RawModule m = valid_raw();
  std::string file = assemble(build_metadata(m), m.constants);
  auto loaded = load_module_from_bytes(file.data(), file.size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const ModuleContents& c = **loaded;
  ASSERT_EQ(c.values.size(), 3u);
  EXPECT_EQ(c.values[1].constant.values<float>()[3], 4.0f);
  EXPECT_EQ(c.dispatches[0].attributes.get_int("axis", 0).value(), 1);
}

TEST(ModuleReader, BadDtypeCode) {
  RawModule m = valid_raw();
  m.values[2].dtype = 99;
  expect_refused(m, {"value 2 'y'", "invalid dtype code 99"});
  m.values[2].dtype = 0;
  expect_refused(m, {"value 2 'y'", "invalid dtype code 0"});
  m.values[2].dtype = kLastDTypeCode + 1;
  expect_refused(
      m, {"value 2 'y'", ("invalid dtype code " + std::to_string(kLastDTypeCode + 1)).c_str()});
}

TEST(ModuleReader, EveryDtypeCodeLoads) {
  for (int code = 1; code <= kLastDTypeCode; ++code) {
    RawModule m = valid_raw();
    m.values[2].dtype = static_cast<uint8_t>(code);
    std::string file = assemble(build_metadata(m), m.constants);
    auto loaded = load_module_from_bytes(file.data(), file.size());
    ASSERT_TRUE(loaded.ok()) << code << ": " << loaded.status().to_string();
    EXPECT_EQ((*loaded)->values[2].dtype, static_cast<DType>(code));
  }
}

TEST(ModuleReader, BadKindCode) {
  RawModule m = valid_raw();
  m.values[2].kind = 3;
  expect_refused(m, {"value 2 'y'", "invalid kind code 3"});
}

TEST(ModuleReader, UnparsableDim) {
  RawModule m = valid_raw();
  m.values[2].dims[1] = "4 +* N";
  expect_refused(m, {"value 2 'y'", "dim 1", "not in kiln's canonical dim form"});
  m.values[2].dims[1] = "";
  expect_refused(m, {"value 2 'y'", "dim 1"});
  m.values[2].dims[1] = std::string(5000, '(');
  expect_refused(m, {"value 2 'y'", "dim 1", "over the limit"});
}

TEST(ModuleReader, DimThatExpandsExponentially) {
  RawModule m = valid_raw();
  m.symbols = {"N", "a", "b", "c", "d"};
  std::string text;
  for (int i = 0; i < 40; ++i) text += (i ? "*" : "") + std::string("(a + b + c + d)");
  m.values[2].dims[1] = text;
  expect_refused(m, {"value 2 'y'", "dim 1", "not in kiln's canonical dim form"});
}

TEST(ModuleReader, UndeclaredSymbol) {
  RawModule m = valid_raw();
  m.values[2].dims[0] = "M";
  expect_refused(m, {"value 2 'y'", "symbol 'M'"});
}

TEST(ModuleReader, NegativeDim) {
  RawModule m = valid_raw();
  m.values[2].dims[1] = "-1";
  expect_refused(m, {"value 2 'y'", "dim 1 is -1"});
}

TEST(ModuleReader, MisalignedConstant) {
  RawModule m = valid_raw();
  m.values[1].offset = 4;
  expect_refused(m, {"value 1 'w'", "not a multiple of 64"});
}

TEST(ModuleReader, ConstantOutsideTheSegment) {
  RawModule m = valid_raw();
  m.values[1].offset = 64;
  expect_refused(m, {"value 1 'w'", "outside the constants segment"});
  m.values[1].offset = UINT64_MAX - 63;  // offset + size wraps around
  expect_refused(m, {"value 1 'w'", "outside the constants segment"});
}

TEST(ModuleReader, ConstantSizeDisagreesWithShape) {
  RawModule m = valid_raw();
  m.values[1].size = 12;
  expect_refused(m, {"value 1 'w'", "12 bytes", "needs 16"});
}

TEST(ModuleReader, ConstantWithOverflowingDims) {
  RawModule m = valid_raw();
  m.values[1].dims = {"4611686018427387904", "4"};
  expect_refused(m, {"value 1 'w'", "overflow"});
}

TEST(ModuleReader, ConstantWithSymbolicDims) {
  RawModule m = valid_raw();
  m.values[1].dims = {"N"};
  expect_refused(m, {"value 1 'w'", "static"});
}

TEST(ModuleReader, NonConstantWithDataRange) {
  RawModule m = valid_raw();
  m.values[2].size = 16;
  expect_refused(m, {"value 2 'y'", "constant data range"});
}

TEST(ModuleReader, AttributeWithoutValue) {
  RawModule m = valid_raw();
  m.dispatches[0].attributes[0].type = fb::AttrValue::NONE;
  expect_refused(m, {"dispatch 0 'd0_add' (Add)", "attribute 'axis'", "no value"});
}

TEST(ModuleReader, AttributeOfUnknownKind) {
  RawModule m = valid_raw();
  m.dispatches[0].attributes[0].type = static_cast<fb::AttrValue>(42);
  expect_refused(m, {"dispatch 0 'd0_add' (Add)", "attribute 'axis'", "unknown attribute kind"});
}

TEST(ModuleReader, DuplicateAttribute) {
  RawModule m = valid_raw();
  m.dispatches[0].attributes.push_back({"axis", fb::AttrValue::IntAttr, 2});
  expect_refused(m, {"dispatch 0 'd0_add' (Add)", "attribute 'axis' appears twice"});
}

TEST(ModuleReader, IndexOutOfRange) {
  RawModule m = valid_raw();
  m.dispatches[0].inputs[1] = 3;
  expect_refused(m, {"dispatch 0 'd0_add' (Add)", "input 1 is value 3, out of range"});
  m = valid_raw();
  m.outputs = {-5};
  expect_refused(m, {"graph output 0 is value -5"});
  m = valid_raw();
  m.inputs = {2};
  expect_refused(m, {"graph input 0", "not an input value"});
}

TEST(ModuleReader, IntermediateUsedBeforeProduced) {
  RawModule m = valid_raw();
  m.dispatches.insert(m.dispatches.begin(), RawDispatch{"d_early", "Relu", {2}, {}, {}, 0});
  expect_refused(m, {"dispatch 0 'd_early' (Relu)", "value 2 'y'", "before any dispatch"});
}

TEST(ModuleReader, SharedStringsCannotInflateTheModule) {
  RawModule m = valid_raw();
  m.dispatches[0].shared_origin_repeats = 100000;
  expect_refused(m, {"dispatch 0 'd0_add' (Add)", "are not allowed"});
}

TEST(ModuleReader, SharedTablesCannotInflateTheModule) {
  RawModule m = valid_raw();
  m.dispatches[0].inputs.assign(10000, 0);
  m.shared_dispatch_repeats = 10000;  // 10^8 decoded indices from a 80 KB file
  expect_refused(m, {"are not allowed"});
}

TEST(ModuleReader, MetadataThatIsNotAFlatbuffer) {
  std::vector<uint8_t> junk(256, 0xab);
  junk[0] = 252;  // a size prefix that agrees with the header
  junk[1] = junk[2] = junk[3] = 0;
  std::string file = assemble(junk, "");
  auto loaded = load_module_from_bytes(file.data(), file.size());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(), HasSubstr("not a valid module flatbuffer"));
}

TEST(ModuleReader, SizePrefixMustAgreeWithHeader) {
  std::vector<uint8_t> metadata = build_metadata(valid_raw());
  metadata.push_back(0);  // one byte the size prefix does not account for
  std::string file = assemble(metadata, valid_raw().constants);
  auto loaded = load_module_from_bytes(file.data(), file.size());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(loaded.status().message(), HasSubstr("the header says"));
}

TEST(ModuleReader, WrongFileIdentifier) {
  std::vector<uint8_t> metadata = build_metadata(valid_raw());
  metadata[8] = 'X';  // after the size prefix and the root offset
  std::string file = assemble(metadata, valid_raw().constants);
  auto loaded = load_module_from_bytes(file.data(), file.size());
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(), HasSubstr("not a valid module flatbuffer"));
}

}  // namespace
}  // namespace kiln::module

namespace kiln::module {
namespace {

// A module whose one Loop dispatch nests a body `depth` levels deep (each body the same shape:
// inputs i, c; output c), written by hand so that no writer check stops it.
std::string nested_file(int depth, bool wrong_op = false) {
  fbs::FlatBufferBuilder b;
  auto level = [&](fbs::Offset<fb::Module> inner, bool has_inner) {
    std::vector<fbs::Offset<fb::Value>> values;
    for (const char* name : {"i", "c"}) {
      const auto dtype = static_cast<uint8_t>(name[0] == 'i' ? DType::kI64 : DType::kBool);
      values.push_back(fb::CreateValue(b, b.CreateString(name), dtype,
                                       b.CreateVector(std::vector<fbs::Offset<fbs::String>>{}),
                                       static_cast<uint8_t>(ValueKind::kInput), 0, 0));
    }
    std::vector<fbs::Offset<fb::Dispatch>> dispatches;
    if (has_inner) {
      std::vector<fbs::Offset<fb::Module>> bodies = {inner};
      dispatches.push_back(fb::CreateDispatch(
          b, b.CreateString("loop"), b.CreateString(wrong_op ? "Add" : "Loop"),
          b.CreateVector(std::vector<int32_t>{0, 1}), b.CreateVector(std::vector<int32_t>{}), 0, 0,
          0, b.CreateVector(bodies)));
    }
    return fb::CreateModule(b, b.CreateString("nested"), b.CreateString("test"), 0,
                            b.CreateVector(values), b.CreateVector(std::vector<int32_t>{0, 1}),
                            b.CreateVector(std::vector<int32_t>{1}), b.CreateVector(dispatches));
  };
  fbs::Offset<fb::Module> current = level({}, false);
  for (int d = 0; d < depth; ++d) current = level(current, true);
  fb::FinishSizePrefixedModuleBuffer(b, current);
  return assemble({b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()}, "");
}

TEST(ModuleReader, BodiesNestedTooDeepOrOnTheWrongOpAreRefused) {
  const std::string fine = nested_file(kMaxBodyDepth);
  auto loaded = load_module_from_bytes(fine.data(), fine.size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->dispatches[0].bodies.size(), 1u);
  for (int depth : {kMaxBodyDepth + 1, 40, 1000}) {
    const std::string deep = nested_file(depth);
    auto refused = load_module_from_bytes(deep.data(), deep.size());
    ASSERT_FALSE(refused.ok()) << depth;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  }
  const std::string wrong = nested_file(1, /*wrong_op=*/true);
  auto refused = load_module_from_bytes(wrong.data(), wrong.size());
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("only Loop, Scan, If and SequenceMap dispatches have bodies"));
}

}  // namespace
}  // namespace kiln::module
