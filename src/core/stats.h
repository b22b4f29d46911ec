#pragma once
// Distributions kept as samples (exact quantiles), plus a time-weighted average for gauges
// such as "requests in system" (Little's law checks) and utilisation.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/time.h"

namespace myriad {

struct Summary {
  size_t count = 0;
  double mean = 0, min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};

class Distribution {
 public:
  void Add(double v);
  void Reserve(size_t n) { samples_.reserve(n); }
  size_t count() const { return samples_.size(); }
  double sum() const { return sum_; }
  double mean() const { return samples_.empty() ? 0 : sum_ / static_cast<double>(samples_.size()); }
  // Nearest-rank quantile, q in [0, 1]; 0 when empty. Sorts once, lazily.
  double Quantile(double q) const;
  // Fraction of samples <= threshold.
  double FractionAtMost(double threshold) const;
  Summary Summarize() const;

 private:
  void Sort() const;
  mutable std::vector<float> samples_;
  mutable bool sorted_ = true;
  double sum_ = 0;
};

// Integral of a piecewise-constant value over time.
class TimeWeighted {
 public:
  explicit TimeWeighted(Nanos start = 0) : last_(start), start_(start) {}
  void Set(Nanos now, double value);
  void Add(Nanos now, double delta) { Set(now, value_ + delta); }
  double value() const { return value_; }
  double Average(Nanos now) const;
  double Integral(Nanos now) const;  // value x seconds

 private:
  double value_ = 0;
  double area_ = 0;  // value x seconds
  Nanos last_;
  Nanos start_;
};

}  // namespace myriad
