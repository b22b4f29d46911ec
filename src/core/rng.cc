#include "core/rng.h"

#include <cmath>

namespace myriad {
namespace {

uint64_t SplitMix(uint64_t& x) {
  const uint64_t z = Mix64(x);
  x += 0x9e3779b97f4a7c15ULL;
  return z;
}

inline uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(uint64_t seed) : seed_(seed) {
  uint64_t x = seed;
  for (auto& s : s_) s = SplitMix(x);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

uint64_t Rng::Below(uint64_t n) {
  // Lemire's multiply-shift with rejection: unbiased.
  unsigned __int128 m = static_cast<unsigned __int128>(Next()) * n;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < n) {
    const uint64_t threshold = -n % n;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(Next()) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

double Rng::Exponential(double rate) { return -std::log1p(-Uniform()) / rate; }

double Rng::Normal() {
  // Box-Muller; one value per call keeps the stream position simple to reason about.
  double u1 = Uniform();
  double u2 = Uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double Rng::LogNormal(double mu, double sigma) { return std::exp(mu + sigma * Normal()); }

double Rng::Gamma(double shape, double scale) {
  if (shape < 1.0) {
    double u = Uniform();
    return Gamma(shape + 1.0, scale) * std::pow(u < 1e-300 ? 1e-300 : u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = Normal();
    double v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = Uniform();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v * scale;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v * scale;
  }
}

uint64_t Rng::Zipf(uint64_t n, double s) { return ZipfSampler(n, s)(*this); }

// Rejection-inversion sampling (W. Hormann, G. Derflinger 1996) over ranks 1..n.
ZipfSampler::ZipfSampler(uint64_t n, double s) : n_(n), s_(s), log_(std::abs(s - 1.0) < 1e-9) {
  if (n <= 1) return;
  h_x1_ = H(1.5) - 1.0;
  h_n_ = H(static_cast<double>(n) + 0.5);
  sd_ = 1.0 - HInverse(H(2.5) - std::pow(2.0, -s));
}

double ZipfSampler::H(double x) const { return log_ ? std::log(x) : (std::pow(x, 1.0 - s_) - 1.0) / (1.0 - s_); }
double ZipfSampler::HInverse(double x) const {
  return log_ ? std::exp(x) : std::pow(1.0 + x * (1.0 - s_), 1.0 / (1.0 - s_));
}

uint64_t ZipfSampler::operator()(Rng& rng) const {
  if (n_ <= 1) return 0;
  for (;;) {
    const double u = h_n_ + rng.Uniform() * (h_x1_ - h_n_);
    const double x = HInverse(u);
    double k = std::floor(x + 0.5);
    if (k < 1) k = 1;
    if (k > static_cast<double>(n_)) k = static_cast<double>(n_);
    if (k - x <= sd_ || u >= H(k + 0.5) - std::pow(k, -s_)) return static_cast<uint64_t>(k) - 1;
  }
}

Rng Rng::Fork(uint64_t label) const {
  uint64_t x = seed_ ^ (label * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL);
  return Rng(SplitMix(x));
}

}  // namespace myriad
