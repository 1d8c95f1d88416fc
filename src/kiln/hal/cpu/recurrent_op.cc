// LSTM, GRU and RNN on AVX2 + FMA hosts: the ops' own kernel (kernels/recurrent.h) with its
// weight products (the input projection of every step as one product, the recurrent product per
// step) run by kiln's gemm kernel (gemm_kernel.h) on weights packed once per direction and run.
// That kernel computes each element by one fixed sequence of operations whatever the number of
// rows, so a batch entry's result does not depend on the batch (docs/architecture.md invariant
// 4). Elsewhere (no AVX2 + FMA, f16, f64) the portable path runs the same kernel with its own
// loop.
#include <cstdlib>
#include <memory>

#include "kiln/hal/cpu/gemm_kernel.h"
#include "kiln/hal/cpu/op_table.h"
#include "kiln/hal/cpu/program_builder.h"
#include "kiln/kernels/recurrent.h"

namespace kiln::hal::cpu {
namespace {

class GemmWeightProduct : public kernels::WeightProduct {
 public:
  // B = w^T [k, n]: element (r, c) at w[c * k + r].
  GemmWeightProduct(const float* w, int64_t n, int64_t k)
      : n_(n),
        k_(k),
        packed_(static_cast<float*>(std::aligned_alloc(
                    32, static_cast<size_t>(gemm::packed_floats(k, n)) * sizeof(float))),
                &std::free) {
    const int64_t offsets[] = {0};
    gemm::pack(k, n, w, offsets, 1, k, packed_.get());
  }

  void multiply(int64_t m, const float* a, int64_t lda, float* y, int64_t ldy) const override {
    gemm::Product p = gemm::dense_product(m, k_, n_);
    p.lda = lda;
    p.ldy = ldy;
    const int64_t offsets[] = {0};
    gemm::multiply(p, a, offsets, packed_.get(), offsets, y, 0);
  }

 private:
  int64_t n_, k_;
  std::unique_ptr<float, decltype(&std::free)> packed_;
};

std::unique_ptr<kernels::WeightProduct> make_gemm_product(const float* w, int64_t n, int64_t k) {
  return std::make_unique<GemmWeightProduct>(w, n, k);
}

template <const char* kOpType>
StatusOr<std::unique_ptr<kernels::Kernel>> make_with_gemm(const kernels::MakeArgs& args) {
  return kernels::make_recurrent_kernel(args, kOpType, make_gemm_product);
}

constexpr char kLstm[] = "LSTM";
constexpr char kGru[] = "GRU";
constexpr char kRnn[] = "RNN";

constexpr size_t kSequenceLens = 4;  // int32, the only input that is not the op's float dtype

}  // namespace

// What this path runs: f32 on a host with AVX2 + FMA. The definition has checked the rest
// (select_path).
Status check_recurrent(const OpReader& op) {
  if (!gemm::cpu_supported()) return unimplemented("kiln's gemm kernel needs AVX2 and FMA");
  for (size_t i = 0; i < op.input_count(); ++i) {
    if (i == kSequenceLens || !op.has_input(i)) continue;
    KILN_RETURN_IF_ERROR(op.expect_input_dtype(i, DType::kF32));
  }
  for (size_t i = 0; i < op.output_count(); ++i) {
    KILN_RETURN_IF_ERROR(op.expect_output_dtype(i, DType::kF32));
  }
  return ok_status();
}

Status build_recurrent(ProgramBuilder& b) {
  const std::string& op_type = b.op().dispatch().op_type;
  const kernels::MakeFn make = op_type == kLstm  ? make_with_gemm<kLstm>
                               : op_type == kGru ? make_with_gemm<kGru>
                                                 : make_with_gemm<kRnn>;
  return build_kernel(b, make, std::string("kiln_gemm:") + gemm::isa_name(gemm::best_isa()));
}

}  // namespace kiln::hal::cpu
