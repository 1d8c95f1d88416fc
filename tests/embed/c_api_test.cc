// kiln's C API (include/kiln/kiln.h) through libkiln.so, as an embedding program uses it: compile,
// load, describe, run, run into caller buffers, compare, and every kind of bad input.
#include "kiln/kiln.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/test_env.h"

namespace {

using ::testing::HasSubstr;

// Takes ownership of a status; the test fails with its message when it is not ok.
std::string message_of(kiln_status* status) {
  std::string message = kiln_status_message(status);
  kiln_status_release(status);
  return message;
}

#define EXPECT_KILN_OK(expr)                                            \
  do {                                                                  \
    kiln_status* s_ = (expr);                                           \
    ASSERT_EQ(s_, nullptr) << #expr << ": " << kiln_status_message(s_); \
  } while (0)

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<float> read_floats(const std::string& path, size_t count) {
  std::vector<char> bytes = read_bytes(path);
  EXPECT_GE(bytes.size(), count * sizeof(float)) << path;
  std::vector<float> out(count);
  std::memcpy(out.data(), bytes.data(), std::min(bytes.size(), count * sizeof(float)));
  return out;
}

// tiny_cnn (data [N,3,8,8] f32 -> prob [N,10]) compiled in memory and loaded.
class CApi : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<char> onnx = read_bytes(kiln::testing::model_path("small/tiny_cnn.onnx"));
    ASSERT_FALSE(onnx.empty());
    kiln_bytes module_bytes{};
    EXPECT_KILN_OK(kiln_compile_memory(onnx.data(), onnx.size(), nullptr, &module_bytes));
    EXPECT_KILN_OK(
        kiln_module_load_memory(module_bytes.data, module_bytes.size, nullptr, &module_));
    kiln_bytes_release(&module_bytes);
    EXPECT_EQ(module_bytes.data, nullptr);
    EXPECT_KILN_OK(kiln_session_create(module_, nullptr, &session_));
    input_ = read_floats(kiln::testing::model_path("small/tiny_input_b3.bin"), 3 * 3 * 8 * 8);
  }
  void TearDown() override {
    kiln_session_release(session_);
    kiln_module_release(module_);
  }

  kiln_tensor input(int64_t batch) {
    dims_ = {batch, 3, 8, 8};
    return kiln_tensor{KILN_F32, 4, dims_.data(), input_.data()};
  }

  kiln_module* module_ = nullptr;
  kiln_session* session_ = nullptr;
  std::vector<float> input_;
  std::vector<int64_t> dims_;
};

TEST(CApiBasics, VersionDtypesAndStatusNames) {
  EXPECT_STREQ(kiln_version(), "0.1.0");
  EXPECT_EQ(kiln_dtype_size(KILN_F32), 4u);
  EXPECT_EQ(kiln_dtype_size(KILN_BF16), 2u);
  EXPECT_EQ(kiln_dtype_size(KILN_BOOL), 1u);
  EXPECT_EQ(kiln_dtype_size(static_cast<kiln_dtype>(0)), 0u);
  EXPECT_EQ(kiln_dtype_size(static_cast<kiln_dtype>(99)), 0u);
  EXPECT_STREQ(kiln_dtype_name(KILN_I64), "i64");
  EXPECT_STREQ(kiln_dtype_name(static_cast<kiln_dtype>(99)), "?");
  EXPECT_STREQ(kiln_status_code_name(KILN_DATA_LOSS), "DATA_LOSS");
  EXPECT_EQ(kiln_status_get_code(nullptr), KILN_OK);
  EXPECT_STREQ(kiln_status_message(nullptr), "");
  EXPECT_THAT(kiln_device_names(), HasSubstr("cpu"));
}

TEST(CApiBasics, LoadErrorsNameTheFileAndKind) {
  kiln_module* module = nullptr;
  kiln_status* missing = kiln_module_load_file("/nonexistent/m.kmod", nullptr, &module);
  ASSERT_NE(missing, nullptr);
  EXPECT_NE(kiln_status_get_code(missing), KILN_OK);
  EXPECT_THAT(message_of(missing), HasSubstr("/nonexistent/m.kmod"));
  const char garbage[] = "not a module at all, certainly not KILNMOD";
  kiln_status* bad = kiln_module_load_memory(garbage, sizeof(garbage), nullptr, &module);
  ASSERT_NE(bad, nullptr);
  EXPECT_THAT(message_of(bad), HasSubstr("KILNMOD"));
  EXPECT_EQ(module, nullptr) << "no output on failure";
  kiln_status* null_path = kiln_module_load_file(nullptr, nullptr, &module);
  EXPECT_EQ(kiln_status_get_code(null_path), KILN_INVALID_ARGUMENT);
  kiln_status_release(null_path);
}

TEST_F(CApi, DescribesInputsAndOutputsWithSymbolicDims) {
  ASSERT_EQ(kiln_module_input_count(module_), 1u);
  ASSERT_EQ(kiln_module_output_count(module_), 1u);
  kiln_value_info info{};
  EXPECT_KILN_OK(kiln_module_input_info(module_, 0, &info));
  EXPECT_STREQ(info.name, "data");
  EXPECT_EQ(info.dtype, KILN_F32);
  ASSERT_EQ(info.rank, 4u);
  EXPECT_EQ(std::vector<int64_t>(info.dims, info.dims + 4), (std::vector<int64_t>{-1, 3, 8, 8}));
  EXPECT_STREQ(info.dim_names[0], "N");
  EXPECT_STREQ(info.dim_names[1], "3");
  EXPECT_KILN_OK(kiln_module_output_info(module_, 0, &info));
  EXPECT_STREQ(info.name, "prob");
  EXPECT_EQ(std::vector<int64_t>(info.dims, info.dims + info.rank), (std::vector<int64_t>{-1, 10}));
  kiln_status* out_of_range = kiln_module_input_info(module_, 1, &info);
  EXPECT_EQ(kiln_status_get_code(out_of_range), KILN_OUT_OF_RANGE);
  kiln_status_release(out_of_range);
  // The session keeps the module alive after its handle is released.
  kiln_module_release(module_);
  module_ = nullptr;
  EXPECT_KILN_OK(kiln_module_input_info(kiln_session_module(session_), 0, &info));
  EXPECT_STREQ(info.name, "data");
}

TEST_F(CApi, RunsAtEveryBatchAndMatchesTheReference) {
  for (int64_t batch : {1, 3}) {
    // The batch-1 reference is for its own input file.
    std::vector<float> batch1 =
        read_floats(kiln::testing::model_path("small/tiny_input_b1.bin"), 3 * 8 * 8);
    kiln_tensor in = input(batch);
    if (batch == 1) in.data = batch1.data();
    kiln_outputs* outputs = nullptr;
    EXPECT_KILN_OK(kiln_session_run(session_, &in, 1, &outputs));
    ASSERT_EQ(kiln_outputs_count(outputs), 1u);
    const kiln_tensor* prob = kiln_outputs_get(outputs, 0);
    ASSERT_NE(prob, nullptr);
    EXPECT_EQ(kiln_outputs_get(outputs, 1), nullptr);
    ASSERT_EQ(prob->rank, 2u);
    EXPECT_EQ(prob->dims[0], batch);
    EXPECT_EQ(prob->dims[1], 10);
    std::vector<float> ref =
        read_floats(kiln::testing::model_path(batch == 1 ? "small/tiny_cnn.ref_b1.bin"
                                                         : "small/tiny_cnn.ref_b3.bin"),
                    static_cast<size_t>(batch) * 10);
    std::vector<int64_t> ref_dims{batch, 10};
    kiln_tensor expected{KILN_F32, 2, ref_dims.data(), ref.data()};
    kiln_compare_result result{};
    char* report = nullptr;
    EXPECT_KILN_OK(kiln_compare(prob, &expected, 1e-5, 1e-4, 0, &result, &report));
    EXPECT_EQ(result.mismatches, 0) << report;
    EXPECT_EQ(result.count, batch * 10);
    kiln_string_release(report);
    kiln_outputs_release(outputs);
  }
}

TEST_F(CApi, RunIntoWritesCallerBuffersBitForBitAsRun) {
  kiln_tensor in = input(3);
  size_t rank = 0;
  int64_t dims[4] = {};
  EXPECT_KILN_OK(kiln_session_output_dims(session_, &in, 1, 0, dims, 4, &rank));
  ASSERT_EQ(rank, 2u);
  EXPECT_EQ(dims[0], 3);
  EXPECT_EQ(dims[1], 10);
  std::vector<float> into(30, -1.0f);
  kiln_tensor out{KILN_F32, 2, dims, into.data()};
  EXPECT_KILN_OK(kiln_session_run_into(session_, &in, 1, &out, 1));
  kiln_outputs* outputs = nullptr;
  EXPECT_KILN_OK(kiln_session_run(session_, &in, 1, &outputs));
  EXPECT_EQ(std::memcmp(into.data(), kiln_outputs_get(outputs, 0)->data, 30 * sizeof(float)), 0);
  kiln_outputs_release(outputs);

  int64_t wrong_dims[2] = {2, 10};
  kiln_tensor wrong{KILN_F32, 2, wrong_dims, into.data()};
  kiln_status* status = kiln_session_run_into(session_, &in, 1, &wrong, 1);
  EXPECT_EQ(kiln_status_get_code(status), KILN_INVALID_ARGUMENT);
  EXPECT_THAT(message_of(status), HasSubstr("'prob'"));
  kiln_status* count = kiln_session_run_into(session_, &in, 1, &out, 0);
  EXPECT_THAT(message_of(count), HasSubstr("1 output(s)"));
  kiln_status* small_rank = kiln_session_output_dims(session_, &in, 1, 0, dims, 1, &rank);
  EXPECT_EQ(kiln_status_get_code(small_rank), KILN_OUT_OF_RANGE);
  kiln_status_release(small_rank);
}

TEST_F(CApi, UnalignedInputsAreCopiedAndGiveTheSameBits) {
  kiln_tensor in = input(1);
  kiln_outputs* aligned = nullptr;
  EXPECT_KILN_OK(kiln_session_run(session_, &in, 1, &aligned));
  std::vector<char> shifted(3 * 8 * 8 * sizeof(float) + 1);
  std::memcpy(shifted.data() + 1, input_.data(), shifted.size() - 1);
  in.data = shifted.data() + 1;
  kiln_outputs* unaligned = nullptr;
  EXPECT_KILN_OK(kiln_session_run(session_, &in, 1, &unaligned));
  EXPECT_EQ(std::memcmp(kiln_outputs_get(aligned, 0)->data, kiln_outputs_get(unaligned, 0)->data,
                        10 * sizeof(float)),
            0);
  kiln_outputs_release(aligned);
  kiln_outputs_release(unaligned);
}

TEST_F(CApi, BadInputsAreErrorsNamingTheInput) {
  kiln_outputs* outputs = nullptr;
  std::vector<int64_t> i64_data(3 * 8 * 8);
  int64_t dims4[4] = {1, 3, 8, 8};
  kiln_tensor wrong_dtype{KILN_I64, 4, dims4, i64_data.data()};
  EXPECT_THAT(message_of(kiln_session_run(session_, &wrong_dtype, 1, &outputs)),
              HasSubstr("'data'"));
  int64_t dims3[3] = {3, 8, 8};
  kiln_tensor wrong_rank{KILN_F32, 3, dims3, input_.data()};
  EXPECT_THAT(message_of(kiln_session_run(session_, &wrong_rank, 1, &outputs)),
              HasSubstr("'data'"));
  int64_t wrong_dims[4] = {1, 2, 8, 8};
  kiln_tensor wrong_dim{KILN_F32, 4, wrong_dims, input_.data()};
  EXPECT_THAT(message_of(kiln_session_run(session_, &wrong_dim, 1, &outputs)),
              HasSubstr("'data' dim 1"));
  kiln_tensor null_data{KILN_F32, 4, dims4, nullptr};
  EXPECT_THAT(message_of(kiln_session_run(session_, &null_data, 1, &outputs)),
              HasSubstr("input 0 'data': data is null"));
  int64_t negative[4] = {-1, 3, 8, 8};
  kiln_tensor negative_dim{KILN_F32, 4, negative, input_.data()};
  EXPECT_THAT(message_of(kiln_session_run(session_, &negative_dim, 1, &outputs)),
              HasSubstr("input 0 'data': dim 0 is negative"));
  kiln_tensor bad_code{static_cast<kiln_dtype>(77), 4, dims4, input_.data()};
  EXPECT_THAT(message_of(kiln_session_run(session_, &bad_code, 1, &outputs)),
              HasSubstr("unknown dtype code 77"));
  kiln_tensor in = input(1);
  kiln_tensor two[2] = {in, in};
  EXPECT_THAT(message_of(kiln_session_run(session_, two, 2, &outputs)),
              HasSubstr("takes 1 input(s) ('data'), got 2"));
  EXPECT_EQ(outputs, nullptr) << "no output on failure";
}

TEST(CApiBasics, UnknownDeviceListsTheDevices) {
  std::vector<char> onnx = read_bytes(kiln::testing::model_path("small/two_inputs.onnx"));
  kiln_bytes bytes{};
  EXPECT_KILN_OK(kiln_compile_memory(onnx.data(), onnx.size(), nullptr, &bytes));
  kiln_module* module = nullptr;
  EXPECT_KILN_OK(kiln_module_load_memory(bytes.data, bytes.size, nullptr, &module));
  kiln_bytes_release(&bytes);
  kiln_session_options options{"tpu", 0, 0};
  kiln_session* session = nullptr;
  kiln_status* status = kiln_session_create(module, &options, &session);
  EXPECT_THAT(message_of(status), HasSubstr("cpu"));
  EXPECT_EQ(session, nullptr);
  options = kiln_session_options{"cpu", -2, 0};
  EXPECT_THAT(message_of(kiln_session_create(module, &options, &session)), HasSubstr("-2"));
  kiln_module_release(module);
}

// The C API passes tensors only: a module with a sequence input or output is refused by name when
// the session is created (C++ programs run it through Session::run_values).
TEST(CApiBasics, SequenceValuedModulesAreRefusedByName) {
  std::vector<char> onnx =
      read_bytes("/usr/share/libonnx-testdata/data/node/test_identity_sequence/model.onnx");
  ASSERT_FALSE(onnx.empty());
  kiln_bytes bytes{};
  EXPECT_KILN_OK(kiln_compile_memory(onnx.data(), onnx.size(), nullptr, &bytes));
  kiln_module* module = nullptr;
  EXPECT_KILN_OK(kiln_module_load_memory(bytes.data, bytes.size, nullptr, &module));
  kiln_bytes_release(&bytes);
  kiln_session* session = nullptr;
  EXPECT_THAT(message_of(kiln_session_create(module, nullptr, &session)),
              HasSubstr("the module's input 'x' is a sequence; the C API takes and gives tensors"));
  EXPECT_EQ(session, nullptr);
  kiln_module_release(module);
}

TEST(CApiBasics, CompileFileBindsSymbolsAndReportsBadOptions) {
  const std::string dir = kiln::testing::make_temp_dir("c_api_compile");
  const std::string model = kiln::testing::model_path("small/tiny_cnn.onnx");
  const std::string out = dir + "/tiny_n2.kmod";
  const char* bind[] = {"N=2"};
  kiln_compile_options options{bind, 1, nullptr, 0};
  EXPECT_KILN_OK(kiln_compile_file(model.c_str(), out.c_str(), &options));
  kiln_module* module = nullptr;
  EXPECT_KILN_OK(kiln_module_load_file(out.c_str(), nullptr, &module));
  kiln_value_info info{};
  EXPECT_KILN_OK(kiln_module_input_info(module, 0, &info));
  EXPECT_EQ(info.dims[0], 2) << "N bound to 2";
  kiln_module_release(module);

  const char* bad_bind[] = {"N"};
  options.bind = bad_bind;
  EXPECT_THAT(message_of(kiln_compile_file(model.c_str(), out.c_str(), &options)),
              HasSubstr("'N'"));
  const std::string missing = dir + "/missing.onnx";
  const std::string nothing = dir + "/nothing.kmod";
  EXPECT_THAT(message_of(kiln_compile_file(missing.c_str(), nothing.c_str(), nullptr)),
              HasSubstr("missing.onnx"));
  EXPECT_FALSE(std::ifstream(nothing).good()) << "no partial output";
  const char junk[] = "definitely not protobuf";
  kiln_bytes bytes{};
  kiln_status* junk_status = kiln_compile_memory(junk, sizeof(junk), nullptr, &bytes);
  EXPECT_NE(junk_status, nullptr);
  EXPECT_EQ(bytes.data, nullptr) << "no output on failure";
  kiln_status_release(junk_status);
}

TEST(CApiCompare, NanAndInfNeverPassAndShapesMustAgree) {
  std::vector<float> actual{1.0f, NAN, INFINITY}, expected{1.0f, 2.0f, 3.0f};
  int64_t dims[1] = {3};
  kiln_tensor a{KILN_F32, 1, dims, actual.data()}, e{KILN_F32, 1, dims, expected.data()};
  kiln_compare_result result{};
  char* report = nullptr;
  EXPECT_KILN_OK(kiln_compare(&a, &e, 1e30, 1e30, 1, &result, &report));
  EXPECT_EQ(result.mismatches, 2);
  EXPECT_EQ(result.nan_mismatches, 1);
  EXPECT_EQ(result.inf_mismatches, 1);
  EXPECT_EQ(result.first_mismatch, 1);
  EXPECT_THAT(report, HasSubstr("FAIL"));
  kiln_string_release(report);
  int64_t other_dims[2] = {1, 3};
  kiln_tensor reshaped{KILN_F32, 2, other_dims, expected.data()};
  EXPECT_THAT(message_of(kiln_compare(&a, &reshaped, 0, 0, 0, &result, nullptr)),
              HasSubstr("cannot compare tensors"));
  EXPECT_THAT(message_of(kiln_compare(&e, &e, -1, 0, 0, &result, nullptr)), HasSubstr("atol"));
}

}  // namespace
