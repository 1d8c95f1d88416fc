// Glue between kiln and oneDNN: converting oneDNN's C++ exceptions into Status (library code
// never lets one escape), dims and memory descriptors for kiln shapes, and the layout queries the
// backend's planning relies on (plain or blocked, per-sample stride). Values of the floating
// dtypes oneDNN stores (f32, f16, bf16) have oneDNN layouts; a layout's data type is its value's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "kiln/base/status.h"
#include "kiln/base/tensor.h"

namespace kiln::hal::cpu {

using dnnl_dims = dnnl::memory::dims;
using dnnl_desc = dnnl::memory::desc;

// Runs `fn` (which may throw dnnl::error or std::bad_alloc) and returns its Status; an exception
// becomes an Unimplemented (unsupported configuration) or OutOfRange (allocation) Status naming
// `what` and oneDNN's message.
template <typename Fn>
Status catch_dnnl(const char* what, Fn&& fn) {
  try {
    return std::forward<Fn>(fn)();
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_out_of_memory) return out_of_range("{}: oneDNN is out of memory", what);
    return unimplemented("{}: oneDNN rejected it: {}", what, e.what());
  } catch (const std::bad_alloc&) {
    return out_of_range("{}: out of memory", what);
  }
}

// The oneDNN data type values of `dtype` are stored in (f32, f16, bf16); nullopt for the dtypes
// the backend keeps as plain bytes only.
std::optional<dnnl::memory::data_type> stored_data_type(DType dtype);

// kiln dims as oneDNN dims; a rank-0 shape becomes {1} (oneDNN has no scalars).
dnnl_dims to_dnnl_dims(std::span<const int64_t> shape);
// Row-major descriptor of `shape` (a kiln shape or oneDNN dims; rank 0 becomes {1}).
dnnl_desc plain_desc(std::span<const int64_t> shape,
                     dnnl::memory::data_type type = dnnl::memory::data_type::f32);
// Descriptor with explicit element strides.
dnnl_desc strided_desc(const dnnl_dims& dims, const dnnl_dims& strides,
                       dnnl::memory::data_type type = dnnl::memory::data_type::f32);
// `desc`'s layout (dims, strides, blocking) holding elements of `type`.
dnnl_desc with_data_type(const dnnl_desc& desc, dnnl::memory::data_type type);
// Whether `desc` is the row-major layout of its dims.
bool is_plain(const dnnl_desc& desc);

// Whether `layout` holds more elements than its dims (a blocked layout whose channels do not fill
// the last block): the extra ones must stay zero.
bool has_padding(const dnnl_desc& layout);

// The element strides of a layout that is one strided view of its dims (plain, or a permutation
// such as channels-last acdb: no blocking, no padding, no offset); nullopt for others.
std::optional<dnnl_dims> dense_strides(const dnnl_desc& desc);

// Byte distance between consecutive samples (dim 0) when the layout stores each sample as one
// contiguous block of the same structure (dim 0 outermost, not blocked); nullopt otherwise.
std::optional<size_t> sample_stride_bytes(const dnnl_desc& desc);
// One sample of a layout that stores its samples as sample_stride_bytes says (dim 0 set to 1,
// the strides kept); nullopt where it does not. with_batch is its inverse.
std::optional<dnnl_desc> one_sample_layout(const dnnl_desc& desc);
// The layout `one_sample` (dim 0 == 1, per sample_stride_bytes) extended to `batch` samples.
// Error when the layout does not store samples contiguously.
StatusOr<dnnl_desc> with_batch(const dnnl_desc& one_sample, int64_t batch);

// `dims` in the channel blocking `blocked` has (nChw8c, nChw16c and their 3-D/5-D kin), or nullopt
// when `blocked` is not such a layout.
std::optional<dnnl_desc> alike_blocked(const dnnl_desc& blocked, const dnnl_dims& dims);

// Offset, in elements, of the element at logical `index` (one entry per dim) in a blocked layout
// (plain, strided or blocked, e.g. nChw8c).
int64_t element_offset(const dnnl_desc& desc, std::span<const int64_t> index);

// "f32", "f16", "bf16", ...
std::string describe_data_type(dnnl::memory::data_type type);
// "nChw16c 8x64x56x56"-style description for messages and executable summaries; a data type
// other than f32 leads ("f16 nChw16c 8x64x56x56").
std::string describe(const dnnl_desc& desc);

// Implementation name of a primitive descriptor ("jit:avx2", "brgconv:avx512_core", ...).
std::string impl_name(const dnnl::primitive_desc_base& pd);
// Whether `pd`'s post-ops include a sum: it adds its destination's first contents (kiln's
// residual). oneDNN's primitive_attr::get_post_ops() hands out a view into the attribute it is
// called on, so this keeps that attribute alive while it reads the view.
bool sums_into_destination(const dnnl::primitive_desc_base& pd);
// Whether results of an implementation may depend on the minibatch: gemm-based kernels spread
// the reduction of one output over threads according to how much other work exists (measured
// with oneDNN 2.6: x64:gemm:jit inner product and matmul give different rounding at mb 8 than
// at mb 1, while brgemm/jit direct kernels are bitwise batch invariant).
bool reduction_may_depend_on_batch(const std::string& impl);
// The same question for a convolution: also true for brgconv, whose blocking of output
// positions can span images when an image has few of them (measured with oneDNN 2.6 on AVX-512:
// a 3x3 conv with 3x4 outputs rounds sample 0 differently at mb 2 than at mb 1, by up to 3e-4).
bool conv_reduction_may_depend_on_batch(const std::string& impl);
// The brgconv part of that answer: whether the kernel's blocking of output positions may span
// images (conv_batch_probe.h tells, for given primitives, whether it does).
bool conv_blocking_may_span_images(const std::string& impl);
// Whether oneDNN's effective ISA (the CPU's, capped by DNNL_MAX_CPU_ISA) includes AVX-512
// (avx512_core or above): kiln's own kernels use AVX-512 only where oneDNN would, so
// DNNL_MAX_CPU_ISA=AVX2 runs their AVX2 code on any CPU.
bool dnnl_allows_avx512();
// Whether an implementation is oneDNN's reference (portable C++, "ref:any"): what oneDNN falls
// back to for a data type this CPU has no kernel for.
bool is_reference_impl(const std::string& impl);

}  // namespace kiln::hal::cpu
