// TfIdfVectorizer. The TF counts are the ONNX backend test data's
// (onnx/backend/test/case/node/tfidfvectorizer.py); the IDF and TFIDF values, and the permuted
// ngram_indexes, are derived from those counts by hand.
#include <gtest/gtest.h>

#include "tests/support/expect.h"
#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT

// Unigrams 2, 3, 5, 4 and bigrams (5, 6), (7, 8), (6, 7), ONNX's example pool.
Attributes pool_attrs(const std::string& mode, int64_t min_gram, int64_t max_gram, int64_t skip,
                      std::vector<int64_t> indexes = {0, 1, 2, 3, 4, 5, 6}) {
  return attrs({{"mode", mode},
                {"min_gram_length", min_gram},
                {"max_gram_length", max_gram},
                {"max_skip_count", skip},
                {"ngram_counts", std::vector<int64_t>{0, 4}},
                {"ngram_indexes", std::move(indexes)},
                {"pool_int64s", std::vector<int64_t>{2, 3, 5, 4, 5, 6, 7, 8, 6, 7}}});
}

Tensor sequence() { return i32({12}, {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8}); }

TEST(TfIdfVectorizerKernels, OnnxCases) {
  auto uni_and_bi = run_one("TfIdfVectorizer", {sequence()}, pool_attrs("TF", 1, 2, 5));
  ASSERT_TRUE(uni_and_bi.ok()) << uni_and_bi.status().to_string();
  expect_close(*uni_and_bi, {7}, {0, 3, 1, 0, 1, 3, 1}, 0, 0);
  auto bigrams = run_one("TfIdfVectorizer", {sequence()}, pool_attrs("TF", 2, 2, 0));
  ASSERT_TRUE(bigrams.ok()) << bigrams.status().to_string();
  expect_close(*bigrams, {7}, {0, 0, 0, 0, 1, 1, 1}, 0, 0);
  // Batch [N, C], int64.
  auto batch = run_one("TfIdfVectorizer", {i64({2, 6}, {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8})},
                       pool_attrs("TF", 2, 2, 5));
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  expect_close(*batch, {2, 7}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}, 0, 0);
}

TEST(TfIdfVectorizerKernels, ModesWeightsAndIndexes) {
  const std::vector<double> weights = {0.5, 1, 2, 3, 4, 5, 6};
  Attributes idf = pool_attrs("IDF", 1, 2, 5);
  idf.set("weights", weights);
  auto y = run_one("TfIdfVectorizer", {sequence()}, idf);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close(*y, {7}, {0, 1, 2, 0, 4, 5, 6}, 0, 0);
  Attributes tfidf = pool_attrs("TFIDF", 1, 2, 5);
  tfidf.set("weights", weights);
  auto z = run_one("TfIdfVectorizer", {sequence()}, tfidf);
  ASSERT_TRUE(z.ok()) << z.status().to_string();
  expect_close(*z, {7}, {0, 3, 2, 0, 4, 15, 6}, 0, 0);
  // IDF without weights: presence.
  auto presence = run_one("TfIdfVectorizer", {sequence()}, pool_attrs("IDF", 1, 2, 5));
  ASSERT_TRUE(presence.ok()) << presence.status().to_string();
  expect_close(*presence, {7}, {0, 1, 1, 0, 1, 1, 1}, 0, 0);
  // The j-th n-gram counts into slot ngram_indexes[j]; a slot no n-gram names stays 0.
  auto reversed =
      run_one("TfIdfVectorizer", {sequence()}, pool_attrs("TF", 1, 2, 5, {6, 5, 4, 3, 2, 1, 0}));
  ASSERT_TRUE(reversed.ok()) << reversed.status().to_string();
  expect_close(*reversed, {7}, {1, 3, 1, 0, 1, 3, 0}, 0, 0);
  auto wide =
      run_one("TfIdfVectorizer", {sequence()}, pool_attrs("TF", 1, 2, 5, {0, 1, 2, 3, 4, 5, 8}));
  ASSERT_TRUE(wide.ok()) << wide.status().to_string();
  expect_close(*wide, {9}, {0, 3, 1, 0, 1, 3, 0, 0, 1}, 0, 0);
  // Skip 2 on [94, 17, 36, 12, 28] (ONNX's text): the bigrams (94, 12) and (17, 28), plus the
  // contiguous ones at skip 0 and the skip-1 ones.
  Attributes spec = attrs({{"mode", std::string("TF")},
                           {"min_gram_length", int64_t{2}},
                           {"max_gram_length", int64_t{2}},
                           {"max_skip_count", int64_t{2}},
                           {"ngram_counts", std::vector<int64_t>{0, 0}},
                           {"ngram_indexes", std::vector<int64_t>{0, 1, 2, 3}},
                           {"pool_int64s", std::vector<int64_t>{94, 12, 17, 28, 94, 17, 12, 94}}});
  auto skips = run_one("TfIdfVectorizer", {i64({5}, {94, 17, 36, 12, 28})}, spec);
  ASSERT_TRUE(skips.ok()) << skips.status().to_string();
  expect_close(*skips, {4}, {1, 1, 1, 0}, 0, 0);
}

TEST(TfIdfVectorizerKernels, SymbolicShapesAndBadInput) {
  auto t = infer_op("TfIdfVectorizer", {type(DType::kI64, {sym("N"), sym("C")})},
                    pool_attrs("TF", 1, 2, 0));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)[0].dtype, DType::kF32);
  EXPECT_EQ((*t)[0].shape, (Shape{sym("N"), 7}));
  auto one =
      infer_op("TfIdfVectorizer", {type(DType::kI32, {sym("C")})}, pool_attrs("TF", 1, 2, 0));
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_EQ((*one)[0].shape, (Shape{7}));

  const ValueType x = type(DType::kI64, {4});
  auto strings = infer_op("TfIdfVectorizer", {x},
                          attrs({{"mode", std::string("TF")},
                                 {"min_gram_length", int64_t{1}},
                                 {"max_gram_length", int64_t{1}},
                                 {"max_skip_count", int64_t{0}},
                                 {"ngram_counts", std::vector<int64_t>{0}},
                                 {"ngram_indexes", std::vector<int64_t>{0}},
                                 {"pool_strings", std::vector<std::string>{"a"}}}));
  EXPECT_TRUE(contains(error_of(strings), "attribute 'pool_strings': kiln has no string tensors"))
      << error_of(strings);
  auto dtype = infer_op("TfIdfVectorizer", {type(DType::kF32, {4})}, pool_attrs("TF", 1, 2, 0));
  EXPECT_TRUE(contains(error_of(dtype), "input 0 'X' must have dtype i32 or i64"))
      << error_of(dtype);
  auto rank =
      infer_op("TfIdfVectorizer", {type(DType::kI64, {1, 2, 3})}, pool_attrs("TF", 1, 2, 0));
  EXPECT_TRUE(contains(error_of(rank), "input 0 'X'")) << error_of(rank);
  auto mode = infer_op("TfIdfVectorizer", {x}, pool_attrs("BM25", 1, 2, 0));
  EXPECT_TRUE(contains(error_of(mode), "attribute 'mode' must be \"TF\", \"IDF\" or \"TFIDF\""))
      << error_of(mode);
  auto lengths = infer_op("TfIdfVectorizer", {x}, pool_attrs("TF", 2, 1, 0));
  EXPECT_TRUE(contains(error_of(lengths), "'min_gram_length' 2 and 'max_gram_length' 1"))
      << error_of(lengths);
  auto skip = infer_op("TfIdfVectorizer", {x}, pool_attrs("TF", 1, 2, -1));
  EXPECT_TRUE(contains(error_of(skip), "attribute 'max_skip_count' must be >= 0, got -1"))
      << error_of(skip);
  auto indexes = infer_op("TfIdfVectorizer", {x}, pool_attrs("TF", 1, 2, 0, {0, 1}));
  EXPECT_TRUE(contains(error_of(indexes),
                       "attribute 'ngram_indexes' must have one value per n-gram of the pool (7), "
                       "got 2"))
      << error_of(indexes);
  auto negative =
      infer_op("TfIdfVectorizer", {x}, pool_attrs("TF", 1, 2, 0, {0, 1, 2, 3, 4, 5, -1}));
  EXPECT_TRUE(contains(error_of(negative), "'ngram_indexes' element 6 = -1 is out of range"))
      << error_of(negative);
  Attributes odd = pool_attrs("TF", 1, 2, 0);
  odd.set("ngram_counts", std::vector<int64_t>{0, 5});
  auto split = infer_op("TfIdfVectorizer", {x}, odd);
  EXPECT_TRUE(contains(error_of(split), "the 2-grams span 5 pool values, not a multiple of 2"))
      << error_of(split);
  Attributes twice = pool_attrs("TF", 1, 2, 0);
  twice.set("pool_int64s", std::vector<int64_t>{2, 3, 2, 4, 5, 6, 7, 8, 6, 7});
  auto duplicate = infer_op("TfIdfVectorizer", {x}, twice);
  EXPECT_TRUE(contains(error_of(duplicate), "the 1-gram at pool index 2 appears twice"))
      << error_of(duplicate);
  Attributes short_weights = pool_attrs("TFIDF", 1, 2, 0);
  short_weights.set("weights", std::vector<double>{1, 2});
  auto weights = infer_op("TfIdfVectorizer", {x}, short_weights);
  EXPECT_TRUE(contains(error_of(weights), "attribute 'weights' must have one value per n-gram (7)"))
      << error_of(weights);
  auto missing = infer_op("TfIdfVectorizer", {x}, attrs({{"mode", std::string("TF")}}));
  EXPECT_TRUE(contains(error_of(missing), "attribute 'min_gram_length' is required"))
      << error_of(missing);
}

}  // namespace
}  // namespace kiln::kernels
