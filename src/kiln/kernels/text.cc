// TfIdfVectorizer (opset 9): counts the n-grams of a pool in each row of an integer sequence.
//
// X is int32 or int64, [C] or [N, C]; Y is f32, [S] or [N, S] with S = max(ngram_indexes) + 1.
// The pool (pool_int64s) holds the n-grams grouped by length: ngram_counts[i] is where the
// (i + 1)-grams start; the j-th n-gram of the pool counts into Y[..., ngram_indexes[j]]. An
// n-gram of length n in [min_gram_length, max_gram_length] is the elements at positions
// p, p + d, ..., p + (n - 1) d of one row, for every skip distance d in [1, max_skip_count + 1];
// unigrams are counted once (the skip does not change them). Mode TF gives the counts, IDF
// (count > 0) * weight, TFIDF count * weight, with weight 1 without 'weights'.
//
// Choices where ONNX leaves room:
//   - weights[i] scales output slot i, as ONNX Runtime and ONNX's reference implementation
//     apply it (the spec's text ties it to the i-th n-gram of the pool, the same thing when
//     ngram_indexes is 0, 1, 2, ...); 'weights' must have one value per n-gram, at least S.
//   - pool_strings is refused: kiln has no string tensors.
//   - an n-gram that appears twice in the pool is an error (its slot would be ambiguous).
//
// The pool becomes a trie once, when the kernel is made; a run walks it from each position.
#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "kiln/kernels/dtype_dispatch.h"
#include "kiln/kernels/families.h"
#include "kiln/kernels/infer_util.h"
#include "kiln/kernels/reduce_geometry.h"

namespace kiln::kernels {
namespace {

enum class TfIdfMode { kTf, kIdf, kTfIdf };

// The parsed and checked attributes, and the pool as a trie: node 0 is the root; a node's
// `slot` is the output index of the n-gram that ends there (-1: a prefix only).
struct TfIdfPlan {
  TfIdfMode mode = TfIdfMode::kTf;
  int64_t min_gram = 1, max_gram = 1, max_skip = 0;
  int64_t output_size = 0;
  std::vector<double> slot_weights;  // one per output slot
  struct Node {
    std::unordered_map<int64_t, int32_t> next;
    int64_t slot = -1;
  };
  std::vector<Node> trie;
};

constexpr int64_t kMaxTfIdfSlots = int64_t{1} << 31;

StatusOr<int64_t> required_int(const Attributes& a, const char* name) {
  if (!a.has(name)) return invalid_argument("attribute '{}' is required", name);
  return a.get_int(name, 0);
}

StatusOr<TfIdfPlan> read_tfidf(const Attributes& a) {
  KILN_RETURN_IF_ERROR(check_known_attributes(
      a, {"max_gram_length", "max_skip_count", "min_gram_length", "mode", "ngram_counts",
          "ngram_indexes", "pool_int64s", "pool_strings", "weights"}));
  if (a.has("pool_strings")) {
    return unimplemented(
        "attribute 'pool_strings': kiln has no string tensors; only 'pool_int64s' (integer "
        "input) is supported");
  }
  TfIdfPlan p;
  KILN_ASSIGN_OR_RETURN(p.min_gram, required_int(a, "min_gram_length"));
  KILN_ASSIGN_OR_RETURN(p.max_gram, required_int(a, "max_gram_length"));
  KILN_ASSIGN_OR_RETURN(p.max_skip, required_int(a, "max_skip_count"));
  if (p.min_gram < 1 || p.max_gram < p.min_gram) {
    return invalid_argument(
        "attributes 'min_gram_length' {} and 'max_gram_length' {} must satisfy 1 <= min <= max",
        p.min_gram, p.max_gram);
  }
  if (p.max_skip < 0) {
    return invalid_argument("attribute 'max_skip_count' must be >= 0, got {}", p.max_skip);
  }
  if (!a.has("mode")) return invalid_argument("attribute 'mode' is required");
  KILN_ASSIGN_OR_RETURN(std::string mode, a.get_string("mode", ""));
  if (mode == "TF") {
    p.mode = TfIdfMode::kTf;
  } else if (mode == "IDF") {
    p.mode = TfIdfMode::kIdf;
  } else if (mode == "TFIDF") {
    p.mode = TfIdfMode::kTfIdf;
  } else {
    return invalid_argument("attribute 'mode' must be \"TF\", \"IDF\" or \"TFIDF\", got \"{}\"",
                            mode);
  }
  if (!a.has("pool_int64s")) return invalid_argument("attribute 'pool_int64s' is required");
  if (!a.has("ngram_counts")) return invalid_argument("attribute 'ngram_counts' is required");
  if (!a.has("ngram_indexes")) return invalid_argument("attribute 'ngram_indexes' is required");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pool, a.get_ints("pool_int64s", {}));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> counts, a.get_ints("ngram_counts", {}));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> indexes, a.get_ints("ngram_indexes", {}));
  const auto pool_size = static_cast<int64_t>(pool.size());

  // Levels: the (i + 1)-grams are pool[counts[i], counts[i + 1]).
  int64_t ngrams = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t begin = counts[i];
    const int64_t end = i + 1 < counts.size() ? counts[i + 1] : pool_size;
    if (begin < 0 || begin > end || end > pool_size || (i == 0 && begin != 0)) {
      return invalid_argument(
          "attribute 'ngram_counts' must start at 0 and not decrease up to the pool size {}, got "
          "[{}]",
          pool_size, fmt::join(counts, ", "));
    }
    const auto length = static_cast<int64_t>(i + 1);
    if ((end - begin) % length != 0) {
      return invalid_argument(
          "attribute 'ngram_counts': the {}-grams span {} pool values, not a multiple of {}",
          length, end - begin, length);
    }
    ngrams += (end - begin) / length;
  }
  if (counts.empty() && pool_size != 0) {
    return invalid_argument("attribute 'ngram_counts' is empty but the pool has {} values",
                            pool_size);
  }
  if (static_cast<int64_t>(indexes.size()) != ngrams) {
    return invalid_argument(
        "attribute 'ngram_indexes' must have one value per n-gram of the pool ({}), got {}", ngrams,
        indexes.size());
  }
  for (size_t j = 0; j < indexes.size(); ++j) {
    if (indexes[j] < 0 || indexes[j] >= kMaxTfIdfSlots) {
      return invalid_argument("attribute 'ngram_indexes' element {} = {} is out of range [0, 2^31)",
                              j, indexes[j]);
    }
    p.output_size = std::max(p.output_size, indexes[j] + 1);
  }

  KILN_ASSIGN_OR_RETURN(std::vector<double> weights, a.get_floats("weights", {}));
  if (a.has("weights")) {
    if (weights.size() != indexes.size() || static_cast<int64_t>(weights.size()) < p.output_size) {
      return invalid_argument(
          "attribute 'weights' must have one value per n-gram ({}) and per output slot ({}), got "
          "{}",
          indexes.size(), p.output_size, weights.size());
    }
    p.slot_weights.assign(weights.begin(), weights.begin() + p.output_size);
  } else {
    p.slot_weights.assign(static_cast<size_t>(p.output_size), 1.0);
  }

  p.trie.emplace_back();
  int64_t j = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t end = i + 1 < counts.size() ? counts[i + 1] : pool_size;
    const auto length = static_cast<int64_t>(i + 1);
    for (int64_t start = counts[i]; start < end; start += length, ++j) {
      int32_t node = 0;
      for (int64_t k = 0; k < length; ++k) {
        auto [it, inserted] =
            p.trie[node].next.try_emplace(pool[start + k], static_cast<int32_t>(p.trie.size()));
        if (inserted) p.trie.emplace_back();
        node = it->second;
      }
      if (p.trie[node].slot >= 0) {
        return invalid_argument(
            "attribute 'pool_int64s': the {}-gram at pool index {} appears twice", length, start);
      }
      p.trie[node].slot = indexes[j];
    }
  }
  return p;
}

Status infer_tfidf(InferArgs& args) {
  KILN_ASSIGN_OR_RETURN(TfIdfPlan p, read_tfidf(args.attributes));
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1));
  KILN_ASSIGN_OR_RETURN(ValueType x, required_input(args, 0, "X"));
  KILN_RETURN_IF_ERROR(check_dtype(x, 0, "X", {DType::kI32, DType::kI64}));
  KILN_RETURN_IF_ERROR(check_rank_range(x, 0, "X", 1, 2));
  Shape out{DimExpr(p.output_size)};
  if (x.shape.size() == 2) out.insert(out.begin(), x.shape[0]);
  args.outputs = {ValueType{DType::kF32, std::move(out)}};
  return ok_status();
}

class TfIdfKernel : public Kernel {
  // Member templates first: clang 14 leaves those defined after a lambda that calls them
  // uninstantiated (undefined references at link time).
 private:
  // Skip distances beyond the row's length find no n-gram of two or more: bounded by columns.
  int64_t distances() const { return std::min(p_.max_skip, columns_) + 1; }

  // Counts the pool n-grams of one row of X (int32 or int64 ids) into counts.
  template <typename T>
  void count_row(const T* x, std::vector<int64_t>& counts) const {
    int64_t first = p_.min_gram;
    for (int64_t d = 1; d <= distances(); ++d) {
      for (int64_t start = 0; start + d * (first - 1) < columns_; ++start) {
        int32_t node = 0;
        for (int64_t n = 1, at = start; n <= p_.max_gram && at < columns_; ++n, at += d) {
          const auto& next = p_.trie[node].next;
          auto it = next.find(static_cast<int64_t>(x[at]));
          if (it == next.end()) break;
          node = it->second;
          if (n >= first && p_.trie[node].slot >= 0) ++counts[p_.trie[node].slot];
        }
      }
      // Unigrams do not depend on the skip: count them at the first distance only.
      if (first == 1) {
        first = 2;
        if (first > p_.max_gram) break;
      }
    }
  }

  TfIdfPlan p_;
  int64_t rows_, columns_;

 public:
  TfIdfKernel(TfIdfPlan plan, int64_t rows, int64_t columns)
      : p_(std::move(plan)), rows_(rows), columns_(columns) {}

  Status run(std::span<const ConstBuffer> in, std::span<const MutableBuffer> out) const override {
    // X is int32 or int64 (the shape rule's check); the ids are read in place.
    const bool wide = in[0].dtype == DType::kI64;
    const int64_t* x64 = wide ? in[0].as<int64_t>() : nullptr;
    const int32_t* x32 = wide ? nullptr : in[0].as<int32_t>();
    float* y = out[0].as<float>();
    // Elements visited per row, saturated (a huge skip or gram length is bounded by the row).
    const double visits = static_cast<double>(columns_) *
                          static_cast<double>(std::min(p_.max_gram, columns_)) *
                          static_cast<double>(distances());
    const auto cost = static_cast<int64_t>(std::min(visits, 1e9));
    parallel_ranges(rows_, cost, [&](int64_t b, int64_t e) {
      std::vector<int64_t> counts(static_cast<size_t>(p_.output_size));
      for (int64_t r = b; r < e; ++r) {
        std::fill(counts.begin(), counts.end(), 0);
        if (wide) {
          count_row(x64 + r * columns_, counts);
        } else {
          count_row(x32 + r * columns_, counts);
        }
        float* row = y + r * p_.output_size;
        for (int64_t s = 0; s < p_.output_size; ++s) {
          const auto c = static_cast<double>(counts[s]);
          double v = c;
          if (p_.mode == TfIdfMode::kIdf) v = c > 0 ? p_.slot_weights[s] : 0.0;
          if (p_.mode == TfIdfMode::kTfIdf) v = c * p_.slot_weights[s];
          row[s] = static_cast<float>(v);
        }
      }
    });
    return ok_status();
  }
};

StatusOr<std::unique_ptr<Kernel>> make_tfidf(const MakeArgs& args) {
  KILN_ASSIGN_OR_RETURN(TfIdfPlan p, read_tfidf(args.attributes));
  const ConcreteShape dims = args.input_dims(0);
  const int64_t rows = dims.size() == 2 ? dims[0] : 1;
  const int64_t columns = dims.back();
  return std::unique_ptr<Kernel>(std::make_unique<TfIdfKernel>(std::move(p), rows, columns));
}

}  // namespace

void register_text_kernels(std::vector<OpDef>& table) {
  table.push_back(OpDef{"TfIdfVectorizer", infer_tfidf, make_tfidf});
}

}  // namespace kiln::kernels
