#include "kiln/tooling/tensor_file_codec.h"

#include <gtest/gtest.h>

#include "kiln/tooling/tensor_io.h"
#include "kiln/tooling/tensor_spec.h"
#include "tests/support/files.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using testing::TempDir;

// A stand-in for the CLI's TensorProto codec: ".tcodec" files hold one f32 written as text.
TensorFileCodec text_codec(std::string extension) {
  return {"text", std::move(extension),
          [](const std::string& path) -> StatusOr<Tensor> {
            std::string text = testing::read_plain_file(path);
            if (text.empty()) return data_loss("'{}' is empty", path);
            KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(DType::kF32, {1}));
            t.mutable_values<float>()[0] = std::stof(text);
            return t;
          },
          [](const std::string& path, const Tensor& tensor) {
            testing::write_plain_file(path, std::to_string(tensor.values<float>()[0]));
            return ok_status();
          }};
}

TEST(TensorFileCodec, RegisteredFormatsServeSpecsAndOutputs) {
  TempDir dir;
  EXPECT_EQ(find_tensor_file_codec("a.tcodec"), nullptr);
  EXPECT_FALSE(tensor_file_format("a.tcodec").ok());
  register_tensor_file_codec(text_codec(".tcodec"));
  ASSERT_NE(find_tensor_file_codec("dir/A.TCODEC"), nullptr);
  EXPECT_EQ(*tensor_file_format("a.tcodec"), TensorFileFormat::kCodec);

  testing::write_plain_file(dir.file("in.tcodec"), "2.5");
  auto tensor = parse_tensor_spec("@" + dir.file("in.tcodec"));
  ASSERT_TRUE(tensor.ok()) << tensor.status().to_string();
  EXPECT_EQ(tensor->values<float>()[0], 2.5f);
  // A typed spec must agree with what the file holds.
  auto typed = parse_tensor_spec("1xf32=@" + dir.file("in.tcodec"));
  EXPECT_TRUE(typed.ok());
  auto wrong = parse_tensor_spec("2xf32=@" + dir.file("in.tcodec"));
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("holds 1xf32"), std::string::npos)
      << wrong.status().to_string();

  auto out = parse_output_spec("@" + dir.file("out.tcodec"));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(out->format, TensorFileFormat::kCodec);
  ASSERT_TRUE(write_output(*out, *tensor, stdout).ok());
  EXPECT_EQ(testing::read_plain_file(dir.file("out.tcodec")).substr(0, 3), "2.5");
}

TEST(TensorFileCodec, UnregisteredPbStaysRefused) {
  TempDir dir;
  testing::write_plain_file(dir.file("in.pb"), "x");
  auto tensor = parse_tensor_spec("@" + dir.file("in.pb"));
  ASSERT_FALSE(tensor.ok());
  EXPECT_EQ(tensor.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(tensor.status().message().find("TensorProto"), std::string::npos);
}

}  // namespace
}  // namespace kiln
