#include "kiln/kernels/fft.h"

#include <cmath>

namespace kiln::kernels {
namespace {

using Complex = std::complex<double>;

constexpr double kPi = 3.141592653589793238462643383279502884;

// exp(-2 pi i num / den) for 0 <= num < den.
Complex unit_root(int64_t num, int64_t den) {
  const double angle = -2 * kPi * static_cast<double>(num) / static_cast<double>(den);
  return {std::cos(angle), std::sin(angle)};
}

// One decimation-in-time pass per factor: the length-`len` transform of in[0], in[stride], ...
// into out[0, len), where tw holds the n-th roots of unity of the whole transform and `scratch`
// at least the largest factor's elements.
void transform(const Complex* in, int64_t stride, Complex* out, int64_t len, const int64_t* factors,
               const Complex* tw, int64_t n, Complex* scratch) {
  if (len == 1) {
    out[0] = in[0];
    return;
  }
  const int64_t p = factors[0];
  const int64_t m = len / p;
  const int64_t step = n / len;  // tw[j * step] = exp(-2 pi i j / len)
  for (int64_t r = 0; r < p; ++r) {
    transform(in + r * stride, stride * p, out + r * m, m, factors + 1, tw, n, scratch);
  }
  if (p == 2) {
    for (int64_t k = 0; k < m; ++k) {
      const Complex a = out[k];
      const Complex b = out[m + k] * tw[k * step];
      out[k] = a + b;
      out[m + k] = a - b;
    }
    return;
  }
  // X[k + q m] = sum_r (W_len^(r k) Y_r[k]) W_p^(r q), with W_p^x = tw[(x mod p) * m * step].
  for (int64_t k = 0; k < m; ++k) {
    for (int64_t r = 0; r < p; ++r) scratch[r] = out[r * m + k] * tw[r * k * step];
    for (int64_t q = 0; q < p; ++q) {
      Complex sum = scratch[0];
      for (int64_t r = 1; r < p; ++r) sum += scratch[r] * tw[((r * q) % p) * m * step];
      out[q * m + k] = sum;
    }
  }
}

}  // namespace

FftPlan::FftPlan(int64_t n) : n_(n) {
  int64_t rest = n;
  for (int64_t p = 2; p * p <= rest; ++p) {
    while (rest % p == 0) {
      factors_.push_back(p);
      rest /= p;
    }
  }
  if (rest > 1) factors_.push_back(rest);
  if (factors_.empty() || factors_.back() <= kMaxDirectRadix) {
    twiddles_.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) twiddles_[j] = unit_root(j, n);
    return;
  }
  factors_.clear();
  int64_t m = 1;
  while (m < 2 * n - 1) m *= 2;
  inner_ = std::make_unique<FftPlan>(m);
  chirp_.resize(static_cast<size_t>(n));
  std::vector<Complex> b(static_cast<size_t>(m), Complex(0, 0));
  for (int64_t j = 0; j < n; ++j) {
    // exp(-pi i j^2 / n) = exp(-2 pi i (j^2 mod 2n) / 2n), exact in the integer part.
    const auto square = static_cast<int64_t>((static_cast<unsigned __int128>(j) * j) %
                                             static_cast<unsigned __int128>(2 * n));
    chirp_[j] = unit_root(square, 2 * n);
    b[j] = std::conj(chirp_[j]);
    if (j > 0) b[m - j] = b[j];
  }
  filter_.resize(static_cast<size_t>(m));
  inner_->run(b.data(), filter_.data(), false);
}

FftPlan::~FftPlan() = default;

void FftPlan::mixed_radix(const Complex* in, Complex* out) const {
  int64_t largest = 1;
  for (int64_t p : factors_) largest = std::max(largest, p);
  std::vector<Complex> scratch(static_cast<size_t>(largest));
  transform(in, 1, out, n_, factors_.data(), twiddles_.data(), n_, scratch.data());
}

void FftPlan::bluestein(const Complex* in, Complex* out) const {
  const int64_t m = inner_->size();
  std::vector<Complex> a(static_cast<size_t>(m), Complex(0, 0));
  std::vector<Complex> spectrum(static_cast<size_t>(m));
  for (int64_t j = 0; j < n_; ++j) a[j] = in[j] * chirp_[j];
  inner_->run(a.data(), spectrum.data(), false);
  for (int64_t j = 0; j < m; ++j) spectrum[j] *= filter_[j];
  inner_->run(spectrum.data(), a.data(), true);
  const double scale = 1.0 / static_cast<double>(m);
  for (int64_t k = 0; k < n_; ++k) out[k] = chirp_[k] * a[k] * scale;
}

void FftPlan::run(const Complex* in, Complex* out, bool inverse) const {
  // The inverse transform is conj(forward(conj(x))).
  std::vector<Complex> conjugated;
  if (inverse) {
    conjugated.assign(in, in + n_);
    for (Complex& c : conjugated) c = std::conj(c);
    in = conjugated.data();
  }
  if (inner_) {
    bluestein(in, out);
  } else {
    mixed_radix(in, out);
  }
  if (inverse) {
    for (int64_t k = 0; k < n_; ++k) out[k] = std::conj(out[k]);
  }
}

}  // namespace kiln::kernels
