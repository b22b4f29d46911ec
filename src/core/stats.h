#pragma once
// Distributions kept as samples (exact quantiles), plus a time-weighted average for gauges
// such as "requests in system" (Little's law checks) and utilisation.
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/time.h"

namespace myriad {

struct Summary {
  size_t count = 0;
  double mean = 0, min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};

// Exact (every sample kept) up to kExactLimit samples, then a log-bucketed histogram whose
// quantiles are within 0.25% of the true value (min, max, count and mean stay exact): a day of a
// 10,000-GPU cluster is hundreds of millions of requests, and three latency distributions of
// that many floats would take gigabytes.
class Distribution {
 public:
  static constexpr size_t kExactLimit = size_t{16} << 20;

  void Add(double v);
  void Reserve(size_t n) { samples_.reserve(std::min(n, kExactLimit)); }
  size_t count() const { return count_; }
  double sum() const { return sum_; }
  double mean() const { return count_ == 0 ? 0 : sum_ / static_cast<double>(count_); }
  // Nearest-rank quantile, q in [0, 1]; 0 when empty. Sorts once, lazily.
  double Quantile(double q) const;
  // Fraction of samples <= threshold.
  double FractionAtMost(double threshold) const;
  Summary Summarize() const;
  bool exact() const { return buckets_.empty(); }

  // The histogram's bucket of `v`, and the same by its defining formula (slower); public for
  // the test that they agree.
  static size_t Bucket(double v);
  static size_t BucketByLog(double v);

 private:
  void Sort() const;
  void ToHistogram();
  static double BucketValue(size_t b);
  double HistogramQuantile(double q) const;
  mutable std::vector<float> samples_;
  mutable bool sorted_ = true;
  double sum_ = 0;
  size_t count_ = 0;
  double min_ = 0, max_ = 0;
  std::vector<uint64_t> buckets_;  // histogram mode only
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
