#include "kiln/ir/text_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

namespace kiln::ir {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

Tensor filled(DType dtype, ConcreteShape dims, int seed) {
  Tensor t = Tensor::create(dtype, std::move(dims)).value();
  for (size_t i = 0; i < t.byte_size(); ++i)
    t.mutable_data()[i] = std::byte(static_cast<uint8_t>(i * 31 + seed));
  return t;
}

// Symbolic dims (including floor((N + 1)/2)), names with spaces, quotes, backslashes and control
// bytes, every attribute kind, an absent input, odd-sized constants (padding) and a scalar.
Graph sample_graph() {
  Graph g;
  g.name = "demo \"model\" v2";
  g.opset = 13;
  DimExpr n = DimExpr::symbol("N");
  DimExpr half = (n + 1).floor_div(2);
  DimExpr odd = DimExpr::symbol("seq len\"x\\");
  ValueId x = g.add_input("input image", DType::kF32, {n, 3, half, odd});
  ValueId ids = g.add_input("ids", DType::kI64, {2 * n + 3});
  ValueId w = g.add_constant("conv.w \"quoted\"", filled(DType::kF32, {4, 3, 1, 1}, 1));
  ValueId b = g.add_constant("bias\twith\ttabs", filled(DType::kF64, {3}, 2));
  ValueId mask = g.add_constant("mask", filled(DType::kBool, {5}, 3));
  ValueId scalar = g.add_constant("scale", filled(DType::kI8, {}, 4));
  ValueId empty = g.add_constant("empty", Tensor::create(DType::kU8, {0, 7}).value());
  ValueId c = g.add_value({"conv out", DType::kF32, {n, 4, half, odd}, {}, {}});
  Node conv{"conv 0", "Conv", {x, w, kAbsent}, {c}, {}, {"onnx conv", "bn \"1\""}};
  conv.attributes.set("kernel_shape", std::vector<int64_t>{1, 1});
  conv.attributes.set("epsilon", 1e-5);
  conv.attributes.set("alpha", 0.1f * 1.0);
  conv.attributes.set("neg", -std::numeric_limits<double>::infinity());
  conv.attributes.set("auto_pad", std::string("SAME \"UPPER\"\n"));
  conv.attributes.set("scales", std::vector<double>{1.0, 2.5, 1.0 / 3.0, -0.0});
  conv.attributes.set("names", std::vector<std::string>{"a", "b c", ""});
  conv.attributes.set("empty_ints", std::vector<int64_t>{});
  conv.attributes.set("axis", int64_t{-1});
  conv.attributes.set("weird name:x", int64_t{7});
  g.add_node(conv);
  ValueId y = g.add_value({"y", DType::kF32, {n, 4, half, odd}, {}, {}});
  g.add_node({"relu", "kiln.Fused Op", {c, b, mask, scalar, empty, ids}, {y}, {}, {}});
  g.add_output(y);
  g.add_output(c);
  return g;
}

TEST(TextFormat, PrintsReadableHeader) {
  std::string text = print_graph_text(sample_graph(), false);
  EXPECT_THAT(text, HasSubstr("kiln-ir 1\ngraph \"demo \\\"model\\\" v2\"\nopset 13\n"));
  EXPECT_THAT(text, HasSubstr("symbols N \"seq len\\\"x\\\\\"\n"));
  EXPECT_THAT(text,
              HasSubstr("input \"input image\": f32[N,3,floor((N + 1)/2),\"seq len\\\"x\\\\\"]\n"));
  EXPECT_THAT(text, HasSubstr("const \"mask\": bool[5] offset=128 size=5\n"));
  EXPECT_THAT(text, HasSubstr("const \"bias\\twith\\ttabs\": f64[3] offset=64 size=24\n"));
  EXPECT_THAT(text, HasSubstr("node \"conv 0\" Conv in(\"input image\": "));
  EXPECT_THAT(text, HasSubstr(", -) out(\"conv out\": "));
  EXPECT_THAT(text, HasSubstr("epsilon:float=1e-05"));
  EXPECT_THAT(text, HasSubstr("kernel_shape:ints=[1,1]"));
  EXPECT_THAT(text, HasSubstr("auto_pad:string=\"SAME \\\"UPPER\\\"\\n\""));
  EXPECT_THAT(text, HasSubstr("\"weird name:x\":int=7"));
  EXPECT_THAT(text, HasSubstr("origins(\"onnx conv\", \"bn \\\"1\\\"\")"));
  EXPECT_THAT(text, HasSubstr("node \"relu\" \"kiln.Fused Op\" in("));
  EXPECT_THAT(text, HasSubstr("output \"y\": f32["));
  EXPECT_THAT(text, HasSubstr("(data omitted)"));
  EXPECT_EQ(text, print_graph_text(sample_graph(), false));  // deterministic
}

TEST(TextFormat, RoundTripIsIdentical) {
  Graph original = sample_graph();
  std::string first = print_graph_text(original, true);
  auto parsed = parse_kir(first);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  std::string second = print_graph_text(*parsed, true);
  EXPECT_EQ(first, second);

  EXPECT_EQ(parsed->name, original.name);
  EXPECT_EQ(parsed->opset, 13);
  ASSERT_EQ(parsed->inputs().size(), 2u);
  EXPECT_EQ(parsed->value(parsed->inputs()[0]).shape, original.value(original.inputs()[0]).shape);
  for (const char* name : {"conv.w \"quoted\"", "bias\twith\ttabs", "mask", "scale", "empty"}) {
    SCOPED_TRACE(name);
    const Value& a = original.value(*original.find_value(name));
    auto id = parsed->find_value(name);
    ASSERT_TRUE(id.has_value());
    const Value& b = parsed->value(*id);
    ASSERT_TRUE(b.constant.has_value());
    EXPECT_EQ(b.constant->dtype(), a.constant->dtype());
    EXPECT_EQ(b.constant->shape(), a.constant->shape());
    ASSERT_EQ(b.constant->byte_size(), a.constant->byte_size());
    EXPECT_EQ(std::memcmp(b.constant->data(), a.constant->data(), a.constant->byte_size()), 0);
  }
  const Node& conv = parsed->node(0);
  EXPECT_EQ(conv.inputs[2], kAbsent);
  EXPECT_EQ(conv.origins, (std::vector<std::string>{"onnx conv", "bn \"1\""}));
  EXPECT_EQ(conv.attributes.all(), original.node(0).attributes.all());
  EXPECT_EQ(std::get<double>(conv.attributes.all().at("alpha")), 0.1f * 1.0);
  EXPECT_TRUE(std::signbit(std::get<std::vector<double>>(conv.attributes.all().at("scales"))[3]));
  EXPECT_EQ(parsed->node(1).op_type, "kiln.Fused Op");
  EXPECT_EQ(parsed->outputs().size(), 2u);
  EXPECT_TRUE(verify_graph(*parsed).ok());
}

TEST(TextFormat, NanAndInfinityRoundTrip) {
  Graph g;
  ValueId x = g.add_input("x", DType::kF32, {2});
  ValueId y = g.add_value({"y", DType::kF32, {2}, {}, {}});
  Node node{"n", "Clip", {x}, {y}, {}, {}};
  node.attributes.set("values",
                      std::vector<double>{std::nan(""), std::numeric_limits<double>::infinity(),
                                          std::numeric_limits<double>::denorm_min(), 1e308});
  g.add_node(node);
  g.add_output(y);
  std::string text = print_graph_text(g, true);
  auto parsed = parse_kir(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  auto values = std::get<std::vector<double>>(parsed->node(0).attributes.all().at("values"));
  EXPECT_TRUE(std::isnan(values[0]));
  EXPECT_EQ(values[1], std::numeric_limits<double>::infinity());
  EXPECT_EQ(values[2], std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(values[3], 1e308);
  EXPECT_EQ(print_graph_text(*parsed, true), text);
}

TEST(TextFormat, EmptyGraphRoundTrips) {
  Graph g;
  ValueId x = g.add_input("x", DType::kF32, {});
  g.add_output(x);
  std::string text = print_graph_text(g, true);
  EXPECT_THAT(text, HasSubstr("symbols\n"));
  EXPECT_THAT(text, HasSubstr("blob 0\n"));
  auto parsed = parse_kir(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(print_graph_text(*parsed, true), text);
}

TEST(TextFormat, AcceptsCommentsAndBlankLines) {
  std::string text =
      "kiln-ir 1\n# a comment\n\ngraph \"g\"\nopset 17\nsymbols N\r\n"
      "input \"x\": f32[N]\n  # indented comment\nnode \"r\" Relu in(\"x\": f32[N]) "
      "out(\"y\": f32[N]) origins(\"r\")\noutput \"y\": f32[N]\nblob 0\n";
  auto parsed = parse_kir(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed->nodes().size(), 1u);
}

std::string valid_text() { return print_graph_text(sample_graph(), true); }

// Replaces the first occurrence of `from` in the valid text.
std::string edited(const std::string& from, const std::string& to) {
  std::string text = valid_text();
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

void expect_error(const std::string& text, StatusCode code, const std::vector<std::string>& parts) {
  auto parsed = parse_kir(text);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), code) << parsed.status().to_string();
  for (const auto& part : parts) EXPECT_THAT(parsed.status().message(), HasSubstr(part));
}

TEST(TextFormat, RejectsMalformedHeaders) {
  expect_error("", StatusCode::kDataLoss, {"line 1", "kiln-ir 1"});
  expect_error("PK\x03\x04 binary junk", StatusCode::kInvalidArgument,
               {"line 1", "not a kiln IR file"});
  expect_error(edited("kiln-ir 1", "kiln-ir 2"), StatusCode::kUnimplemented,
               {"line 1", "version 2"});
  expect_error(edited("opset 13", "opset thirteen"), StatusCode::kInvalidArgument,
               {"line 3", "opset"});
  expect_error(edited("graph \"demo", "grph \"demo"), StatusCode::kInvalidArgument,
               {"line 2", "'graph'"});
  expect_error(edited("symbols N", "symbols N+1"), StatusCode::kInvalidArgument,
               {"line 4", "symbol"});
  expect_error(edited("input \"ids\"", "inpt \"ids\""), StatusCode::kInvalidArgument,
               {"line 6", "'input'"});
}

TEST(TextFormat, RejectsBadTypes) {
  expect_error(edited("\"ids\": i64", "\"ids\": i65"), StatusCode::kInvalidArgument,
               {"line 6", "dtype", "i65"});
  expect_error(edited("\"ids\": i64[2*N + 3]", "\"ids\": i64[2*N + ]"),
               StatusCode::kInvalidArgument, {"line 6", "'ids'"});
  expect_error(edited("\"ids\": i64[2*N + 3]", "\"ids\": i64[2*N + 3"),
               StatusCode::kInvalidArgument, {"line 6", "unterminated"});
  expect_error(edited("\"ids\": i64[2*N + 3]", "\"ids\": i64[M]"), StatusCode::kInvalidArgument,
               {"line 6", "symbol 'M'"});
  expect_error(edited("\"ids\": i64[2*N + 3]", "\"ids\": i64[-4]"), StatusCode::kInvalidArgument,
               {"line 6", "negative"});
  expect_error(edited("\"mask\": bool[5]", "\"mask\": bool[N]"), StatusCode::kInvalidArgument,
               {"line 9", "symbolic"});
  expect_error(edited("\"ids\": i64[2*N + 3]", "\"ids\": i64[" + std::string(200000, '-') + "N]"),
               StatusCode::kInvalidArgument, {"line 6", "repeated '-'"});
  expect_error(edited("\"ids\": i64[2*N + 3]", "\"ids\": i64[" + std::string(100000, '(') + "N]"),
               StatusCode::kInvalidArgument, {"line 6"});
}

TEST(TextFormat, RejectsBadNamesAndReferences) {
  expect_error(edited("input \"ids\"", "input \"input image\""), StatusCode::kInvalidArgument,
               {"line 6", "'input image'", "already defined on line 5"});
  expect_error(edited("node \"relu\"", "node \"conv 0\""), StatusCode::kInvalidArgument,
               {"node 'conv 0'", "already defined"});
  expect_error(edited("output \"y\"", "output \"zz\""), StatusCode::kInvalidArgument,
               {"'zz'", "not defined"});
  expect_error(edited("in(\"input image\"", "in(\"later\""), StatusCode::kInvalidArgument,
               {"'later'", "not defined"});
  expect_error(edited("output \"y\": f32[", "output \"y\": f64["), StatusCode::kInvalidArgument,
               {"'y'", "f64", "f32"});
  expect_error(edited("input \"input image\"", "input \"input\\q image\""),
               StatusCode::kInvalidArgument, {"line 5", "escape"});
  expect_error(edited("input \"input image\"", "input \"input image"), StatusCode::kInvalidArgument,
               {"line 5"});
  expect_error(edited(") out(\"conv out\"", ") out(-"), StatusCode::kUnimplemented, {"absent"});
}

TEST(TextFormat, RejectsBadAttributes) {
  expect_error(edited("axis:int=-1", "axis:int=-1x"), StatusCode::kInvalidArgument, {"an int"});
  expect_error(edited("axis:int=-1", "axis:int=99999999999999999999"), StatusCode::kInvalidArgument,
               {"64-bit integer"});
  expect_error(edited("axis:int=-1", "axis:complex=1"), StatusCode::kInvalidArgument,
               {"unknown attribute kind 'complex'"});
  expect_error(edited("axis:int=-1", "axis:int=1, axis:int=2"), StatusCode::kInvalidArgument,
               {"'axis' is given twice"});
  expect_error(edited("kernel_shape:ints=[1,1]", "kernel_shape:ints=[1,1"),
               StatusCode::kInvalidArgument, {"an int"});
  expect_error(edited("kernel_shape:ints=[1,1]", "kernel_shape:ints=[1 1]"),
               StatusCode::kInvalidArgument, {"']'"});
  expect_error(edited("names:strings=[\"a\"", "names:strings=[a"), StatusCode::kInvalidArgument,
               {"quoted string"});
  expect_error(edited("epsilon:float=1e-05", "epsilon:float=1e-05e"), StatusCode::kInvalidArgument,
               {"a float"});
}

TEST(TextFormat, RejectsBadConstantsAndBlobs) {
  std::string text = valid_text();
  expect_error(edited("offset=128 size=5", "offset=100 size=5"), StatusCode::kInvalidArgument,
               {"line 9", "multiple of 64"});
  expect_error(edited("offset=128 size=5", "offset=128 size=6"), StatusCode::kInvalidArgument,
               {"line 9", "size=5"});
  expect_error(edited("offset=128 size=5", "offset=1792 size=5"), StatusCode::kInvalidArgument,
               {"line 9", "beyond"});
  expect_error(edited("offset=128 size=5", "offset=9223372036854775744 size=5"),
               StatusCode::kInvalidArgument, {"line 9", "beyond"});
  expect_error(edited("\"mask\": bool[5]", "\"mask\": bool[4611686018427387904,4]"),
               StatusCode::kInvalidArgument, {"line 9", "too large"});
  size_t blob_at = text.find("\nblob ") + 1;
  size_t data_at = text.find('\n', blob_at) + 1;
  for (size_t cut : {data_at, data_at + 1, text.size() - 1}) {
    expect_error(text.substr(0, cut), StatusCode::kDataLoss, {"blob", "truncated"});
  }
  expect_error(text + "x", StatusCode::kDataLoss, {"trailing"});
  expect_error(text.substr(0, blob_at), StatusCode::kDataLoss, {"end of the file"});
  expect_error(edited("blob ", "blob -"), StatusCode::kInvalidArgument, {"negative"});
}

TEST(TextFormat, NoCrashOnRandomMutations) {
  std::string text = valid_text();
  std::mt19937 rng(7);
  int parsed_ok = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string mutated = text;
    int edits = 1 + rng() % 4;
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % mutated.size();
      switch (rng() % 3) {
        case 0: mutated[at] = static_cast<char>(rng()); break;
        case 1: mutated.erase(at, 1 + rng() % 8); break;
        default: mutated.insert(at, 1, "\"\\[](),:=- 0N\n"[rng() % 14]); break;
      }
      if (mutated.empty()) mutated.push_back('x');
    }
    auto parsed = parse_kir(mutated);
    if (parsed.ok()) {
      ++parsed_ok;
      EXPECT_TRUE(verify_graph(*parsed).ok());
    } else {
      EXPECT_THAT(parsed.status().message(), HasSubstr("line "));
    }
  }
  EXPECT_LT(parsed_ok, 3000);
}

class KirFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "kiln_kir_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(KirFiles, WriteThenRead) {
  std::string path = (dir_ / "model.kir").string();
  Graph g = sample_graph();
  ASSERT_TRUE(write_kir(g, path).ok());
  auto back = read_kir(path);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(print_graph_text(*back, true), print_graph_text(g, true));
  // Only the file itself is left in the directory: no temporary files.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(KirFiles, ReadErrorsNameThePath) {
  auto missing = read_kir((dir_ / "missing.kir").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().to_string(), HasSubstr("missing.kir"));

  std::string path = (dir_ / "bad.kir").string();
  std::ofstream(path) << "kiln-ir 1\ngraph oops\n";
  auto bad = read_kir(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().to_string(), AllOf(HasSubstr("line 2"), HasSubstr("bad.kir")));
}

TEST_F(KirFiles, RefusedGraphLeavesNoFile) {
  std::string path = (dir_ / "dup.kir").string();
  Graph g;
  ValueId a = g.add_input("x", DType::kF32, {1});
  ValueId b = g.add_input("x", DType::kF32, {1});
  ValueId y = g.add_value({"y", DType::kF32, {1}, {}, {}});
  g.add_node({"add", "Add", {a, b}, {y}, {}, {}});
  g.add_output(y);
  Status status = write_kir(g, path);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.to_string(), AllOf(HasSubstr("'x'"), HasSubstr("dup.kir")));
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 0);

  Graph bad_symbol;
  ValueId x = bad_symbol.add_input("x", DType::kF32, {DimExpr::symbol("a\nb")});
  bad_symbol.add_output(x);
  EXPECT_FALSE(write_kir(bad_symbol, path).ok());
  EXPECT_FALSE(fs::exists(path));

  // An unwritable destination: the error names it and nothing is created.
  Status unwritable = write_kir(sample_graph(), (dir_ / "no such dir" / "m.kir").string());
  ASSERT_FALSE(unwritable.ok());
  EXPECT_THAT(unwritable.to_string(), HasSubstr("no such dir"));
}

}  // namespace
}  // namespace kiln::ir
