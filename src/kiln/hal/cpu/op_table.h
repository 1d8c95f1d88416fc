// How the CPU backend runs each op. Every dispatch is first checked against its op definition
// (check_definition: counts, dtypes, shapes and attributes, by kernels::check_concrete, the one
// place they are validated). Then a path is chosen: the op type's fast path (oneDNN, kiln's gemm
// or Winograd kernels) when its `check` says it can run this dispatch, else the portable path
// (the definition's own kernel, portable_op.cc). A fast path's check only answers "can I run
// this": the dtypes, ranks and attribute values it implements, read as the definition parsed
// them (kernels/op_attributes.h, kernels/activation.h). supports() and prepare() share the
// choice, so both accept exactly the same dispatches.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/hal/cpu/op_params.h"
#include "kiln/hal/cpu/sample_groups.h"
#include "kiln/kernels/kernel.h"
#include "kiln/kernels/op_attributes.h"

namespace kiln::hal::cpu {

class ProgramBuilder;
struct BufferRef;

// One way to run an op: a fast path, or the portable path.
struct OpPath {
  std::string_view op_type;  // empty for the portable path
  Status (*check)(const OpReader& op);
  Status (*build)(ProgramBuilder& builder);
  // Which inputs hold samples when the path computes each sample alone (sample_groups.h).
  SampleInputs sample_inputs = SampleInputs::none();
};

// The fast path of an op type; nullptr when there is none.
const OpPath* find_fast_path(std::string_view op_type);
// The path that runs this dispatch, chosen from the concrete dispatch only. Errors: the
// definition's when it refuses the dispatch; else the fast path's when neither it nor the
// portable path can run it; else the portable path's (naming the unsupported detail).
StatusOr<const OpPath*> select_path(const OpReader& op);
// Whether the dispatch reads only its inputs' dims, never their bytes (Shape, Size): it takes an
// input in any layout, and a view over another value's bytes costs it nothing.
bool reads_dims_only(const OpReader& op);
// Every op type the backend runs (specialized or portable), sorted.
std::vector<std::string> supported_op_types();

// Per family (conv_op.cc, pool_op.cc, ...).
Status check_conv(const OpReader& op);
Status build_conv(ProgramBuilder& b);
Status check_pool(const OpReader& op);
Status build_pool(ProgramBuilder& b);
// ReduceMean over spatial dims, as a global average pool (pool_op.cc).
Status check_reduce_mean(const OpReader& op);
Status build_reduce_mean(ProgramBuilder& b);
Status check_batch_norm(const OpReader& op);
Status build_batch_norm(ProgramBuilder& b);
Status check_eltwise(const OpReader& op);
Status build_eltwise(ProgramBuilder& b);
Status check_binary(const OpReader& op);
Status build_binary(ProgramBuilder& b);
Status check_sum(const OpReader& op);
Status build_sum(ProgramBuilder& b);
Status check_gemm(const OpReader& op);
Status build_gemm(ProgramBuilder& b);
Status check_matmul(const OpReader& op);
Status build_matmul(ProgramBuilder& b);
// Whether kiln's gemm can compute `op`'s conv as a matrix product over its pixels: f32 data on a
// CPU it runs on, group 1, 1x1 kernels, no padding. Spatial sizes and strides are the caller's
// to check (conv_runs_as_product below; conv_op.cc's channels-last rule).
bool unpadded_pointwise(const OpReader& op, const kernels::ConvAttributes& conv);
// A Conv of 1x1 kernels on inputs whose spatial dims are all 1 (a squeeze-and-excitation block's
// fully connected convs, [N, C, 1, 1]), group 1, no padding, f32, where kiln's gemm runs: a matrix
// product Y[N, M] = X[N, C] W^T (+ bias, + residual) on it, each row (sample) alone.
// oneDNN's 1x1 kernel took ~60-80 us for EfficientNet-B0's 1152 -> 48.
bool conv_runs_as_product(const OpReader& op, const kernels::ConvAttributes& conv);
// Appends that product for the dispatch being built: on plain data (single pixels), or, with
// `channels_last`, on 4-D NHWC data of any spatial size, a row per pixel:
// Y[N * pixels, M] = X[N * pixels, C] W^T (conv_op.cc decides where: 1x1, no padding, where
// oneDNN keeps the data channels last). X is the conv's input, or where not null, `pixels`: the
// pixels a strided conv reads, already copied out channels last at the output's spatial dims
// (a temporary of the dispatch). Relu runs in the product's epilogue, another activation as kiln's
// step after it. Each row's bits do not depend on the rows around it (gemm_kernel.h), so a
// sample's do not depend on the batch.
Status build_conv_as_product(ProgramBuilder& b, const kernels::FusedActivation& activation,
                             bool channels_last = false, const BufferRef* pixels = nullptr);
// Whether the MatMul fast path reads input `slot` of `op` in place when it is stored as a dense
// strided layout of its dims with `strides`: B and kiln_values' V in any (kiln's kernel packs them
// from any strides), A where its last dim is contiguous (the kernel reads A's rows with a row
// stride). A Transpose before it then hands it a strided view of its input instead of a copy
// (transpose_op.cc).
bool matmul_reads_in_place(const OpReader& op, size_t slot, const std::vector<int64_t>& strides);
Status check_qlinear_conv(const OpReader& op);  // qlinear_op.cc: oneDNN int8
Status build_qlinear_conv(ProgramBuilder& b);
Status check_qlinear_matmul(const OpReader& op);
Status build_qlinear_matmul(ProgramBuilder& b);
Status check_quantize_linear(const OpReader& op);  // qlinear_op.cc: element-wise, any layout
Status build_quantize_linear(ProgramBuilder& b);
Status check_dequantize_linear(const OpReader& op);
Status build_dequantize_linear(ProgramBuilder& b);
Status check_softmax(const OpReader& op);
Status build_softmax(ProgramBuilder& b);
Status check_layer_norm(const OpReader& op);  // layer_norm_op.cc: kiln's row kernel
Status build_layer_norm(ProgramBuilder& b);
Status check_concat(const OpReader& op);  // concat_op.cc: copies in the first input's layout
Status build_concat(ProgramBuilder& b);
Status check_resize(const OpReader& op);  // resize_op.cc: kiln's kernel in the input's layout
Status build_resize(ProgramBuilder& b);
Status check_transpose(const OpReader& op);  // transpose_op.cc: a oneDNN reorder
Status build_transpose(ProgramBuilder& b);
Status check_reshape(const OpReader& op);  // Reshape and Flatten
Status build_reshape(ProgramBuilder& b);
Status check_identity(const OpReader& op);  // Identity and Dropout
Status build_identity(ProgramBuilder& b);
// portable_op.cc: the dispatch against its op definition, and the portable path (any op of
// kiln::kernels).
Status check_definition(const OpReader& op);
Status check_portable(const OpReader& op);
Status build_portable(ProgramBuilder& b);
// The portable path's step with the kernel `make` gives instead of the definition's (a fast
// path that is the op's own kernel with faster parts, recurrent_op.cc); `what` names it in the
// step's label.
Status build_kernel(ProgramBuilder& b, kernels::MakeFn make, std::string_view what);
// recurrent_op.cc: LSTM, GRU and RNN with kiln's AVX2 gemm kernel for the weight products.
Status check_recurrent(const OpReader& op);
Status build_recurrent(ProgramBuilder& b);

}  // namespace kiln::hal::cpu
