// ONNX backend node tests (Debian's libonnx-testdata) run through kiln's shape inference and
// reference evaluation. Each listed case must infer the expected output shapes and match the
// expected outputs; a second run makes dim 0 of every runtime input a symbol "N" and must either
// give bit-identical results or refuse with Unimplemented (never a different answer).
// Cases are skipped when the test data is not installed.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "tests/support/expect.h"
#include "tests/support/graph_eval/onnx_test_reader.h"
#include "tests/support/graph_eval/op_graph.h"

namespace kiln::graph_eval {
namespace {

namespace fs = std::filesystem;
using testing::has_error;

const char* const kDataDir = "/usr/share/libonnx-testdata/data/node";

const char* const kPassing[] = {
    "test_add",
    "test_add_bcast",
    "test_add_uint8",
    "test_sub",
    "test_sub_bcast",
    "test_sub_example",
    "test_mul",
    "test_mul_bcast",
    "test_mul_example",
    "test_div",
    "test_div_bcast",
    "test_div_example",
    "test_sum_example",
    "test_sum_one_input",
    "test_sum_two_inputs",
    "test_relu",
    "test_averagepool_1d_default",
    "test_averagepool_2d_ceil",
    "test_averagepool_2d_default",
    "test_averagepool_2d_pads",
    "test_averagepool_2d_pads_count_include_pad",
    "test_averagepool_2d_precomputed_pads",
    "test_averagepool_2d_precomputed_pads_count_include_pad",
    "test_averagepool_2d_precomputed_same_upper",
    "test_averagepool_2d_precomputed_strides",
    "test_averagepool_2d_same_lower",
    "test_averagepool_2d_same_upper",
    "test_averagepool_2d_strides",
    "test_averagepool_3d_default",
    "test_maxpool_1d_default",
    "test_maxpool_2d_ceil",
    "test_maxpool_2d_default",
    "test_maxpool_2d_dilations",
    "test_maxpool_2d_pads",
    "test_maxpool_2d_precomputed_pads",
    "test_maxpool_2d_precomputed_same_upper",
    "test_maxpool_2d_precomputed_strides",
    "test_maxpool_2d_same_lower",
    "test_maxpool_2d_same_upper",
    "test_maxpool_2d_strides",
    "test_maxpool_3d_default",
    "test_maxpool_2d_uint8",
    "test_maxpool_with_argmax_2d_precomputed_pads",
    "test_maxpool_with_argmax_2d_precomputed_strides",
    "test_globalmaxpool",
    "test_globalmaxpool_precomputed",
    "test_basic_convinteger",
    "test_convinteger_with_padding",
    "test_convinteger_without_padding",
    "test_convtranspose",
    "test_convtranspose_1d",
    "test_convtranspose_3d",
    "test_convtranspose_autopad_same",
    "test_convtranspose_dilations",
    "test_convtranspose_kernel_shape",
    "test_convtranspose_output_shape",
    "test_convtranspose_pad",
    "test_convtranspose_pads",
    "test_convtranspose_with_kernel",
    "test_einsum_batch_diagonal",
    "test_einsum_batch_matmul",
    "test_einsum_inner_prod",
    "test_einsum_sum",
    "test_einsum_transpose",
    "test_matmulinteger",
    "test_globalaveragepool",
    "test_globalaveragepool_precomputed",
    "test_basic_conv_with_padding",
    "test_basic_conv_without_padding",
    "test_conv_with_autopad_same",
    "test_conv_with_strides_and_asymmetric_padding",
    "test_conv_with_strides_no_padding",
    "test_conv_with_strides_padding",
    "test_batchnorm_epsilon",
    "test_batchnorm_example",
    "test_dropout_default",
    "test_dropout_default_mask",
    "test_dropout_default_mask_ratio",
    "test_dropout_default_old",
    "test_dropout_default_ratio",
    "test_dropout_random_old",
    "test_flatten_axis0",
    "test_flatten_axis1",
    "test_flatten_axis2",
    "test_flatten_axis3",
    "test_flatten_default_axis",
    "test_flatten_negative_axis1",
    "test_flatten_negative_axis2",
    "test_flatten_negative_axis3",
    "test_flatten_negative_axis4",
    "test_gemm_all_attributes",
    "test_gemm_alpha",
    "test_gemm_beta",
    "test_gemm_default_matrix_bias",
    "test_gemm_default_no_bias",
    "test_gemm_default_scalar_bias",
    "test_gemm_default_single_elem_vector_bias",
    "test_gemm_default_vector_bias",
    "test_gemm_default_zero_bias",
    "test_gemm_transposeA",
    "test_gemm_transposeB",
    "test_identity",
    "test_matmul_2d",
    "test_matmul_3d",
    "test_matmul_4d",
    "test_reshape_allowzero_reordered",
    "test_reshape_extended_dims",
    "test_reshape_negative_dim",
    "test_reshape_negative_extended_dims",
    "test_reshape_one_dim",
    "test_reshape_reduced_dims",
    "test_reshape_reordered_all_dims",
    "test_reshape_reordered_last_dims",
    "test_reshape_zero_and_negative_dim",
    "test_reshape_zero_dim",
    "test_softmax_axis_0",
    "test_softmax_axis_1",
    "test_softmax_axis_2",
    "test_softmax_default_axis",
    "test_softmax_example",
    "test_softmax_large_number",
    "test_softmax_negative_axis",
    "test_lstm_defaults",
    "test_lstm_with_initial_bias",
    "test_lstm_with_peepholes",
    "test_lstm_batchwise",
    "test_gru_defaults",
    "test_gru_with_initial_bias",
    "test_gru_seq_length",
    "test_gru_batchwise",
    "test_rnn_seq_length",
    "test_simple_rnn_defaults",
    "test_simple_rnn_with_initial_bias",
    "test_simple_rnn_batchwise",
    "test_batchnorm_example_training_mode",
    "test_batchnorm_epsilon_training_mode",
    "test_training_dropout_zero_ratio",
    "test_training_dropout_zero_ratio_mask",
    "test_tfidfvectorizer_tf_uniandbigrams_skip5",
    "test_tfidfvectorizer_tf_batch_onlybigrams_skip5",
};

// Valid models that kiln refuses, with the code it must give.
const std::pair<const char*, StatusCode> kRefused[] = {
    {"test_bernoulli_seed", StatusCode::kUnimplemented},
};

struct Loaded {
  testing::OnnxTestModel model;
  std::vector<Tensor> inputs;    // runtime inputs, in graph order
  std::vector<Tensor> expected;  // outputs
};

// Reads a case; integer runtime inputs (Reshape's shape) become constants, as the importer's
// constant folding would make them.
StatusOr<Loaded> load(const std::string& name, bool symbolic_batch) {
  fs::path dir = fs::path(kDataDir) / name;
  Loaded out;
  KILN_ASSIGN_OR_RETURN(out.model, testing::read_onnx_test_model((dir / "model.onnx").string()));
  ir::Graph& g = out.model.graph;
  std::vector<ir::ValueId> kept;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    ir::ValueId id = g.inputs()[i];
    KILN_ASSIGN_OR_RETURN(Tensor t,
                          testing::read_tensor_file(
                              (dir / "test_data_set_0" / fmt::format("input_{}.pb", i)).string()));
    ir::Value& v = g.value(id);
    if (t.dtype() == DType::kI64 || (t.dtype() == DType::kBool && v.shape.empty())) {
      v.constant = t;
      v.shape = shape_from_concrete(t.shape());
      continue;
    }
    // Give every runtime input its test shape (some models leave dims unknown).
    v.shape = shape_from_concrete(t.shape());
    // The symbolic batch covers the inputs that share the first input's dim 0.
    if (symbolic_batch && !v.shape.empty() &&
        (out.inputs.empty() ||
         (!out.inputs[0].shape().empty() && out.inputs[0].shape()[0] == t.shape()[0]))) {
      v.shape[0] = DimExpr::symbol("N");
    }
    kept.push_back(id);
    out.inputs.push_back(t);
  }
  g.mutable_inputs() = kept;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Tensor t,
                          testing::read_tensor_file(
                              (dir / "test_data_set_0" / fmt::format("output_{}.pb", i)).string()));
    out.expected.push_back(t);
  }
  return out;
}

class NodeConformance : public ::testing::TestWithParam<const char*> {};

TEST_P(NodeConformance, MatchesExpectedOutputs) {
  std::string name = GetParam();
  if (!fs::exists(fs::path(kDataDir) / name)) GTEST_SKIP() << "no test data for " << name;
  auto loaded = load(name, false);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  ir::Graph& g = loaded->model.graph;
  Status inferred = infer_graph(g);
  ASSERT_TRUE(inferred.ok()) << inferred.to_string();
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const ir::Value& v = g.value(g.outputs()[i]);
    EXPECT_EQ(shape_to_string(v.shape), shape_to_string(loaded->expected[i].shape())) << i;
    EXPECT_EQ(v.dtype, loaded->expected[i].dtype()) << i;
  }
  auto out = evaluate_graph(g, loaded->inputs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out->size(), loaded->expected.size());
  for (size_t i = 0; i < out->size(); ++i) {
    testing::expect_close((*out)[i], loaded->expected[i].shape(),
                          testing::values_of(loaded->expected[i]), 1e-5, 1e-4);
  }

  // Same case with a symbolic batch: one path for static and dynamic.
  auto dynamic = load(name, true);
  ASSERT_TRUE(dynamic.ok());
  Status dyn_inferred = infer_graph(dynamic->model.graph);
  if (!dyn_inferred.ok()) {
    EXPECT_EQ(dyn_inferred.code(), StatusCode::kUnimplemented) << dyn_inferred.to_string();
    return;
  }
  auto dyn_out = evaluate_graph(dynamic->model.graph, dynamic->inputs);
  ASSERT_TRUE(dyn_out.ok()) << dyn_out.status().to_string();
  for (size_t i = 0; i < out->size(); ++i) {
    const Tensor& a = (*out)[i];
    const Tensor& b = (*dyn_out)[i];
    ASSERT_EQ(a.shape(), b.shape());
    ASSERT_EQ(a.byte_size(), b.byte_size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.byte_size()), 0) << "output " << i;
    const Shape& symbolic = dynamic->model.graph.value(dynamic->model.graph.outputs()[i]).shape;
    Bindings bindings{{"N", dynamic->inputs.empty() || dynamic->inputs[0].shape().empty()
                                ? 0
                                : dynamic->inputs[0].shape()[0]}};
    auto dims = evaluate_shape(symbolic, bindings);
    ASSERT_TRUE(dims.ok()) << dims.status().to_string();
    EXPECT_EQ(*dims, a.shape()) << shape_to_string(symbolic);
  }
}

INSTANTIATE_TEST_SUITE_P(Onnx, NodeConformance, ::testing::ValuesIn(kPassing),
                         [](const auto& info) { return std::string(info.param); });

class NodeRefused : public ::testing::TestWithParam<std::pair<const char*, StatusCode>> {};

TEST_P(NodeRefused, GivesAClearError) {
  auto [name, code] = GetParam();
  if (!fs::exists(fs::path(kDataDir) / name)) GTEST_SKIP() << "no test data for " << name;
  auto loaded = load(name, false);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  Status status = infer_graph(loaded->model.graph);
  if (status.ok()) status = evaluate_graph(loaded->model.graph, loaded->inputs).status();
  EXPECT_TRUE(has_error(status, code, {"in node"}));
}

INSTANTIATE_TEST_SUITE_P(Onnx, NodeRefused, ::testing::ValuesIn(kRefused),
                         [](const auto& info) { return std::string(info.param.first); });

}  // namespace
}  // namespace kiln::graph_eval
