// Graph-to-graph rewrites run by the compiler, in this order (see pipeline.h):
//   simplify        drop Identity and inference-mode Dropout
//   canonicalize    resolve auto_pad into explicit pads on Conv and pooling ops, so that backends
//                   see one form
//   fuse_qdq        QuantizeLinear(Conv or MatMul of DequantizeLinear'd activation and weights)
//                   becomes QLinearConv or QLinearMatMul (QDQ models run the int8 kernels); before
//                   fold_constants, which would fold the weights' DequantizeLinear
//   fold_constants  evaluate nodes whose inputs are all constants (reference evaluator), and
//                   make integer values that shape inference knows (Shape of a static tensor)
//                   constants. Folding never changes bits between a module with dims bound (or a
//                   static model) and the dynamic one: values computed from graph input sizes
//                   fold only through integer and bool results, which are exact; floating-point
//                   work on them stays a node for the runtime's kernels, as in the dynamic
//                   module. Values from initializers alone fold alike in both. A folded NonZero
//                   (any data-dependent size) gives its count to every shape that used it.
//   fold_batchnorm  fold an inference BatchNormalization into the Conv that feeds only it
//   fuse_mish       Mish written out (Softplus, Tanh, Mul by the Softplus's input) becomes one
//                   Mish node (ONNX opset 18 semantics), which fuse_conv may then take
//   fuse_conv       fuse bias-free residual Add, and Relu, LeakyRelu, Clip with constant bounds,
//                   Mish or SiLU (Mul(y, Sigmoid(y))), into Conv (all but SiLU also across a
//                   Transpose between them, as tf2onnx's NHWC graphs place them, dropping the
//                   Transpose pair that is left), then an f32 Add after the activation as a
//                   residual added after it (kiln_residual_after_activation)
//                   (kiln extensions, ops/registry.h, kernels/activation.h); fuse Relu into a
//                   standalone BatchNormalization
//   fuse_gelu       GELU written out with Erf (Div/Mul, Erf, Add, Mul, Mul), or in its tanh form
//                   (x^3 as Pow or Muls, Mul 0.044715, Add, Mul sqrt(2/pi), Tanh, Add, Mul, Mul),
//                   becomes one Gelu node (ONNX opset 20 semantics, approximate "none" / "tanh")
//   fuse_layer_norm layer normalization written out (ReduceMean, Sub, Pow or Mul, ReduceMean, Add
//                   eps, Sqrt, Div, optional Mul gamma and Add beta) over the last axes becomes one
//                   LayerNormalization node (ONNX opset 17 semantics)
//   fuse_matmul     fold a scalar scale of an f32 product (Mul or Div after it, or a power of two
//                   scaling an operand before it: kiln_scale), an f32/f64 constant bias Add, then a
//                   residual Add of a computed value of the same shape, then a Gelu, into the
//                   MatMul of a constant matrix before them (kiln_bias, kiln_residual,
//                   kiln_activation), or a Softmax along the last axis into any f32 product
//                   (kiln_softmax: attention's scores; kernels/linalg.cc), then the product of
//                   those probabilities and V into it (kiln_values: no [..., S, S] buffer)
//   split_sliced_matmul
//                   a MatMul of a constant f32 matrix read only by Slices and Splits of its last
//                   axis becomes one MatMul per piece, of that piece's columns (attention's packed
//                   q, k, v projection): no copies, the same bits
//   remove_dead     drop nodes and values nothing uses
// Each pass keeps the graph verified and its shapes unchanged, and records the ONNX nodes it
// absorbs in Node::origins. Each returns the number of rewrites it made.
#pragma once

#include "kiln/base/status.h"
#include "kiln/ir/graph.h"

namespace kiln::passes {

StatusOr<int> simplify(ir::Graph& graph);
StatusOr<int> canonicalize(ir::Graph& graph);
StatusOr<int> fuse_qdq(ir::Graph& graph);
StatusOr<int> fold_constants(ir::Graph& graph);
StatusOr<int> fold_batchnorm(ir::Graph& graph);
StatusOr<int> fuse_conv(ir::Graph& graph);
StatusOr<int> fuse_gelu(ir::Graph& graph);
StatusOr<int> fuse_mish(ir::Graph& graph);
StatusOr<int> fuse_layer_norm(ir::Graph& graph);
StatusOr<int> fuse_matmul(ir::Graph& graph);
StatusOr<int> split_sliced_matmul(ir::Graph& graph);
StatusOr<int> remove_dead(ir::Graph& graph);

}  // namespace kiln::passes
