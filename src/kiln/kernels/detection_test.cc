// NonMaxSuppression and RoiAlign kernels. Expected values are the ONNX backend test data's
// (onnx/backend/test/case/node/nonmaxsuppression.py, roialign.py) or worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/support/expect.h"
#include "tests/support/kernels/run_op.h"

namespace kiln::kernels {
namespace {

using namespace ::kiln::testing;  // NOLINT

// The six boxes of the ONNX NonMaxSuppression cases ([y1, x1, y2, x2]) and their scores.
const std::vector<double> kBoxes = {0.0, 0.0,  1.0, 1.0,  0.0, 0.1,   1.0, 1.1,
                                    0.0, -0.1, 1.0, 0.9,  0.0, 10.0,  1.0, 11.0,
                                    0.0, 10.1, 1.0, 11.1, 0.0, 100.0, 1.0, 101.0};
const std::vector<double> kScores = {0.9, 0.75, 0.6, 0.95, 0.5, 0.3};

// Runs NonMaxSuppression with every input a constant (the count is then known to infer).
StatusOr<std::vector<int64_t>> nms(const Tensor& boxes, const Tensor& scores, int64_t max_out,
                                   double iou, std::optional<double> score,
                                   const Attributes& a = {}) {
  std::vector<In> ins = {constant(boxes), constant(scores), constant(i64({1}, {max_out})),
                         constant(f32({1}, {iou}))};
  if (score) ins.push_back(constant(f32({1}, {*score})));
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> y, run_op("NonMaxSuppression", ins, a));
  if (y[0].rank() != 2 || y[0].shape()[1] != 3) return internal_error("bad output shape");
  return values_of<int64_t>(y[0]);
}

TEST(NonMaxSuppressionKernels, OnnxCases) {
  const Tensor boxes = f32({1, 6, 4}, kBoxes);
  const Tensor scores = f32({1, 1, 6}, kScores);
  // suppress_by_IOU, suppress_by_IOU_and_scores, limit_output_size.
  EXPECT_EQ(*nms(boxes, scores, 3, 0.5, 0.0), (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
  EXPECT_EQ(*nms(boxes, scores, 3, 0.5, 0.4), (std::vector<int64_t>{0, 0, 3, 0, 0, 0}));
  EXPECT_EQ(*nms(boxes, scores, 2, 0.5, 0.0), (std::vector<int64_t>{0, 0, 3, 0, 0, 0}));
  // flipped_coordinates.
  const Tensor flipped =
      f32({1, 6, 4}, {1.0, 1.0,  0.0, 0.0,  0.0, 0.1,  1.0, 1.1,  0.0, 0.9,   1.0, -0.1,
                      0.0, 10.0, 1.0, 11.0, 1.0, 10.1, 0.0, 11.1, 1.0, 101.0, 0.0, 100.0});
  EXPECT_EQ(*nms(flipped, scores, 3, 0.5, 0.0), (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
  // center_point_box_format.
  const Tensor centers =
      f32({1, 6, 4}, {0.5, 0.5,  1.0, 1.0, 0.5, 0.6,  1.0, 1.0, 0.5, 0.4,   1.0, 1.0,
                      0.5, 10.5, 1.0, 1.0, 0.5, 10.6, 1.0, 1.0, 0.5, 100.5, 1.0, 1.0});
  EXPECT_EQ(*nms(centers, scores, 3, 0.5, 0.0, attrs({{"center_point_box", int64_t{1}}})),
            (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
  // two_classes (max 2 per class) and two_batches.
  const Tensor two_classes =
      f32({1, 2, 6}, {0.9, 0.75, 0.6, 0.95, 0.5, 0.3, 0.9, 0.75, 0.6, 0.95, 0.5, 0.3});
  EXPECT_EQ(*nms(boxes, two_classes, 2, 0.5, 0.0),
            (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 1, 3, 0, 1, 0}));
  std::vector<double> two_boxes = kBoxes, two_scores = kScores;
  two_boxes.insert(two_boxes.end(), kBoxes.begin(), kBoxes.end());
  two_scores.insert(two_scores.end(), kScores.begin(), kScores.end());
  EXPECT_EQ(*nms(f32({2, 6, 4}, two_boxes), f32({2, 1, 6}, two_scores), 2, 0.5, 0.0),
            (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 1, 0, 3, 1, 0, 0}));
}

TEST(NonMaxSuppressionKernels, TiesKeepTheLowerIndexAndNoThresholdKeepsAll) {
  // identical_boxes: ten equal boxes, equal scores: the first is kept.
  std::vector<double> same;
  for (int i = 0; i < 10; ++i) same.insert(same.end(), {0.0, 0.0, 1.0, 1.0});
  EXPECT_EQ(*nms(f32({1, 10, 4}, same), f32({1, 1, 10}, std::vector<double>(10, 0.9)), 3, 0.5, 0.0),
            (std::vector<int64_t>{0, 0, 0}));
  // Disjoint boxes with equal scores come out in index order; without a score threshold a
  // negative score is kept; a limit of 0 selects nothing.
  const Tensor apart = f32({1, 3, 4}, {0, 0, 1, 1, 0, 2, 1, 3, 0, 4, 1, 5});
  const Tensor scores = f32({1, 1, 3}, {0.5, -1, 0.5});
  EXPECT_EQ(*nms(apart, scores, 5, 0.5, std::nullopt),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 2, 0, 0, 1}));
  EXPECT_EQ(*nms(apart, scores, 0, 0.5, std::nullopt), (std::vector<int64_t>{}));
  // A NaN score ranks first; score_threshold keeps scores strictly above it.
  const Tensor nan_scores = f32({1, 1, 3}, {0.5, NAN, 0.25});
  EXPECT_EQ(*nms(apart, nan_scores, 5, 0.5, 0.25), (std::vector<int64_t>{0, 0, 1, 0, 0, 0}));
}

TEST(NonMaxSuppressionKernels, CountIsADataDependentSize) {
  const OpDef* op = find_op_def("NonMaxSuppression");
  ASSERT_NE(op, nullptr);
  ASSERT_NE(op->data_sizes, nullptr);
  // Symbolic batch and box count: the row count is a fresh size.
  const Attributes none;
  InferArgs args{none, {}, {}, 1, {}, {}, {}, {}};
  args.inputs = {type(DType::kF32, {sym("B"), sym("N"), 4}),
                 type(DType::kF32, {sym("B"), 80, sym("N")}), type(DType::kI64, {1}),
                 type(DType::kF32, {}), type(DType::kF32, {1})};
  args.constants.resize(5, nullptr);
  args.data_dim = [](size_t i) -> StatusOr<DimExpr> {
    return DimExpr::symbol(fmt::format("d{}", i));
  };
  ASSERT_TRUE(op->infer(args).ok());
  EXPECT_EQ(args.outputs[0].dtype, DType::kI64);
  EXPECT_EQ(args.outputs[0].shape, (Shape{sym("d0"), 3}));
  // Without anyone to bind it, a clear refusal.
  auto unknown =
      infer_op("NonMaxSuppression", {type(DType::kF32, {1, 6, 4}), type(DType::kF32, {1, 1, 6})});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(error_of(unknown), "depends on the data")) << error_of(unknown);
  // data_sizes counts the selection.
  auto sizes =
      op->data_sizes({}, std::vector<Tensor>{f32({1, 6, 4}, kBoxes), f32({1, 1, 6}, kScores),
                                             i64({1}, {3}), f32({1}, {0.5}), f32({1}, {0.4})});
  ASSERT_TRUE(sizes.ok()) << sizes.status().to_string();
  EXPECT_EQ(*sizes, (std::vector<int64_t>{2}));
  auto bad_iou =
      op->data_sizes({}, std::vector<Tensor>{f32({1, 6, 4}, kBoxes), f32({1, 1, 6}, kScores),
                                             i64({1}, {3}), f32({1}, {1.5})});
  EXPECT_TRUE(contains(error_of(bad_iou), "input 3 'iou_threshold' = 1.5 is outside [0, 1]"))
      << error_of(bad_iou);
}

TEST(NonMaxSuppressionKernels, RejectsBadInput) {
  auto rank =
      infer_op("NonMaxSuppression", {type(DType::kF32, {6, 4}), type(DType::kF32, {1, 1, 6})});
  EXPECT_TRUE(contains(error_of(rank), "input 0 'boxes' must have rank 3")) << error_of(rank);
  auto corners =
      infer_op("NonMaxSuppression", {type(DType::kF32, {1, 6, 5}), type(DType::kF32, {1, 1, 6})});
  EXPECT_TRUE(contains(error_of(corners), "input 0 'boxes' dim 2")) << error_of(corners);
  auto count =
      infer_op("NonMaxSuppression", {type(DType::kF32, {1, 6, 4}), type(DType::kF32, {1, 1, 5})});
  EXPECT_TRUE(contains(error_of(count), "input 1 'scores' dim 2")) << error_of(count);
  auto dtype = infer_op(
      "NonMaxSuppression",
      {type(DType::kF32, {1, 6, 4}), type(DType::kF32, {1, 1, 6}), type(DType::kI32, {1})});
  EXPECT_TRUE(contains(error_of(dtype), "input 2 'max_output_boxes_per_class' must have dtype"))
      << error_of(dtype);
  auto two =
      infer_op("NonMaxSuppression", {type(DType::kF32, {1, 6, 4}), type(DType::kF32, {1, 1, 6}),
                                     type(DType::kI64, {1}), type(DType::kF32, {2})});
  EXPECT_TRUE(contains(error_of(two), "input 3 'iou_threshold' must hold one value"))
      << error_of(two);
  auto flag =
      infer_op("NonMaxSuppression", {type(DType::kF32, {1, 6, 4}), type(DType::kF32, {1, 1, 6})},
               attrs({{"center_point_box", int64_t{2}}}));
  EXPECT_TRUE(contains(error_of(flag), "'center_point_box' must be 0 or 1")) << error_of(flag);
}

// The ONNX RoiAlign cases' feature map (1x1x10x10).
const std::vector<double> kRoiMap = {
    0.2764, 0.7150, 0.1958, 0.3416, 0.4638, 0.0259, 0.2963, 0.6518, 0.4856, 0.7250, 0.9637, 0.0895,
    0.2919, 0.6753, 0.0234, 0.6132, 0.8085, 0.5324, 0.8992, 0.4467, 0.3265, 0.8479, 0.9698, 0.2471,
    0.9336, 0.1878, 0.4766, 0.4308, 0.3400, 0.2162, 0.0206, 0.1720, 0.2155, 0.4394, 0.0653, 0.3406,
    0.7724, 0.3921, 0.2541, 0.5799, 0.4062, 0.2194, 0.4473, 0.4687, 0.7109, 0.9327, 0.9815, 0.6320,
    0.1728, 0.6119, 0.3097, 0.1283, 0.4984, 0.5068, 0.4279, 0.0173, 0.4388, 0.0430, 0.4671, 0.7119,
    0.1011, 0.8477, 0.4726, 0.1777, 0.9923, 0.4042, 0.1869, 0.7795, 0.9946, 0.9689, 0.1366, 0.3671,
    0.7011, 0.6234, 0.9867, 0.5585, 0.6985, 0.5609, 0.8788, 0.9928, 0.5697, 0.8511, 0.6711, 0.9406,
    0.8751, 0.7496, 0.1650, 0.1049, 0.1559, 0.2514, 0.7012, 0.4056, 0.7879, 0.3461, 0.0415, 0.2998,
    0.5094, 0.3727, 0.5482, 0.0502};

TEST(RoiAlignKernels, OnnxCases) {
  const Tensor x = f32({1, 1, 10, 10}, kRoiMap);
  const Tensor rois = f32({2, 4}, {0, 5, 4, 9, 5, 5, 9, 9});
  const Tensor batch = i64({2}, {0, 0});
  auto run = [&](const char* mode) {
    return run_op("RoiAlign", {value(x), value(rois), value(batch)},
                  attrs({{"spatial_scale", 1.0},
                         {"output_height", int64_t{5}},
                         {"output_width", int64_t{5}},
                         {"sampling_ratio", int64_t{2}},
                         {"coordinate_transformation_mode", std::string(mode)}}));
  };
  // roialign_aligned_false (rois 1 and 2).
  auto y = run("output_half_pixel");
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close((*y)[0], {2, 1, 5, 5},
               {0.3022, 0.4305, 0.4696, 0.3978, 0.5423, 0.3656, 0.7050, 0.5165, 0.3172, 0.7015,
                0.2912, 0.5059, 0.6476, 0.6235, 0.8299, 0.5916, 0.7389, 0.7048, 0.8372, 0.8893,
                0.6227, 0.6153, 0.7097, 0.6154, 0.4585, 0.2384, 0.3379, 0.3717, 0.6100, 0.7601,
                0.3767, 0.3785, 0.7147, 0.9243, 0.9727, 0.5749, 0.5826, 0.5709, 0.7619, 0.8770,
                0.5355, 0.2566, 0.2141, 0.2796, 0.3600, 0.4365, 0.3504, 0.2887, 0.3661, 0.2349},
               1e-4);
  // roialign_aligned_true.
  auto z = run("half_pixel");
  ASSERT_TRUE(z.ok()) << z.status().to_string();
  expect_close((*z)[0], {2, 1, 5, 5},
               {0.3070, 0.2187, 0.3337, 0.4880, 0.4870, 0.1871, 0.4914, 0.5561, 0.4192, 0.3686,
                0.1433, 0.4608, 0.5971, 0.5310, 0.4982, 0.2788, 0.4386, 0.6022, 0.7000, 0.7524,
                0.5774, 0.7024, 0.7251, 0.7338, 0.8163, 0.2393, 0.4075, 0.3379, 0.2525, 0.4743,
                0.3671, 0.2702, 0.4105, 0.6419, 0.8308, 0.5556, 0.4543, 0.5564, 0.7502, 0.9300,
                0.6626, 0.5617, 0.4813, 0.4954, 0.6663, 0.6636, 0.3721, 0.2056, 0.1928, 0.2478},
               1e-4);
}

TEST(RoiAlignKernels, MaxModeAndAdaptiveSampling) {
  // One sample at (0.5, 0.5) of [[1, 2], [3, 4]]: corner terms 0.25, 0.5, 0.75, 1.
  const Tensor x = f64({1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor roi = f64({1, 4}, {0, 0, 1, 1});
  const Tensor batch = i64({1}, {0});
  auto run = [&](const char* mode, int64_t ratio) {
    auto y = run_op("RoiAlign", {value(x), value(roi), value(batch)},
                    attrs({{"mode", std::string(mode)},
                           {"sampling_ratio", ratio},
                           {"coordinate_transformation_mode", std::string("output_half_pixel")}}));
    EXPECT_TRUE(y.ok()) << y.status().to_string();
    return y.ok() ? values_of<double>((*y)[0]) : std::vector<double>{};
  };
  EXPECT_EQ(run("max", 1), (std::vector<double>{1.0}));
  EXPECT_EQ(run("avg", 1), (std::vector<double>{2.5}));
  // Adaptive (ratio 0): ceil(1 / 1) = 1 sample per axis, the same.
  EXPECT_EQ(run("avg", 0), (std::vector<double>{2.5}));
  // A NaN region gives NaN.
  auto nan_roi = run_op("RoiAlign", {value(x), value(f64({1, 4}, {NAN, 0, 1, 1})), value(batch)});
  ASSERT_TRUE(nan_roi.ok());
  EXPECT_TRUE(std::isnan(values_of<double>((*nan_roi)[0])[0]));
  // A map with no pixels samples nothing: 0.
  auto empty = run_op("RoiAlign", {value(f64({1, 1, 0, 2}, {})), value(roi), value(batch)});
  ASSERT_TRUE(empty.ok()) << empty.status().to_string();
  EXPECT_EQ(values_of<double>((*empty)[0]), (std::vector<double>{0.0}));
}

TEST(RoiAlignKernels, SymbolicShapesAndBadInput) {
  auto t = infer_op("RoiAlign",
                    {type(DType::kF16, {sym("N"), 256, sym("H"), sym("W")}),
                     type(DType::kF16, {sym("R"), 4}), type(DType::kI64, {sym("R")})},
                    attrs({{"output_height", int64_t{7}}, {"output_width", int64_t{3}}}));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)[0].shape, (Shape{sym("R"), 256, 7, 3}));
  EXPECT_EQ((*t)[0].dtype, DType::kF16);

  auto out_of_range = run_op("RoiAlign", {value(f32({1, 1, 2, 2}, {1, 2, 3, 4})),
                                          value(f32({1, 4}, {0, 0, 1, 1})), value(i64({1}, {1}))});
  EXPECT_TRUE(contains(error_of(out_of_range),
                       "input 2 'batch_indices' element 0 = 1 is out of range [0, 0]"))
      << error_of(out_of_range);
  auto rois = infer_op("RoiAlign", {type(DType::kF32, {1, 1, 2, 2}), type(DType::kF32, {3, 5}),
                                    type(DType::kI64, {3})});
  EXPECT_TRUE(contains(error_of(rois), "input 1 'rois' dim 1")) << error_of(rois);
  auto count = infer_op("RoiAlign", {type(DType::kF32, {1, 1, 2, 2}), type(DType::kF32, {3, 4}),
                                     type(DType::kI64, {2})});
  EXPECT_TRUE(contains(error_of(count), "input 2 'batch_indices' dim 0")) << error_of(count);
  auto mode =
      infer_op("RoiAlign",
               {type(DType::kF32, {1, 1, 2, 2}), type(DType::kF32, {3, 4}), type(DType::kI64, {3})},
               attrs({{"mode", std::string("median")}}));
  EXPECT_TRUE(contains(error_of(mode), "attribute 'mode' must be 'avg' or 'max'"))
      << error_of(mode);
  auto size =
      infer_op("RoiAlign",
               {type(DType::kF32, {1, 1, 2, 2}), type(DType::kF32, {3, 4}), type(DType::kI64, {3})},
               attrs({{"output_height", int64_t{0}}}));
  EXPECT_TRUE(contains(error_of(size), "must be >= 1")) << error_of(size);
  auto dtype = infer_op("RoiAlign", {type(DType::kF32, {1, 1, 2, 2}), type(DType::kF64, {3, 4}),
                                     type(DType::kI64, {3})});
  EXPECT_TRUE(contains(error_of(dtype), "input 1 'rois' must have dtype f32")) << error_of(dtype);
}

}  // namespace
}  // namespace kiln::kernels
