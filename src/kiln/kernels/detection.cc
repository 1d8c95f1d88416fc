// Object detection ops: NonMaxSuppression and RoiAlign.
//
// NonMaxSuppression (opset 11+) selects, per batch and class, boxes in order of score
// (descending; equal scores keep the lower box index first, a stable sort, as ONNX Runtime does),
// dropping a box whose IoU with an already selected box of that class exceeds iou_threshold and,
// when score_threshold is given, a box whose score is not above it. Its output [count, 3] holds
// (batch, class, box) rows, batch-major then class, each class in selection order. The count
// depends on the data: a number when every input is a constant, otherwise a size the runtime
// binds before the node runs (InferArgs::data_dim, OpDef::data_sizes). A NaN score ranks above
// every number (as TopK's); a box with a NaN coordinate suppresses nothing and is never
// suppressed. Boxes and scores are read as double, so f32 data and the f64 reference select alike.
//
// RoiAlign (opset 16) average- or max-pools bilinear samples of each region of interest, with
// ONNX Runtime's sampling (regular grid per bin, adaptive when sampling_ratio is 0, samples more
// than one pixel outside the map count as zero, at most 4096 samples per axis and bin) and its max
// mode (the largest weighted corner term over the samples of a bin).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "kiln/kernels/dtype_dispatch.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"

namespace kiln::kernels {
namespace {

// ---------------------------------------------------------------------------------------------
// NonMaxSuppression

constexpr size_t kBoxes = 0, kScores = 1, kMaxOutput = 2, kIouThreshold = 3, kScoreThreshold = 4;

StatusOr<bool> read_center_point_box(const Attributes& a) {
  KILN_ASSIGN_OR_RETURN(int64_t v, a.get_int("center_point_box", 0));
  if (v != 0 && v != 1) {
    return invalid_argument("attribute 'center_point_box' must be 0 or 1, got {}", v);
  }
  return v == 1;
}

// The inputs of one NonMaxSuppression run, read from plain tensors.
struct NmsProblem {
  bool center_point_box = false;
  int64_t batches = 0, classes = 0, boxes = 0;
  const Tensor* box_data = nullptr;    // [batches, boxes, 4]
  const Tensor* score_data = nullptr;  // [batches, classes, boxes]
  int64_t max_per_class = 0;
  double iou_threshold = 0;
  std::optional<double> score_threshold;
};

// The single value of optional scalar input `index` (nullopt: absent or empty); an error when it
// holds more than one.
StatusOr<std::optional<double>> scalar_input(std::span<const Tensor> inputs, size_t index,
                                             std::string_view name) {
  if (index >= inputs.size() || inputs[index].empty_storage() ||
      inputs[index].element_count() == 0) {
    return std::optional<double>();
  }
  if (inputs[index].element_count() != 1) {
    return invalid_argument("{} must hold one value, got {}", input_label(index, name),
                            inputs[index].element_count());
  }
  return std::optional<double>(element_as_double(inputs[index], 0));
}

StatusOr<NmsProblem> read_nms(const Attributes& attributes, std::span<const Tensor> inputs) {
  if (inputs.size() < 2) {
    return invalid_argument("NonMaxSuppression needs inputs 0 'boxes' and 1 'scores'");
  }
  NmsProblem p;
  KILN_ASSIGN_OR_RETURN(p.center_point_box, read_center_point_box(attributes));
  const Tensor& boxes = inputs[kBoxes];
  const Tensor& scores = inputs[kScores];
  if (boxes.rank() != 3 || scores.rank() != 3 || boxes.shape()[2] != 4 ||
      boxes.shape()[0] != scores.shape()[0] || boxes.shape()[1] != scores.shape()[2]) {
    return invalid_argument(
        "input 0 'boxes' [{}] and input 1 'scores' [{}] must be [B, N, 4] and [B, C, N]",
        fmt::join(boxes.shape(), ", "), fmt::join(scores.shape(), ", "));
  }
  p.batches = boxes.shape()[0];
  p.boxes = boxes.shape()[1];
  p.classes = scores.shape()[1];
  p.box_data = &boxes;
  p.score_data = &scores;
  if (kMaxOutput < inputs.size() && !inputs[kMaxOutput].empty_storage() &&
      inputs[kMaxOutput].element_count() > 0) {
    if (inputs[kMaxOutput].element_count() != 1) {
      return invalid_argument("{} must hold one value, got {}",
                              input_label(kMaxOutput, "max_output_boxes_per_class"),
                              inputs[kMaxOutput].element_count());
    }
    // A negative limit selects nothing, like 0 (ONNX Runtime).
    p.max_per_class = std::max<int64_t>(element_as_int64(inputs[kMaxOutput], 0), 0);
  }
  KILN_ASSIGN_OR_RETURN(auto iou, scalar_input(inputs, kIouThreshold, "iou_threshold"));
  p.iou_threshold = iou.value_or(0.0);
  if (!(p.iou_threshold >= 0 && p.iou_threshold <= 1)) {
    return invalid_argument("{} = {} is outside [0, 1]",
                            input_label(kIouThreshold, "iou_threshold"), p.iou_threshold);
  }
  KILN_ASSIGN_OR_RETURN(p.score_threshold,
                        scalar_input(inputs, kScoreThreshold, "score_threshold"));
  return p;
}

// A box as corners, y1 <= y2 and x1 <= x2 (flipped corners are reordered).
struct Corners {
  double y1, x1, y2, x2;
};

Corners corners_of(const Tensor& boxes, int64_t offset, bool center_point_box) {
  const double a = element_as_double(boxes, offset), b = element_as_double(boxes, offset + 1),
               c = element_as_double(boxes, offset + 2), d = element_as_double(boxes, offset + 3);
  if (center_point_box) {  // [x_center, y_center, width, height]
    return Corners{b - d / 2, a - c / 2, b + d / 2, a + c / 2};
  }
  return Corners{std::min(a, c), std::min(b, d), std::max(a, c), std::max(b, d)};
}

// Whether IoU(a, b) > threshold; false when either box is empty (or has a NaN coordinate).
bool overlaps(const Corners& a, const Corners& b, double threshold) {
  const double iy1 = std::max(a.y1, b.y1), ix1 = std::max(a.x1, b.x1);
  const double iy2 = std::min(a.y2, b.y2), ix2 = std::min(a.x2, b.x2);
  const double intersection = std::max(iy2 - iy1, 0.0) * std::max(ix2 - ix1, 0.0);
  if (!(intersection > 0)) return false;
  const double area_a = (a.y2 - a.y1) * (a.x2 - a.x1);
  const double area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
  const double union_area = area_a + area_b - intersection;
  if (!(area_a > 0) || !(area_b > 0) || !(union_area > 0)) return false;
  return intersection / union_area > threshold;
}

// The selected (batch, class, box) triples in output order.
std::vector<std::array<int64_t, 3>> select_boxes(const NmsProblem& p) {
  std::vector<std::array<int64_t, 3>> selected;
  if (p.max_per_class == 0) return selected;
  std::vector<Corners> corners(static_cast<size_t>(p.boxes));
  std::vector<int64_t> order;
  std::vector<double> score(static_cast<size_t>(p.boxes));
  std::vector<int64_t> kept;
  for (int64_t b = 0; b < p.batches; ++b) {
    for (int64_t i = 0; i < p.boxes; ++i) {
      corners[i] = corners_of(*p.box_data, (b * p.boxes + i) * 4, p.center_point_box);
    }
    for (int64_t c = 0; c < p.classes; ++c) {
      order.clear();
      for (int64_t i = 0; i < p.boxes; ++i) {
        score[i] = element_as_double(*p.score_data, (b * p.classes + c) * p.boxes + i);
        if (!p.score_threshold || score[i] > *p.score_threshold || std::isnan(score[i])) {
          order.push_back(i);
        }
      }
      // Descending score, NaN first; stable, so equal scores keep the lower index first.
      std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) {
        const double sl = score[l], sr = score[r];
        if (std::isnan(sr)) return false;
        return std::isnan(sl) || sl > sr;
      });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= p.max_per_class) break;
        const bool suppressed = std::any_of(kept.begin(), kept.end(), [&](int64_t k) {
          return overlaps(corners[k], corners[i], p.iou_threshold);
        });
        if (!suppressed) kept.push_back(i);
      }
      for (int64_t i : kept) selected.push_back({b, c, i});
    }
  }
  return selected;
}

StatusOr<std::vector<int64_t>> nms_sizes(const Attributes& attributes,
                                         std::span<const Tensor> inputs) {
  KILN_ASSIGN_OR_RETURN(NmsProblem p, read_nms(attributes, inputs));
  return std::vector<int64_t>{static_cast<int64_t>(select_boxes(p).size())};
}

Status check_scalar_input(const InferArgs& args, size_t index, std::string_view name,
                          std::span<const DType> dtypes) {
  const ValueType* t = optional_input(args, index);
  if (t == nullptr) return ok_status();
  KILN_RETURN_IF_ERROR(check_dtype(*t, index, name, dtypes));
  KILN_RETURN_IF_ERROR(check_rank_range(*t, index, name, 0, 1));
  if (t->shape.size() == 1) {
    if (auto n = t->shape[0].constant_value(); n && *n > 1) {
      return invalid_argument("{} must hold one value, got {}", input_label(index, name), *n);
    }
  }
  return ok_status();
}

Status infer_nms(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(args.attributes, {"center_point_box"}));
  KILN_RETURN_IF_ERROR(read_center_point_box(args.attributes).status());
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 5));
  KILN_ASSIGN_OR_RETURN(ValueType boxes, required_input(args, kBoxes, "boxes"));
  KILN_ASSIGN_OR_RETURN(ValueType scores, required_input(args, kScores, "scores"));
  KILN_RETURN_IF_ERROR(check_dtype(boxes, kBoxes, "boxes", float_dtypes()));
  KILN_RETURN_IF_ERROR(
      check_same_dtype(scores, kScores, "scores", boxes.dtype, input_label(kBoxes, "boxes")));
  KILN_RETURN_IF_ERROR(check_rank(boxes, kBoxes, "boxes", 3));
  KILN_RETURN_IF_ERROR(check_rank(scores, kScores, "scores", 3));
  KILN_RETURN_IF_ERROR(check_dims_equal(boxes.shape[2], DimExpr(4), "input 0 'boxes' dim 2"));
  KILN_RETURN_IF_ERROR(check_dims_equal(scores.shape[0], boxes.shape[0],
                                        "input 1 'scores' dim 0 (the batch of 'boxes')"));
  KILN_RETURN_IF_ERROR(check_dims_equal(scores.shape[2], boxes.shape[1],
                                        "input 1 'scores' dim 2 (the box count of 'boxes')"));
  const DType i64[] = {DType::kI64};
  KILN_RETURN_IF_ERROR(check_scalar_input(args, kMaxOutput, "max_output_boxes_per_class", i64));
  KILN_RETURN_IF_ERROR(check_scalar_input(args, kIouThreshold, "iou_threshold", float_dtypes()));
  KILN_RETURN_IF_ERROR(
      check_scalar_input(args, kScoreThreshold, "score_threshold", float_dtypes()));

  // The count: computed here when every given input is a constant.
  std::vector<Tensor> constants(args.inputs.size());
  bool all_constant = true;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    if (!args.inputs[i]) continue;
    if (const Tensor* t = constant_input(args, i)) {
      constants[i] = *t;
    } else {
      all_constant = false;
    }
  }
  DimExpr count;
  if (all_constant) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, nms_sizes(args.attributes, constants));
    count = DimExpr(sizes[0]);
  } else if (args.data_dim) {
    KILN_ASSIGN_OR_RETURN(count, args.data_dim(0));
  } else {
    return unimplemented(
        "the output size depends on the data of input 0 'boxes' and input 1 'scores', which "
        "must be constants here");
  }
  args.outputs = {ValueType{DType::kI64, Shape{std::move(count), DimExpr(3)}}};
  return ok_status();
}

// Wraps a kernel's input buffer as a tensor (no copy) for the code shared with data_sizes; an
// absent input (null data, no dims) stays a default tensor.
Tensor borrow_input(const ConstBuffer& b) {
  if (b.data == nullptr && b.dims.empty()) return Tensor();
  return Tensor::borrow(b.dtype, ConcreteShape(b.dims.begin(), b.dims.end()), b.data, nullptr);
}

class NmsKernel : public Kernel {
 public:
  NmsKernel(const Attributes& attributes, int64_t count) : attributes_(attributes), count_(count) {}
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    std::vector<Tensor> inputs;
    for (const ConstBuffer& b : in) inputs.push_back(borrow_input(b));
    KILN_ASSIGN_OR_RETURN(NmsProblem p, read_nms(attributes_, inputs));
    const std::vector<std::array<int64_t, 3>> selected = select_boxes(p);
    if (static_cast<int64_t>(selected.size()) != count_) {
      return invalid_argument("{} boxes are selected where the compiled output holds {}",
                              selected.size(), count_);
    }
    int64_t* y = out[0].as<int64_t>();
    for (size_t i = 0; i < selected.size(); ++i) {
      std::copy(selected[i].begin(), selected[i].end(), y + 3 * i);
    }
    return ok_status();
  }

 private:
  Attributes attributes_;
  int64_t count_;
};

StatusOr<std::unique_ptr<Kernel>> make_nms(const MakeArgs& args) {
  return std::unique_ptr<Kernel>(
      std::make_unique<NmsKernel>(args.attributes, args.output_dims(0)[0]));
}

// ---------------------------------------------------------------------------------------------
// RoiAlign

constexpr size_t kRoiX = 0, kRois = 1, kBatchIndices = 2;

struct RoiAlignParams {
  bool half_pixel = true;
  bool max_mode = false;
  int64_t output_height = 1, output_width = 1;
  int64_t sampling_ratio = 0;
  double spatial_scale = 1;
};

StatusOr<RoiAlignParams> read_roi_align(const Attributes& a) {
  RoiAlignParams p;
  KILN_ASSIGN_OR_RETURN(std::string coord,
                        a.get_string("coordinate_transformation_mode", "half_pixel"));
  if (coord != "half_pixel" && coord != "output_half_pixel") {
    return invalid_argument(
        "attribute 'coordinate_transformation_mode' must be 'half_pixel' or "
        "'output_half_pixel', got '{}'",
        coord);
  }
  p.half_pixel = coord == "half_pixel";
  KILN_ASSIGN_OR_RETURN(std::string mode, a.get_string("mode", "avg"));
  if (mode != "avg" && mode != "max") {
    return invalid_argument("attribute 'mode' must be 'avg' or 'max', got '{}'", mode);
  }
  p.max_mode = mode == "max";
  KILN_ASSIGN_OR_RETURN(p.output_height, a.get_int("output_height", 1));
  KILN_ASSIGN_OR_RETURN(p.output_width, a.get_int("output_width", 1));
  if (p.output_height < 1 || p.output_width < 1) {
    return invalid_argument(
        "attributes 'output_height' and 'output_width' must be >= 1, got {} "
        "and {}",
        p.output_height, p.output_width);
  }
  KILN_ASSIGN_OR_RETURN(p.sampling_ratio, a.get_int("sampling_ratio", 0));
  if (p.sampling_ratio < 0) {
    return invalid_argument("attribute 'sampling_ratio' must be >= 0, got {}", p.sampling_ratio);
  }
  KILN_ASSIGN_OR_RETURN(p.spatial_scale, a.get_float("spatial_scale", 1.0));
  return p;
}

Status infer_roi_align(InferArgs& args) {
  KILN_RETURN_IF_ERROR(check_known_attributes(
      args.attributes, {"coordinate_transformation_mode", "mode", "output_height", "output_width",
                        "sampling_ratio", "spatial_scale"}));
  KILN_ASSIGN_OR_RETURN(RoiAlignParams p, read_roi_align(args.attributes));
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 3));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, kRoiX, "X"));
  KILN_ASSIGN_OR_RETURN(ValueType rois, required_input(args, kRois, "rois"));
  KILN_ASSIGN_OR_RETURN(ValueType batch, required_input(args, kBatchIndices, "batch_indices"));
  KILN_RETURN_IF_ERROR(check_dtype(x, kRoiX, "X", float_dtypes()));
  KILN_RETURN_IF_ERROR(check_same_dtype(rois, kRois, "rois", x.dtype, input_label(kRoiX, "X")));
  KILN_RETURN_IF_ERROR(check_dtype(batch, kBatchIndices, "batch_indices", {DType::kI64}));
  KILN_RETURN_IF_ERROR(check_rank(x, kRoiX, "X", 4));
  KILN_RETURN_IF_ERROR(check_rank(rois, kRois, "rois", 2));
  KILN_RETURN_IF_ERROR(check_rank(batch, kBatchIndices, "batch_indices", 1));
  KILN_RETURN_IF_ERROR(check_dims_equal(rois.shape[1], DimExpr(4), "input 1 'rois' dim 1"));
  KILN_RETURN_IF_ERROR(check_dims_equal(batch.shape[0], rois.shape[0],
                                        "input 2 'batch_indices' dim 0 (the roi count of 'rois')"));
  args.outputs = {ValueType{x.dtype, Shape{rois.shape[0], x.shape[1], DimExpr(p.output_height),
                                           DimExpr(p.output_width)}}};
  return ok_status();
}

// One bilinear sample: four pixel offsets and weights (all weights 0 outside the map).
struct Sample {
  std::array<int64_t, 4> pos{};
  std::array<double, 4> weight{};
  bool inside = false;
};

Sample bilinear_sample(double y, double x, int64_t height, int64_t width) {
  Sample s;
  if (height <= 0 || width <= 0 || y < -1.0 || y > static_cast<double>(height) || x < -1.0 ||
      x > static_cast<double>(width) || std::isnan(y) || std::isnan(x)) {
    return s;
  }
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  auto y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x);
  int64_t y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<double>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<double>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const double ly = y - static_cast<double>(y_low), lx = x - static_cast<double>(x_low);
  const double hy = 1 - ly, hx = 1 - lx;
  s.pos = {y_low * width + x_low, y_low * width + x_high, y_high * width + x_low,
           y_high * width + x_high};
  s.weight = {hy * hx, hy * lx, ly * hx, ly * lx};
  s.inside = true;
  return s;
}

// max that keeps a NaN from either side.
double nan_max(double a, double b) { return std::isnan(a) || a >= b ? a : b; }

class RoiAlignKernel : public Kernel {
 public:
  RoiAlignKernel(RoiAlignParams p, ConcreteShape x_dims, int64_t rois)
      : p_(p), x_dims_(std::move(x_dims)), rois_(rois) {}

 private:
  template <typename T>
  void compute(const T* x, const T* rois, const int64_t* batch, T* y) const {
    const int64_t channels = x_dims_[1], height = x_dims_[2], width = x_dims_[3];
    const int64_t oh = p_.output_height, ow = p_.output_width;
    const double offset = p_.half_pixel ? 0.5 : 0.0;
    parallel_for(rois_ * channels, [&](int64_t rc) {
      const int64_t r = rc / channels, c = rc % channels;
      const double start_w = static_cast<double>(load(rois, r * 4)) * p_.spatial_scale - offset;
      const double start_h = static_cast<double>(load(rois, r * 4 + 1)) * p_.spatial_scale - offset;
      const double end_w = static_cast<double>(load(rois, r * 4 + 2)) * p_.spatial_scale - offset;
      const double end_h = static_cast<double>(load(rois, r * 4 + 3)) * p_.spatial_scale - offset;
      double roi_w = end_w - start_w, roi_h = end_h - start_h;
      if (!p_.half_pixel) {  // output_half_pixel: regions at least one pixel wide
        roi_w = std::max(roi_w, 1.0);
        roi_h = std::max(roi_h, 1.0);
      }
      const double bin_h = roi_h / static_cast<double>(oh), bin_w = roi_w / static_cast<double>(ow);
      const int64_t grid_h = p_.sampling_ratio > 0 ? p_.sampling_ratio : adaptive_grid(bin_h);
      const int64_t grid_w = p_.sampling_ratio > 0 ? p_.sampling_ratio : adaptive_grid(bin_w);
      const double count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
      const T* plane = x + (batch[r] * channels + c) * height * width;
      T* dst = y + rc * oh * ow;
      if (std::isnan(start_w + start_h + end_w + end_h)) {  // a NaN region: NaN output
        for (int64_t i = 0; i < oh * ow; ++i) {
          store(dst, i, static_cast<compute_t<T>>(std::numeric_limits<double>::quiet_NaN()));
        }
        return;
      }
      for (int64_t ph = 0; ph < oh; ++ph) {
        for (int64_t pw = 0; pw < ow; ++pw) {
          double sum = 0;
          bool first = true;
          for (int64_t iy = 0; iy < grid_h; ++iy) {
            const double yy = start_h + static_cast<double>(ph) * bin_h +
                              (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(grid_h);
            for (int64_t ix = 0; ix < grid_w; ++ix) {
              const double xx =
                  start_w + static_cast<double>(pw) * bin_w +
                  (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(grid_w);
              const Sample s = bilinear_sample(yy, xx, height, width);
              if (p_.max_mode) {
                double v = 0;
                if (s.inside) {
                  v = s.weight[0] * static_cast<double>(load(plane, s.pos[0]));
                  for (int k = 1; k < 4; ++k) {
                    v = nan_max(v, s.weight[k] * static_cast<double>(load(plane, s.pos[k])));
                  }
                }
                sum = first ? v : nan_max(sum, v);
                first = false;
              } else if (s.inside) {
                for (int k = 0; k < 4; ++k) {
                  sum += s.weight[k] * static_cast<double>(load(plane, s.pos[k]));
                }
              }
            }
          }
          const double v = p_.max_mode ? sum : sum / count;
          store(dst, ph * ow + pw, static_cast<compute_t<T>>(v));
        }
      }
    });
  }

  // ceil(bin size) samples per bin along an axis (ONNX Runtime's adaptive grid), at most
  // kMaxAdaptiveGrid so that a huge region cannot make a run take forever.
  static int64_t adaptive_grid(double bin) {
    if (!(bin > 0)) return 0;
    return static_cast<int64_t>(std::ceil(std::min(bin, kMaxAdaptiveGrid)));
  }
  static constexpr double kMaxAdaptiveGrid = 4096;

  RoiAlignParams p_;
  ConcreteShape x_dims_;
  int64_t rois_;

 public:
  // After the member templates it instantiates: clang instantiates them from a generic lambda
  // only when their definitions come first.
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    const int64_t batches = x_dims_[0];
    for (int64_t r = 0; r < rois_; ++r) {
      const int64_t b = in[kBatchIndices].as<int64_t>()[r];
      if (b < 0 || b >= batches) {
        return invalid_argument("input 2 'batch_indices' element {} = {} is out of range [0, {}]",
                                r, b, batches - 1);
      }
    }
    return visit_dtype(in[kRoiX].dtype, [&]<typename T>() -> Status {
      if constexpr (is_float_storage_v<T>) {
        compute<T>(in[kRoiX].as<T>(), in[kRois].as<T>(), in[kBatchIndices].as<int64_t>(),
                   out[0].as<T>());
        return ok_status();
      } else {
        return internal_error("RoiAlign has no {} instance", dtype_name(in[kRoiX].dtype));
      }
    });
  }
};

StatusOr<std::unique_ptr<Kernel>> make_roi_align(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(RoiAlignParams p, read_roi_align(args.attributes));
  return std::unique_ptr<Kernel>(
      std::make_unique<RoiAlignKernel>(p, args.input_dims(kRoiX), args.input_dims(kRois)[0]));
}

double roi_align_multiply_adds(const Attributes&, std::span<const ConcreteShape* const>,
                               std::span<const ConcreteShape* const> out) {
  const ConcreteShape* y = dims_at(out, 0);
  return y == nullptr ? 0 : 4 * product_as_double(*y);
}

}  // namespace

void register_detection_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{.op_type = "NonMaxSuppression",
                        .infer = infer_nms,
                        .make = make_nms,
                        .data_sizes = nms_sizes,
                        .since_version = 11});
  table.push_back(OpDef{.op_type = "RoiAlign",
                        .infer = infer_roi_align,
                        .make = make_roi_align,
                        .since_version = 16,
                        .multiply_adds = roi_align_multiply_adds});
}

}  // namespace kiln::kernels
