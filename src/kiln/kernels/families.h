// Registration entry points of the portable kernel families; register_all calls each one.
#pragma once

#include <vector>

#include "kiln/kernels/kernel.h"

namespace kiln::kernels {

void register_all(std::vector<OpDef>& table);

// unary.cc: math functions and activations (Exp ... Softsign, Sin ... Atanh, IsNaN, IsInf, Not,
// Shrink, Clip).
void register_unary_kernels(std::vector<OpDef>& table);
// cast.cc: Cast, CastLike.
void register_cast_kernels(std::vector<OpDef>& table);
// binary.cc: broadcasting arithmetic, comparison, logic and bit shifts, Pow, Mod, PRelu, Where,
// and the variadic Min, Max, Mean, Sum.
void register_binary_kernels(std::vector<OpDef>& table);
// reduce.cc: Reduce*, ArgMax, ArgMin.
void register_reduce_kernels(std::vector<OpDef>& table);
// normalize.cc: Softmax, LogSoftmax, Hardmax (each for opsets 1-12 and 13+), LayerNormalization,
// InstanceNormalization, LpNormalization, LRN, MeanVarianceNormalization, BatchNormalization.
void register_normalize_kernels(std::vector<OpDef>& table);
// scan.cc: CumSum, TopK.
void register_scan_kernels(std::vector<OpDef>& table);
// movement.cc: Transpose, Concat, Split, Slice, Squeeze, Unsqueeze, Flatten, Reshape, Identity,
// Dropout, Expand, Tile, Pad, DepthToSpace, SpaceToDepth, Trilu.
void register_movement_kernels(std::vector<OpDef>& table);
// index.cc: Shape, Size, Gather, GatherElements, GatherND.
void register_index_kernels(std::vector<OpDef>& table);
// scatter.cc: ScatterND, ScatterElements.
void register_scatter_kernels(std::vector<OpDef>& table);
// generate.cc: OneHot, EyeLike, Range, ConstantOfShape, HannWindow, HammingWindow,
// BlackmanWindow, Constant.
void register_generate_kernels(std::vector<OpDef>& table);
// select.cc: NonZero, Compress, Unique.
void register_select_kernels(std::vector<OpDef>& table);
// resize.cc: Resize (Upsample reaches kiln as Resize through the importer's opset upgrade).
void register_resize_kernels(std::vector<OpDef>& table);
// spatial.cc: Conv, ConvInteger, QLinearConv, ConvTranspose, MaxPool, AveragePool, LpPool,
// GlobalAveragePool, GlobalMaxPool, GlobalLpPool (any rank, any float dtype).
void register_spatial_kernels(std::vector<OpDef>& table);
// sampling.cc: GridSample.
void register_sampling_kernels(std::vector<OpDef>& table);
// unpool.cc: MaxUnpool.
void register_unpool_kernels(std::vector<OpDef>& table);
// detection.cc: NonMaxSuppression, RoiAlign.
void register_detection_kernels(std::vector<OpDef>& table);
// linalg.cc: MatMul, MatMulInteger, QLinearMatMul, Gemm, Einsum, Det.
void register_linalg_kernels(std::vector<OpDef>& table);
// signal.cc: DFT, STFT, MelWeightMatrix (their transforms: fft.h).
void register_signal_kernels(std::vector<OpDef>& table);
// recurrent.cc: LSTM, GRU, RNN.
void register_recurrent_kernels(std::vector<OpDef>& table);
// loss.cc: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss (inference).
void register_loss_kernels(std::vector<OpDef>& table);
// text.cc: TfIdfVectorizer (integer pools).
void register_text_kernels(std::vector<OpDef>& table);
// training.cc: the ai.onnx.preview.training optimizers Adagrad, Adam, Momentum.
void register_training_kernels(std::vector<OpDef>& table);
// quantize.cc: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear (the arithmetic they share
// with QLinearConv and QLinearMatMul: quantize.h).
void register_quantize_kernels(std::vector<OpDef>& table);

}  // namespace kiln::kernels
