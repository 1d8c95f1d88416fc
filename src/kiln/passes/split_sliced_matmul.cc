// split_sliced_matmul: a MatMul of a constant f32 matrix W [K, N] (with its kiln_bias, kiln_scale
// or kiln_activation, from fuse_matmul) whose output only Slices and Splits along its last axis
// read becomes one MatMul per piece read, of the piece's columns of W and of the bias, which
// writes that piece directly. PyTorch's MultiheadAttention projects q, k and v as one product of
// 3 * E columns and chunks it into three (Slices of computed bounds that fold to constants), as
// GPT-2's c_attn does with a Split; the pieces were each a copy of a third of the product. ViT-B/16
// at batch 1: the three products of 768 columns take less time than the one of 2304 before the
// three copies (bench/vs_onnxruntime.py), and the copies are gone.
//
// The same bits: kiln's CPU kernel computes each element of a product from its row of A, its
// column of B and the epilogue's values for that column alone (hal/cpu/gemm_kernel.h), so a
// product of some columns holds those columns' bits of the whole product, which is what the
// Slice copied; the reference evaluator computes each element alike. Only pieces of at least
// kMinPieceColumns columns that together read no more columns than the product has are split:
// the rewrite never adds work and keeps the kernel's register blocks full. W's and the pieces'
// widths are constants and the pieces' bounds must be too, so a module with bound sizes splits
// exactly where the dynamic one does (invariant 1).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "kiln/passes/passes.h"

namespace kiln::passes {
namespace {

// Narrower pieces stay one product: a piece of a few columns would run mostly padding.
constexpr int64_t kMinPieceColumns = 64;

// Columns [begin, begin + width) of the product, written to `output` in place of `reader`'s.
struct Piece {
  ir::NodeId reader;
  ir::ValueId output;
  int64_t begin = 0, width = 0;
};

// The elements of a constant 1-D integer value; nullopt when it is not one.
std::optional<std::vector<int64_t>> constant_ints(const ir::Graph& graph, ir::ValueId id) {
  if (id == ir::kAbsent) return std::nullopt;
  const ir::Value& v = graph.value(id);
  if (!v.constant || !is_integer(v.dtype) || v.constant->shape().size() != 1) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < v.constant->element_count(); ++i) {
    out.push_back(element_as_int64(*v.constant, i));
  }
  return out;
}

// A Slice of `y` (rank `rank`, last dim n) along its last axis alone, step 1, constant bounds: its
// columns. Nullopt for any other Slice.
std::optional<Piece> slice_piece(const ir::Graph& graph, ir::NodeId id, size_t rank, int64_t n) {
  const ir::Node& slice = graph.node(id);
  if (slice.inputs.size() < 3 || slice.outputs.size() != 1) return std::nullopt;
  const auto starts = constant_ints(graph, slice.inputs[1]);
  const auto ends = constant_ints(graph, slice.inputs[2]);
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1) return std::nullopt;
  if (slice.inputs.size() > 3 && slice.inputs[3] != ir::kAbsent) {
    const auto axes = constant_ints(graph, slice.inputs[3]);
    if (!axes || axes->size() != 1) return std::nullopt;
    const int64_t axis = (*axes)[0] < 0 ? (*axes)[0] + static_cast<int64_t>(rank) : (*axes)[0];
    if (axis != static_cast<int64_t>(rank) - 1) return std::nullopt;
  } else if (rank != 1) {
    return std::nullopt;  // without axes the one bound is axis 0's
  }
  if (slice.inputs.size() > 4 && slice.inputs[4] != ir::kAbsent) {
    const auto steps = constant_ints(graph, slice.inputs[4]);
    if (!steps || steps->size() != 1 || (*steps)[0] != 1) return std::nullopt;
  }
  // ONNX's clamping for a forward step: a negative bound counts from the end, then [0, n].
  auto clamp = [n](int64_t bound) {
    return std::clamp<int64_t>(bound < 0 ? bound + n : bound, 0, n);
  };
  const int64_t begin = clamp((*starts)[0]), end = clamp((*ends)[0]);
  if (end <= begin) return std::nullopt;
  return Piece{id, slice.outputs[0], begin, end - begin};
}

// The pieces of a Split of `y` along its last axis, from its outputs' widths (constants here,
// since n is).
std::optional<std::vector<Piece>> split_pieces(const ir::Graph& graph, ir::NodeId id, size_t rank) {
  const ir::Node& split = graph.node(id);
  auto axis = split.attributes.get_int("axis", 0);
  if (!axis.ok()) return std::nullopt;
  if (*axis < 0) *axis += static_cast<int64_t>(rank);
  if (*axis != static_cast<int64_t>(rank) - 1) return std::nullopt;
  std::vector<Piece> pieces;
  int64_t begin = 0;
  for (ir::ValueId out : split.outputs) {
    const Shape& s = graph.value(out).shape;
    const std::optional<int64_t> width = s.empty() ? std::nullopt : s.back().constant_value();
    if (!width) return std::nullopt;
    pieces.push_back(Piece{id, out, begin, *width});
    begin += *width;
  }
  return pieces;
}

// Columns [begin, begin + width) of a constant [rows, n] (or [n], rows 1) as a new constant.
ir::ValueId column_constant(ir::Graph& graph, const Tensor& t, int64_t rows, int64_t n,
                            int64_t begin, int64_t width, const std::string& name) {
  ConcreteShape dims = t.shape();
  dims.back() = width;
  // Every byte of the piece is copied below; the source is read where it lies (a weight in the
  // model file is not copied into aligned memory first).
  Tensor piece = Tensor::create_uninitialized(t.dtype(), dims).value();
  const size_t element = dtype_size(t.dtype());
  const std::byte* src = t.bytes().data();
  std::byte* dst = piece.mutable_data();
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + static_cast<size_t>(r * width) * element,
                src + static_cast<size_t>(r * n + begin) * element,
                static_cast<size_t>(width) * element);
  }
  return graph.add_constant(name, std::move(piece));
}

bool split_one(ir::Graph& graph, const std::vector<std::vector<ir::NodeId>>& consumers,
               ir::NodeId id) {
  const ir::Node& mm = graph.node(id);
  // A residual (input 3) is a computed value of the whole product: it stays one product.
  if (mm.op_type != "MatMul" || mm.inputs.size() < 2 || mm.inputs.size() > 3 ||
      mm.outputs.size() != 1) {
    return false;
  }
  const ir::Value& w = graph.value(mm.inputs[1]);
  if (w.dtype != DType::kF32 || !w.constant || w.constant->shape().size() != 2) return false;
  const bool has_bias = mm.inputs.size() == 3 && mm.inputs[2] != ir::kAbsent;
  if (has_bias && !graph.value(mm.inputs[2]).constant) return false;
  const int64_t k = w.constant->shape()[0], n = w.constant->shape()[1];
  const ir::ValueId y = mm.outputs[0];
  const size_t rank = graph.value(y).shape.size();
  const auto& outputs = graph.outputs();
  if (rank < 2 || consumers[y].empty() ||
      std::find(outputs.begin(), outputs.end(), y) != outputs.end()) {
    return false;
  }
  std::vector<Piece> pieces;
  for (ir::NodeId reader : consumers[y]) {
    const ir::Node& r = graph.node(reader);
    // y as the data input only, read once.
    if (r.inputs.empty() || r.inputs[0] != y ||
        std::count(r.inputs.begin(), r.inputs.end(), y) != 1) {
      return false;
    }
    if (r.op_type == "Slice") {
      std::optional<Piece> piece = slice_piece(graph, reader, rank, n);
      if (!piece) return false;
      pieces.push_back(*piece);
    } else if (r.op_type == "Split") {
      std::optional<std::vector<Piece>> split = split_pieces(graph, reader, rank);
      if (!split) return false;
      pieces.insert(pieces.end(), split->begin(), split->end());
    } else {
      return false;
    }
  }
  int64_t columns = 0;
  for (const Piece& p : pieces) {
    if (p.width < kMinPieceColumns) return false;
    columns += p.width;
  }
  if (columns > n) return false;
  // One MatMul per piece, in place of its reader's output; the readers and the product go.
  const ir::Node product = mm;
  std::vector<ir::Node> replacements;
  for (const Piece& p : pieces) {
    const std::string name =
        fmt::format("{}/columns_{}_{}", product.name, p.begin, p.begin + p.width);
    ir::Node piece = product;
    piece.name = name;
    piece.inputs[1] = column_constant(graph, *graph.value(product.inputs[1]).constant, k, n,
                                      p.begin, p.width, name + "/weights");
    if (has_bias) {
      piece.inputs[2] = column_constant(graph, *graph.value(product.inputs[2]).constant, 1, n,
                                        p.begin, p.width, name + "/kiln_bias");
    }
    piece.outputs = {p.output};
    const auto& reader_origins = graph.node(p.reader).origins;
    piece.origins.insert(piece.origins.end(), reader_origins.begin(), reader_origins.end());
    replacements.push_back(std::move(piece));
  }
  for (ir::NodeId reader : consumers[y]) graph.erase_node(reader);
  graph.erase_node(id);
  for (ir::Node& piece : replacements) graph.add_node(std::move(piece));
  return true;
}

}  // namespace

StatusOr<int> split_sliced_matmul(ir::Graph& graph) {
  int rewrites = 0;
  const auto consumers = graph.consumers();
  const auto count = static_cast<ir::NodeId>(graph.nodes().size());
  for (ir::NodeId id = 0; id < count; ++id) {
    // The rewrite erases only the product and its readers, which no other product reads, and adds
    // nodes past `count`: the consumer lists stay true for the nodes still to visit.
    if (split_one(graph, consumers, id)) ++rewrites;
  }
  if (rewrites > 0) {
    KILN_RETURN_IF_ERROR(graph.topological_sort());
    graph.remove_dead();
  }
  return rewrites;
}

}  // namespace kiln::passes
