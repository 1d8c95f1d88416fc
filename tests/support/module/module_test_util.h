// Test helpers for the module library: a small module that uses every feature of the format, a
// field-by-field comparison, and a scratch directory.
#pragma once

#include <unistd.h>

#include <dirent.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kiln/module/module.h"

namespace kiln::module::test_util {

inline Tensor make_f32(ConcreteShape dims, float start) {
  Tensor t = Tensor::create(DType::kF32, std::move(dims)).value();
  auto values = t.mutable_values<float>();
  for (size_t i = 0; i < values.size(); ++i) values[i] = start + static_cast<float>(i);
  return t;
}

inline DimExpr sym(const char* name) { return DimExpr::symbol(name); }

// Every attribute kind, symbolic and quoted-symbol dims, constants of several dtypes (one empty),
// an omitted optional input, and graph outputs that are not the last value.
inline ModuleContents sample_contents() {
  ModuleContents m;
  m.model_name = "tiny";
  m.producer = "kiln test";
  m.symbols = {"N", "seq len"};
  DimExpr n = sym("N");
  auto add = [&](std::string name, DType dtype, Shape shape, ValueKind kind, Tensor data = {}) {
    m.values.push_back({std::move(name), dtype, std::move(shape), kind, std::move(data)});
  };
  add("x", DType::kF32, {n, 3, 4, 4}, ValueKind::kInput);  // 0
  add("conv0_w", DType::kF32, {2, 3, 1, 1}, ValueKind::kConstant, make_f32({2, 3, 1, 1}, 1));
  add("conv0_b", DType::kF32, {2}, ValueKind::kConstant, make_f32({2}, -7));  // 2
  add("y", DType::kF32, {n, 2, 4, 4}, ValueKind::kIntermediate);              // 3
  Tensor shape_data = Tensor::create(DType::kI64, {2}).value();
  shape_data.mutable_values<int64_t>()[0] = -1;
  shape_data.mutable_values<int64_t>()[1] = 32;
  add("shape", DType::kI64, {2}, ValueKind::kConstant, shape_data);  // 4
  add("z", DType::kF32, {n, 32}, ValueKind::kIntermediate);          // 5
  add("mask", DType::kBool, {sym("seq len")}, ValueKind::kInput);    // 6
  Tensor flags = Tensor::create(DType::kBool, {3}).value();
  flags.mutable_values<uint8_t>()[1] = 1;
  add("flags", DType::kBool, {3}, ValueKind::kConstant, flags);  // 7
  add("odd", DType::kF32, {(n + 1).floor_div(2), 2 * n + 3, sym("seq len") * n},
      ValueKind::kIntermediate);  // 8
  add("nothing", DType::kF32, {0}, ValueKind::kConstant,
      Tensor::create(DType::kF32, {0}).value());  // 9

  Dispatch conv{"d0_conv0", "Conv", {0, 1, 2}, {3}, {}, {"conv0"}};
  conv.attributes.set("group", int64_t{1});
  conv.attributes.set("alpha", 0.5);
  conv.attributes.set("auto_pad", std::string("NOTSET"));
  conv.attributes.set("kernel_shape", std::vector<int64_t>{1, 1});
  conv.attributes.set("scales", std::vector<double>{1.5, -2.25});
  conv.attributes.set("names", std::vector<std::string>{"a", "", "c"});
  conv.attributes.set("empty_ints", std::vector<int64_t>{});
  m.dispatches.push_back(conv);
  m.dispatches.push_back({"d1_reshape", "Reshape", {3, 4}, {5}, {}, {"reshape0", "flatten0"}});
  m.dispatches.push_back({"d2_custom", "kiln.Custom", {5, kAbsentValue, 6, 7, 9}, {8}, {}, {}});
  m.inputs = {0, 6};
  m.outputs = {8, 5};
  return m;
}

inline void expect_same_contents(const ModuleContents& a, const ModuleContents& b) {
  EXPECT_EQ(a.model_name, b.model_name);
  EXPECT_EQ(a.producer, b.producer);
  EXPECT_EQ(a.symbols, b.symbols);
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.outputs, b.outputs);
  ASSERT_EQ(a.values.size(), b.values.size());
  for (size_t i = 0; i < a.values.size(); ++i) {
    SCOPED_TRACE("value " + std::to_string(i));
    const ModuleValue& va = a.values[i];
    const ModuleValue& vb = b.values[i];
    EXPECT_EQ(va.name, vb.name);
    EXPECT_EQ(va.dtype, vb.dtype);
    EXPECT_EQ(va.kind, vb.kind);
    ASSERT_EQ(va.shape.size(), vb.shape.size());
    for (size_t d = 0; d < va.shape.size(); ++d) {
      EXPECT_EQ(va.shape[d], vb.shape[d])
          << va.shape[d].to_string() << " vs " << vb.shape[d].to_string();
    }
    EXPECT_EQ(va.constant.empty_storage(), vb.constant.empty_storage());
    EXPECT_EQ(va.constant.dtype(), vb.constant.dtype());
    EXPECT_EQ(va.constant.shape(), vb.constant.shape());
    ASSERT_EQ(va.constant.byte_size(), vb.constant.byte_size());
    if (va.constant.byte_size() > 0) {
      EXPECT_EQ(std::memcmp(va.constant.data(), vb.constant.data(), va.constant.byte_size()), 0);
    }
  }
  ASSERT_EQ(a.dispatches.size(), b.dispatches.size());
  for (size_t i = 0; i < a.dispatches.size(); ++i) {
    SCOPED_TRACE("dispatch " + std::to_string(i));
    const Dispatch& da = a.dispatches[i];
    const Dispatch& db = b.dispatches[i];
    EXPECT_EQ(da.name, db.name);
    EXPECT_EQ(da.op_type, db.op_type);
    EXPECT_EQ(da.inputs, db.inputs);
    EXPECT_EQ(da.outputs, db.outputs);
    EXPECT_EQ(da.origins, db.origins);
    EXPECT_EQ(da.data_symbols, db.data_symbols);
    EXPECT_EQ(da.attributes.all(), db.attributes.all());
  }
}

// A fresh directory under the test temp dir, removed (with its plain files) at the end.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = ::testing::TempDir() + "kiln_module_XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (::mkdtemp(buffer.data()) == nullptr) ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    path_ = buffer.data();
  }
  ~ScratchDir() {
    for (const std::string& name : files()) ::unlink((path_ + "/" + name).c_str());
    ::rmdir(path_.c_str());
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    if (DIR* dir = ::opendir(path_.c_str())) {
      while (dirent* entry = ::readdir(dir)) {
        std::string name = entry->d_name;
        if (name != "." && name != "..") names.push_back(name);
      }
      ::closedir(dir);
    }
    return names;
  }

 private:
  std::string path_;
};

}  // namespace kiln::module::test_util
