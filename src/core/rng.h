#pragma once
// The one source of randomness. xoshiro256** seeded through splitmix64; the distributions are
// written out here (not <random>'s) so a seed gives the same numbers with every standard library.
#include <cstdint>

namespace myriad {

// splitmix64's output function on x + the golden-ratio increment: a cheap, well-mixed 64-bit
// hash of a counter (seeding, synthetic keys in benchmarks).
inline uint64_t Mix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed);

  uint64_t Next();
  // Uniform in [0, 1).
  double Uniform();
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform integer in [0, n); n > 0.
  uint64_t Below(uint64_t n);
  bool Bernoulli(double p) { return Uniform() < p; }
  double Exponential(double rate);
  double Normal();
  double LogNormal(double mu, double sigma);
  // Marsaglia-Tsang; shape > 0.
  double Gamma(double shape, double scale);
  // Zipf over [0, n) with exponent s, by rejection-inversion (Hormann); O(1) per draw.
  uint64_t Zipf(uint64_t n, double s);

  // An independent stream derived from this generator's seed and a label, so that adding a
  // consumer of randomness does not shift the numbers every other consumer sees.
  Rng Fork(uint64_t label) const;

 private:
  uint64_t seed_;
  uint64_t s_[4];
};

// Zipf over [0, n) with exponent s with its constants worked out once: the same draws as
// Rng::Zipf(n, s) from the same generator, without four powers per draw.
class ZipfSampler {
 public:
  ZipfSampler(uint64_t n, double s);
  uint64_t operator()(Rng& rng) const;

 private:
  double H(double x) const;
  double HInverse(double x) const;

  uint64_t n_;
  double s_;
  bool log_;  // s == 1: h is the logarithm
  double h_x1_ = 0, h_n_ = 0, sd_ = 0;
};

}  // namespace myriad
