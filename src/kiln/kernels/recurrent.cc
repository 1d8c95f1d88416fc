// Recurrent layers: LSTM, GRU and RNN (ONNX opset 14 semantics, which the importer upgrades older
// models to).
//
// Inputs X, W, R, B, sequence_lens, initial_h (and for LSTM initial_c, P); outputs Y, Y_h (and
// for LSTM Y_c), each optional. Gates are stacked in W, R and B in the ONNX order: LSTM i, o, f, c;
// GRU z, r, h; RNN one. `layout` 0 is time major (X [seq, batch, input], Y [seq, dirs, batch,
// hidden], states [dirs, batch, hidden]); 1 is batch major (X [batch, seq, input], Y [batch, seq,
// dirs, hidden], states [batch, dirs, hidden]). hidden_size comes from the attribute or, when it is
// absent, from R's last dim; seq and batch may be symbols.
//
// sequence_lens (int32, one per batch entry, each in [0, seq]): a batch entry runs its first
// len steps (a reverse direction runs len - 1 down to 0); Y is 0 at the steps past its length,
// and Y_h / Y_c hold the state after its last step, 0 for a length of 0 (as ONNX Runtime does).
// `clip` bounds every gate's input to the activation function (after the bias and the peephole);
// activations follow the list the spec gives (Relu, Tanh, Sigmoid, Affine, LeakyRelu,
// ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus; names are case-insensitive),
// one list per direction, or one list that both directions of a bidirectional layer share.
// activation_alpha and activation_beta are consumed in order by the functions that take them;
// a function past the end of the list takes its ONNX operator's default.
//
// The kernel computes in the compute type (float for f16): the input projection X W^T of every
// step as one matrix product before the time loop, then per step the recurrent product H R^T over
// the batch. Each element of a product is one sum over the inner dim in increasing order, so a
// batch entry's result does not depend on the batch size, the thread count or the split. A backend
// may supply faster f32 products with the same guarantee (recurrent.h; the CPU backend's AVX2
// gemm kernel).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <memory>
#include <optional>

#include "kiln/kernels/dtype_dispatch.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/recurrent.h"
#include "kiln/kernels/reduce_geometry.h"

namespace kiln::kernels {
namespace {

enum class Cell { kRnn, kGru, kLstm };

int64_t gate_count(Cell cell) { return cell == Cell::kLstm ? 4 : (cell == Cell::kGru ? 3 : 1); }
size_t activations_per_direction(Cell cell) {
  return cell == Cell::kLstm ? 3 : (cell == Cell::kGru ? 2 : 1);
}
std::string_view cell_name(Cell cell) {
  return cell == Cell::kLstm ? "LSTM" : (cell == Cell::kGru ? "GRU" : "RNN");
}

// ---- Activations

enum class Act {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus
};

struct ActInfo {
  std::string_view name;  // lower case
  Act act;
  bool takes_alpha, takes_beta;
  double alpha, beta;  // defaults (those of the ONNX operator of the same name)
};

constexpr std::array kActInfos = {
    ActInfo{"relu", Act::kRelu, false, false, 0, 0},
    ActInfo{"tanh", Act::kTanh, false, false, 0, 0},
    ActInfo{"sigmoid", Act::kSigmoid, false, false, 0, 0},
    ActInfo{"affine", Act::kAffine, true, true, 1.0, 0.0},
    ActInfo{"leakyrelu", Act::kLeakyRelu, true, false, 0.01, 0},
    ActInfo{"thresholdedrelu", Act::kThresholdedRelu, true, false, 1.0, 0},
    ActInfo{"scaledtanh", Act::kScaledTanh, true, true, 1.0, 1.0},
    ActInfo{"hardsigmoid", Act::kHardSigmoid, true, true, 0.2, 0.5},
    ActInfo{"elu", Act::kElu, true, false, 1.0, 0},
    ActInfo{"softsign", Act::kSoftsign, false, false, 0, 0},
    ActInfo{"softplus", Act::kSoftplus, false, false, 0, 0},
};

struct Activation {
  Act act = Act::kTanh;
  double alpha = 0, beta = 0;

  // NaN stays NaN except for ThresholdedRelu, whose ONNX definition gives 0 (like kiln's op).
  template <typename C>
  C operator()(C x) const {
    const C a = static_cast<C>(alpha);
    const C b = static_cast<C>(beta);
    switch (act) {
      case Act::kRelu: return x < C(0) ? C(0) : x;
      case Act::kTanh: return std::tanh(x);
      case Act::kSigmoid: return C(1) / (C(1) + std::exp(-x));
      case Act::kAffine: return a * x + b;
      case Act::kLeakyRelu: return x >= C(0) ? x : a * x;
      case Act::kThresholdedRelu: return x > a ? x : C(0);
      case Act::kScaledTanh: return a * std::tanh(b * x);
      case Act::kHardSigmoid: {
        const C v = a * x + b;
        return v < C(0) ? C(0) : (v > C(1) ? C(1) : v);
      }
      case Act::kElu: return x >= C(0) ? x : a * (std::exp(x) - C(1));
      case Act::kSoftsign: return x / (C(1) + std::fabs(x));
      case Act::kSoftplus: return (x > C(0) ? x : C(0)) + std::log1p(std::exp(-std::fabs(x)));
    }
    return x;
  }
};

// ---- Attributes

struct RecurrentAttributes {
  Cell cell = Cell::kRnn;
  int64_t directions = 1;
  bool reverse = false;  // direction "reverse" (one direction)
  std::optional<int64_t> hidden_size;
  // directions * activations_per_direction(cell): direction d's functions start at d * per.
  std::vector<Activation> activations;
  std::optional<double> clip;
  bool input_forget = false;         // LSTM
  bool linear_before_reset = false;  // GRU
  int64_t layout = 0;
};

constexpr int64_t kMaxHiddenSize = int64_t{1} << 40;

StatusOr<bool> read_flag(const Attributes& a, const char* name) {
  KILN_ASSIGN_OR_RETURN(int64_t v, a.get_int(name, 0));
  if (v != 0 && v != 1) return invalid_argument("attribute '{}' must be 0 or 1, got {}", name, v);
  return v == 1;
}

StatusOr<std::vector<std::string>> read_strings(const Attributes& a, const std::string& name) {
  auto it = a.all().find(name);
  if (it == a.all().end()) return std::vector<std::string>{};
  if (const auto* list = std::get_if<std::vector<std::string>>(&it->second)) return *list;
  // A list of one string may arrive as a single string.
  if (const auto* one = std::get_if<std::string>(&it->second)) return std::vector{*one};
  return invalid_argument("attribute '{}' must be a list of strings", name);
}

StatusOr<std::vector<Activation>> read_activations(const Attributes& a, Cell cell,
                                                   int64_t directions) {
  const size_t per = activations_per_direction(cell);
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> names, read_strings(a, "activations"));
  if (names.empty()) {
    if (cell == Cell::kLstm) names = {"Sigmoid", "Tanh", "Tanh"};
    if (cell == Cell::kGru) names = {"Sigmoid", "Tanh"};
    if (cell == Cell::kRnn) names = {"Tanh"};
  }
  const auto dirs = static_cast<size_t>(directions);
  if (names.size() != per && names.size() != per * dirs) {
    return invalid_argument(
        "attribute 'activations' must list {} functions per direction ({} for {} direction{}), "
        "got {}",
        per, per * dirs, dirs, dirs == 1 ? "" : "s", names.size());
  }
  KILN_ASSIGN_OR_RETURN(std::vector<double> alphas, a.get_floats("activation_alpha", {}));
  KILN_ASSIGN_OR_RETURN(std::vector<double> betas, a.get_floats("activation_beta", {}));
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> out;
  for (size_t i = 0; i < names.size(); ++i) {
    std::string lower = names[i];
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const ActInfo* info = nullptr;
    for (const ActInfo& candidate : kActInfos) {
      if (candidate.name == lower) info = &candidate;
    }
    if (info == nullptr) {
      return invalid_argument(
          "attribute 'activations' element {} '{}' is not an activation {} "
          "defines",
          i, names[i], cell_name(cell));
    }
    Activation act{info->act, info->alpha, info->beta};
    if (info->takes_alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (info->takes_beta && next_beta < betas.size()) act.beta = betas[next_beta++];
    out.push_back(act);
  }
  // One list shared by both directions.
  if (out.size() == per && dirs == 2) out.insert(out.end(), out.begin(), out.end());
  return out;
}

StatusOr<RecurrentAttributes> read_recurrent_attributes(const Attributes& a, Cell cell) {
  if (cell == Cell::kLstm) {
    KILN_RETURN_IF_ERROR(
        check_known_attributes(a, {"activation_alpha", "activation_beta", "activations", "clip",
                                   "direction", "hidden_size", "layout", "input_forget"}));
  } else if (cell == Cell::kGru) {
    KILN_RETURN_IF_ERROR(
        check_known_attributes(a, {"activation_alpha", "activation_beta", "activations", "clip",
                                   "direction", "hidden_size", "layout", "linear_before_reset"}));
  } else {
    KILN_RETURN_IF_ERROR(
        check_known_attributes(a, {"activation_alpha", "activation_beta", "activations", "clip",
                                   "direction", "hidden_size", "layout"}));
  }
  RecurrentAttributes p;
  p.cell = cell;
  KILN_ASSIGN_OR_RETURN(std::string direction, a.get_string("direction", "forward"));
  if (direction == "bidirectional") {
    p.directions = 2;
  } else if (direction == "reverse") {
    p.reverse = true;
  } else if (direction != "forward") {
    return invalid_argument(
        "attribute 'direction' must be 'forward', 'reverse' or 'bidirectional', got '{}'",
        direction);
  }
  if (a.has("hidden_size")) {
    KILN_ASSIGN_OR_RETURN(int64_t h, a.get_int("hidden_size", 0));
    // The bound keeps 8 * hidden_size (LSTM's B) far from overflow.
    if (h < 1 || h > kMaxHiddenSize) {
      return invalid_argument("attribute 'hidden_size' must be in [1, {}], got {}", kMaxHiddenSize,
                              h);
    }
    p.hidden_size = h;
  }
  KILN_ASSIGN_OR_RETURN(p.activations, read_activations(a, cell, p.directions));
  if (a.has("clip")) {
    KILN_ASSIGN_OR_RETURN(double clip, a.get_float("clip", 0));
    if (!(clip > 0)) return invalid_argument("attribute 'clip' must be > 0, got {}", clip);
    p.clip = clip;
  }
  KILN_ASSIGN_OR_RETURN(p.layout, a.get_int("layout", 0));
  if (p.layout != 0 && p.layout != 1) {
    return invalid_argument("attribute 'layout' must be 0 or 1, got {}", p.layout);
  }
  if (cell == Cell::kLstm) {
    KILN_ASSIGN_OR_RETURN(p.input_forget, read_flag(a, "input_forget"));
  }
  if (cell == Cell::kGru) {
    KILN_ASSIGN_OR_RETURN(p.linear_before_reset, read_flag(a, "linear_before_reset"));
  }
  return p;
}

// ---- Shape rule

constexpr size_t kX = 0, kW = 1, kR = 2, kB = 3, kSeqLens = 4, kInitialH = 5, kInitialC = 6, kP = 7;

Status check_dims(const ValueType& v, size_t index, std::string_view name,
                  std::initializer_list<std::pair<DimExpr, std::string_view>> expected) {
  KILN_RETURN_IF_ERROR(check_rank(v, index, name, static_cast<int64_t>(expected.size())));
  size_t i = 0;
  for (const auto& [dim, meaning] : expected) {
    KILN_RETURN_IF_ERROR(check_dims_equal(
        v.shape[i], dim, fmt::format("{} dim {} ({})", input_label(index, name), i, meaning)));
    ++i;
  }
  return ok_status();
}

Status infer_recurrent(InferArgs& args, Cell cell) {
  KILN_ASSIGN_OR_RETURN(RecurrentAttributes p, read_recurrent_attributes(args.attributes, cell));
  const bool lstm = cell == Cell::kLstm;
  KILN_RETURN_IF_ERROR(check_arity(args, 3, lstm ? 8 : 6, 0, lstm ? 3 : 2));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, kX, "X"));
  KILN_RETURN_IF_ERROR(check_dtype(x, kX, "X", {DType::kF16, DType::kF32, DType::kF64}));
  KILN_RETURN_IF_ERROR(check_rank(x, kX, "X", 3));
  const DimExpr seq = x.shape[p.layout == 0 ? 0 : 1];
  const DimExpr batch = x.shape[p.layout == 0 ? 1 : 0];
  const DimExpr input = x.shape[2];
  const DimExpr dirs(p.directions);
  KILN_ASSIGN_OR_RETURN(ValueType w, required_input(args, kW, "W"));
  KILN_RETURN_IF_ERROR(check_same_dtype(w, kW, "W", x.dtype, "input 0 'X'"));
  KILN_ASSIGN_OR_RETURN(ValueType r, required_input(args, kR, "R"));
  KILN_RETURN_IF_ERROR(check_same_dtype(r, kR, "R", x.dtype, "input 0 'X'"));
  KILN_RETURN_IF_ERROR(check_rank(r, kR, "R", 3));
  const DimExpr hidden = p.hidden_size ? DimExpr(*p.hidden_size) : r.shape[2];
  const int64_t gates = gate_count(cell);
  const DimExpr gate_rows = DimExpr(gates) * hidden;
  const std::string dirs_text =
      fmt::format("num_directions = {} for direction '{}'", p.directions,
                  p.directions == 2 ? "bidirectional" : (p.reverse ? "reverse" : "forward"));
  const std::string rows_text = fmt::format("{} gates x hidden_size", gates);
  KILN_RETURN_IF_ERROR(check_dims(w, kW, "W",
                                  {{dirs, dirs_text},
                                   {gate_rows, rows_text},
                                   {input, "input_size, the last dim of input 0 'X'"}}));
  KILN_RETURN_IF_ERROR(
      check_dims(r, kR, "R", {{dirs, dirs_text}, {gate_rows, rows_text}, {hidden, "hidden_size"}}));
  if (const ValueType* b = optional_input(args, kB)) {
    KILN_RETURN_IF_ERROR(check_same_dtype(*b, kB, "B", x.dtype, "input 0 'X'"));
    KILN_RETURN_IF_ERROR(check_dims(
        *b, kB, "B",
        {{dirs, dirs_text}, {DimExpr(2 * gates) * hidden, "2 x gates x hidden_size: Wb then Rb"}}));
  }
  if (const ValueType* lens = optional_input(args, kSeqLens)) {
    KILN_RETURN_IF_ERROR(check_dtype(*lens, kSeqLens, "sequence_lens", {DType::kI32}));
    KILN_RETURN_IF_ERROR(check_dims(*lens, kSeqLens, "sequence_lens", {{batch, "batch_size"}}));
  }
  const bool batch_major = p.layout == 1;
  for (size_t index : {kInitialH, kInitialC}) {
    if (index == kInitialC && !lstm) break;
    const ValueType* s = optional_input(args, index);
    if (s == nullptr) continue;
    const std::string_view name = index == kInitialH ? "initial_h" : "initial_c";
    KILN_RETURN_IF_ERROR(check_same_dtype(*s, index, name, x.dtype, "input 0 'X'"));
    if (batch_major) {
      KILN_RETURN_IF_ERROR(check_dims(
          *s, index, name,
          {{batch, "batch_size (layout 1)"}, {dirs, dirs_text}, {hidden, "hidden_size"}}));
    } else {
      KILN_RETURN_IF_ERROR(check_dims(
          *s, index, name, {{dirs, dirs_text}, {batch, "batch_size"}, {hidden, "hidden_size"}}));
    }
  }
  if (lstm) {
    if (const ValueType* peep = optional_input(args, kP)) {
      KILN_RETURN_IF_ERROR(check_same_dtype(*peep, kP, "P", x.dtype, "input 0 'X'"));
      KILN_RETURN_IF_ERROR(check_dims(
          *peep, kP, "P",
          {{dirs, dirs_text}, {DimExpr(3) * hidden, "3 x hidden_size: the i, o, f peepholes"}}));
    }
  }
  const Shape y = batch_major ? Shape{batch, seq, dirs, hidden} : Shape{seq, dirs, batch, hidden};
  const Shape state = batch_major ? Shape{batch, dirs, hidden} : Shape{dirs, batch, hidden};
  args.outputs.clear();
  for (size_t i = 0; i < args.output_count; ++i) {
    args.outputs.push_back(ValueType{x.dtype, i == 0 ? y : state});
  }
  return ok_status();
}

Status infer_lstm(InferArgs& args) { return infer_recurrent(args, Cell::kLstm); }
Status infer_gru(InferArgs& args) { return infer_recurrent(args, Cell::kGru); }
Status infer_rnn(InferArgs& args) { return infer_recurrent(args, Cell::kRnn); }

// ---- Kernel

// y[i, j] (+)= sum_k a[i, k] * bt[k, j] for i < m, j < n: a [m, k] with row stride lda, bt [k, n]
// with row stride ldb, y with row stride ldy. Each element is one sum in increasing k from 0,
// whatever the split over threads.
template <typename C>
void product(int64_t m, int64_t k, int64_t n, const C* a, int64_t lda, const C* bt, int64_t ldb,
             C* y, int64_t ldy) {
  constexpr int64_t kColumns = 256;
  const int64_t blocks = (n + kColumns - 1) / kColumns;
  parallel_ranges(m * blocks, k * std::min(n, kColumns), [&](int64_t begin, int64_t end) {
    for (int64_t job = begin; job < end; ++job) {
      const int64_t i = job / blocks;
      const int64_t j0 = (job % blocks) * kColumns;
      const int64_t j1 = std::min(n, j0 + kColumns);
      C* row = y + i * ldy;
      std::fill(row + j0, row + j1, C(0));
      const C* ar = a + i * lda;
      for (int64_t kk = 0; kk < k; ++kk) {
        const C av = ar[kk];
        const C* br = bt + kk * ldb;
        for (int64_t j = j0; j < j1; ++j) row[j] += av * br[j];
      }
    }
  });
}

// m [rows, cols] row-major -> [cols, rows].
template <typename C>
std::vector<C> transposed(const C* m, int64_t rows, int64_t cols) {
  std::vector<C> t(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = m[r * cols + c];
  }
  return t;
}

// Products with the weight rows w [n, k] (used transposed): the backend's for f32 when it gave
// one, else the portable loop over a transposed copy.
template <typename C>
class Weights {
 public:
  Weights(const C* w, int64_t n, int64_t k, MakeWeightProduct f32_products) : n_(n), k_(k) {
    if constexpr (std::is_same_v<C, float>) {
      if (f32_products != nullptr && n > 0 && k > 0) {
        fast_ = f32_products(w, n, k);
        return;
      }
    }
    wt_ = transposed(w, n, k);
  }
  // y[m, n] (row stride ldy) = a[m, k] (row stride lda) w^T.
  void multiply(int64_t m, const C* a, int64_t lda, C* y, int64_t ldy) const {
    if (m <= 0) return;
    if constexpr (std::is_same_v<C, float>) {
      if (fast_ != nullptr) {
        fast_->multiply(m, a, lda, y, ldy);
        return;
      }
    }
    product<C>(m, k_, n_, a, lda, wt_.data(), n_, y, ldy);
  }

 private:
  int64_t n_, k_;
  std::vector<C> wt_;
  std::unique_ptr<WeightProduct> fast_;
};

// A buffer in the compute type: the buffer itself when T is C, else a widened copy.
template <typename T>
class Widened {
 public:
  using C = compute_t<T>;
  explicit Widened(const ConstBuffer& b) {
    if (b.data == nullptr) return;
    if constexpr (std::is_same_v<T, C>) {
      ptr_ = b.as<T>();
    } else {
      const int64_t n = b.element_count();
      copy_.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) copy_[i] = load(b.as<T>(), i);
      ptr_ = copy_.data();
    }
  }
  const C* get() const { return ptr_; }

 private:
  std::vector<C> copy_;
  const C* ptr_ = nullptr;
};

struct Sizes {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
};

class RecurrentKernel : public Kernel {
 public:
  RecurrentKernel(RecurrentAttributes p, Sizes s, MakeWeightProduct f32_products)
      : p_(std::move(p)), s_(s), f32_products_(f32_products) {}

 private:
  static const ConstBuffer* present(std::span<const ConstBuffer> in, size_t i) {
    return i < in.size() && in[i].data != nullptr ? &in[i] : nullptr;
  }

  // Offsets (in elements) of Y at step t, direction d, batch entry b, and of a state.
  int64_t y_offset(int64_t t, int64_t d, int64_t b) const {
    const int64_t dirs = p_.directions;
    return (p_.layout == 0 ? (t * dirs + d) * s_.batch + b : (b * s_.seq + t) * dirs + d) *
           s_.hidden;
  }
  int64_t state_offset(int64_t d, int64_t b) const {
    return (p_.layout == 0 ? d * s_.batch + b : b * p_.directions + d) * s_.hidden;
  }
  // The row of X (and of the projection) of step t, batch entry b.
  int64_t x_row(int64_t t, int64_t b) const {
    return p_.layout == 0 ? t * s_.batch + b : b * s_.seq + t;
  }

  template <typename C>
  C clip(C v) const {
    if (!p_.clip) return v;
    const C c = static_cast<C>(*p_.clip);
    return v < -c ? -c : (v > c ? c : v);
  }

  template <typename T>
  Status run_typed(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const {
    using C = compute_t<T>;
    const int64_t seq = s_.seq, batch = s_.batch, input = s_.input, hidden = s_.hidden;
    const int64_t gates = gate_count(p_.cell);
    const int64_t gh = gates * hidden;
    const bool lstm = p_.cell == Cell::kLstm;
    // Lengths, checked before anything is written.
    std::vector<int64_t> lens(static_cast<size_t>(batch), seq);
    if (const ConstBuffer* l = present(in, kSeqLens)) {
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t v = l->as<int32_t>()[b];
        if (v < 0 || v > seq) {
          return invalid_argument(
              "input 4 'sequence_lens' element {} = {} is out of range [0, {}] (the sequence "
              "length)",
              b, v, seq);
        }
        lens[b] = v;
      }
    }
    const Widened<T> x(in[kX]), w(in[kW]), r(in[kR]);
    const ConstBuffer* b_buf = present(in, kB);
    const ConstBuffer* h0_buf = present(in, kInitialH);
    const ConstBuffer* c0_buf = lstm ? present(in, kInitialC) : nullptr;
    const ConstBuffer* p_buf = lstm ? present(in, kP) : nullptr;
    const Widened<T> bias(b_buf ? *b_buf : ConstBuffer{}), h0(h0_buf ? *h0_buf : ConstBuffer{}),
        c0(c0_buf ? *c0_buf : ConstBuffer{}), peep(p_buf ? *p_buf : ConstBuffer{});
    auto output = [&](size_t i) -> T* {
      return i < out.size() && out[i].data != nullptr ? out[i].as<T>() : nullptr;
    };
    T* y = output(0);
    T* y_h = output(1);
    T* y_c = lstm ? output(2) : nullptr;
    if (y != nullptr) {
      const int64_t n = out[0].element_count();
      for (int64_t i = 0; i < n; ++i) store(y, i, C(0));
    }

    std::vector<C> proj(static_cast<size_t>(seq * batch * gh));
    std::vector<C> rec(static_cast<size_t>(batch * gh));
    std::vector<C> h(static_cast<size_t>(batch * hidden)), c(h.size()), scratch(h.size());
    for (int64_t d = 0; d < p_.directions; ++d) {
      const bool reverse = p_.reverse || d == 1;
      const Activation* act = &p_.activations[d * activations_per_direction(p_.cell)];
      // Input projection of every step, plus the biases that do not depend on the state.
      // GRU without linear_before_reset needs r before its h gate's recurrent product: R's rows
      // [0, 2H) and [2H, 3H) are then two products.
      const bool split_gru = p_.cell == Cell::kGru && !p_.linear_before_reset;
      const C* r_d = r.get() + d * gh * hidden;
      const Weights<C> w_all(w.get() + d * gh * input, gh, input, f32_products_);
      const Weights<C> r_main(r_d, split_gru ? 2 * hidden : gh, hidden, f32_products_);
      const std::optional<Weights<C>> r_h =
          split_gru ? std::optional<Weights<C>>(std::in_place, r_d + 2 * hidden * hidden, hidden,
                                                hidden, f32_products_)
                    : std::nullopt;
      w_all.multiply(seq * batch, x.get(), input, proj.data(), gh);
      const C* wb = bias.get() ? bias.get() + d * 2 * gh : nullptr;
      const C* rb = wb ? wb + gh : nullptr;
      // GRU with linear_before_reset adds Rbh inside the reset product.
      const int64_t folded_rb = p_.cell == Cell::kGru && p_.linear_before_reset ? 2 * hidden : gh;
      if (wb != nullptr) {
        for (int64_t row = 0; row < seq * batch; ++row) {
          C* g = proj.data() + row * gh;
          for (int64_t j = 0; j < gh; ++j) g[j] += wb[j] + (j < folded_rb ? rb[j] : C(0));
        }
      }
      const C* pi = peep.get() ? peep.get() + d * 3 * hidden : nullptr;
      const C* po = pi ? pi + hidden : nullptr;
      const C* pf = pi ? pi + 2 * hidden : nullptr;
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t k = 0; k < hidden; ++k) {
          h[b * hidden + k] = h0.get() ? h0.get()[state_offset(d, b) + k] : C(0);
          c[b * hidden + k] = c0.get() ? c0.get()[state_offset(d, b) + k] : C(0);
        }
      }
      const int64_t max_len = batch == 0 ? 0 : *std::max_element(lens.begin(), lens.end());
      for (int64_t step = 0; step < max_len; ++step) {
        r_main.multiply(batch, h.data(), hidden, rec.data(), gh);
        if (r_h) {
          // scratch = r (.) H_{t-1}, then rec's h block = scratch Rh^T.
          for (int64_t b = 0; b < batch; ++b) {
            if (step >= lens[b]) continue;
            const int64_t t = reverse ? lens[b] - 1 - step : step;
            const C* g = proj.data() + x_row(t, b) * gh;
            for (int64_t k = 0; k < hidden; ++k) {
              const C rv = act[0](clip(g[hidden + k] + rec[b * gh + hidden + k]));
              scratch[b * hidden + k] = rv * h[b * hidden + k];
            }
          }
          r_h->multiply(batch, scratch.data(), hidden, rec.data() + 2 * hidden, gh);
        }
        for (int64_t b = 0; b < batch; ++b) {
          if (step >= lens[b]) continue;
          const int64_t t = reverse ? lens[b] - 1 - step : step;
          const C* g = proj.data() + x_row(t, b) * gh;
          const C* rg = rec.data() + b * gh;
          C* hb = h.data() + b * hidden;
          C* cb = c.data() + b * hidden;
          for (int64_t k = 0; k < hidden; ++k) {
            switch (p_.cell) {
              case Cell::kRnn: hb[k] = act[0](clip(g[k] + rg[k])); break;
              case Cell::kGru: {
                const C z = act[0](clip(g[k] + rg[k]));
                const C rv = act[0](clip(g[hidden + k] + rg[hidden + k]));
                const C hh =
                    p_.linear_before_reset
                        ? act[1](clip(g[2 * hidden + k] +
                                      rv * (rg[2 * hidden + k] + (rb ? rb[2 * hidden + k] : C(0)))))
                        : act[1](clip(g[2 * hidden + k] + rg[2 * hidden + k]));
                hb[k] = (C(1) - z) * hh + z * hb[k];
                break;
              }
              case Cell::kLstm: {
                const C c_prev = cb[k];
                C ig = g[k] + rg[k];
                if (pi) ig += pi[k] * c_prev;
                ig = act[0](clip(ig));
                C fg;
                if (p_.input_forget) {
                  fg = C(1) - ig;
                } else {
                  fg = g[2 * hidden + k] + rg[2 * hidden + k];
                  if (pf) fg += pf[k] * c_prev;
                  fg = act[0](clip(fg));
                }
                const C cand = act[1](clip(g[3 * hidden + k] + rg[3 * hidden + k]));
                const C cv = fg * c_prev + ig * cand;
                C og = g[hidden + k] + rg[hidden + k];
                if (po) og += po[k] * cv;
                og = act[0](clip(og));
                cb[k] = cv;
                hb[k] = og * act[2](cv);
                break;
              }
            }
          }
          if (y != nullptr) {
            for (int64_t k = 0; k < hidden; ++k) store(y, y_offset(t, d, b) + k, hb[k]);
          }
        }
      }
      for (int64_t b = 0; b < batch; ++b) {
        const bool ran = lens[b] > 0;
        for (int64_t k = 0; k < hidden; ++k) {
          if (y_h) store(y_h, state_offset(d, b) + k, ran ? h[b * hidden + k] : C(0));
          if (y_c) store(y_c, state_offset(d, b) + k, ran ? c[b * hidden + k] : C(0));
        }
      }
    }
    return ok_status();
  }

  RecurrentAttributes p_;
  Sizes s_;
  MakeWeightProduct f32_products_;

 public:
  // After the member templates it instantiates: clang instantiates them from a generic lambda
  // only when their definitions come first.
  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    return visit_dtype(in[kX].dtype, [&]<typename T>() -> Status {
      if constexpr (is_float_storage_v<T> && !std::is_same_v<T, BFloat16>) {
        return run_typed<T>(in, out);
      } else {
        return internal_error("{} has no {} instance", cell_name(p_.cell),
                              dtype_name(in[kX].dtype));
      }
    });
  }
};

StatusOr<std::unique_ptr<Kernel>> make_recurrent(const MakeArgs& args, Cell cell,
                                                 MakeWeightProduct f32_products = nullptr) {
  KILN_ASSIGN_OR_RETURN(RecurrentAttributes p, read_recurrent_attributes(args.attributes, cell));
  const ConcreteShape x = args.input_dims(kX);
  const ConcreteShape r = args.input_dims(kR);
  Sizes s;
  s.seq = x[p.layout == 0 ? 0 : 1];
  s.batch = x[p.layout == 0 ? 1 : 0];
  s.input = x[2];
  s.hidden = p.hidden_size.value_or(r[2]);
  return std::unique_ptr<Kernel>(std::make_unique<RecurrentKernel>(std::move(p), s, f32_products));
}

StatusOr<std::unique_ptr<Kernel>> make_lstm(const MakeArgs& args) {
  return make_recurrent(args, Cell::kLstm);
}
StatusOr<std::unique_ptr<Kernel>> make_gru(const MakeArgs& args) {
  return make_recurrent(args, Cell::kGru);
}
StatusOr<std::unique_ptr<Kernel>> make_rnn(const MakeArgs& args) {
  return make_recurrent(args, Cell::kRnn);
}

// Multiply-adds: per step, batch entry and direction, gates x hidden outputs over input + hidden.
double recurrent_multiply_adds(const Attributes&, std::span<const ConcreteShape* const> in,
                               std::span<const ConcreteShape* const>) {
  const ConcreteShape* x = dims_at(in, kX);
  const ConcreteShape* w = dims_at(in, kW);
  const ConcreteShape* r = dims_at(in, kR);
  if (x == nullptr || w == nullptr || r == nullptr || x->size() != 3 || w->size() != 3 ||
      r->size() != 3) {
    return 0;
  }
  return static_cast<double>((*x)[0]) * static_cast<double>((*x)[1]) *
         static_cast<double>((*w)[0]) * static_cast<double>((*w)[1]) *
         static_cast<double>((*w)[2] + (*r)[2]);
}

}  // namespace

StatusOr<std::unique_ptr<Kernel>> make_recurrent_kernel(const MakeArgs& args,
                                                        std::string_view op_type,
                                                        MakeWeightProduct f32_products) {
  for (Cell cell : {Cell::kLstm, Cell::kGru, Cell::kRnn}) {
    if (cell_name(cell) == op_type) return make_recurrent(args, cell, f32_products);
  }
  return internal_error("make_recurrent_kernel: '{}' is not a recurrent op", op_type);
}

void register_recurrent_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{.op_type = "GRU",
                        .infer = infer_gru,
                        .make = make_gru,
                        .multiply_adds = recurrent_multiply_adds});
  table.push_back(OpDef{.op_type = "LSTM",
                        .infer = infer_lstm,
                        .make = make_lstm,
                        .multiply_adds = recurrent_multiply_adds});
  table.push_back(OpDef{.op_type = "RNN",
                        .infer = infer_rnn,
                        .make = make_rnn,
                        .multiply_adds = recurrent_multiply_adds});
}

}  // namespace kiln::kernels
