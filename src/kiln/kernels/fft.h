// A compact discrete Fourier transform for the signal ops (signal.cc: DFT, STFT), in double
// precision for every length n >= 1 in O(n log n):
//   - a length whose prime factors are all at most kMaxDirectRadix runs as a mixed-radix
//     Cooley-Tukey transform (decimation in time, one pass per prime factor);
//   - any other length runs Bluestein's chirp-z algorithm: a convolution computed with a
//     power-of-two transform of length >= 2n - 1.
// Twiddle factors are computed directly with cos/sin (no recurrences), so the error stays near
// the rounding of a few operations per pass. A plan is immutable after construction and may be
// run from several threads at once.
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <vector>

namespace kiln::kernels {

class FftPlan {
 public:
  // Prime factors above this go through Bluestein's algorithm.
  static constexpr int64_t kMaxDirectRadix = 31;

  // A plan for length n >= 1 (the caller checks n).
  explicit FftPlan(int64_t n);
  ~FftPlan();
  FftPlan(const FftPlan&) = delete;
  FftPlan& operator=(const FftPlan&) = delete;

  int64_t size() const { return n_; }

  // out[k] = sum_j in[j] * exp(-2 pi i j k / n) (forward) or exp(+2 pi i j k / n) (inverse),
  // for k in [0, n). No scaling: the caller divides an inverse by n. `in` and `out` hold n
  // elements each and must not overlap.
  void run(const std::complex<double>* in, std::complex<double>* out, bool inverse) const;

 private:
  void mixed_radix(const std::complex<double>* in, std::complex<double>* out) const;
  void bluestein(const std::complex<double>* in, std::complex<double>* out) const;

  int64_t n_;
  std::vector<int64_t> factors_;                // prime factors of n (mixed radix), in order
  std::vector<std::complex<double>> twiddles_;  // exp(-2 pi i j / n), j in [0, n)
  // Bluestein: chirp[j] = exp(-pi i j^2 / n), the transform of the conjugate chirp filter, and
  // the power-of-two plan they use.
  std::vector<std::complex<double>> chirp_;
  std::vector<std::complex<double>> filter_;
  std::unique_ptr<FftPlan> inner_;
};

}  // namespace kiln::kernels
