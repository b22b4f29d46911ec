#include "core/stats.h"

#include <algorithm>
#include <cmath>

namespace myriad {

void Distribution::Add(double v) {
  if (sorted_ && !samples_.empty() && v < samples_.back()) sorted_ = false;
  samples_.push_back(static_cast<float>(v));
  sum_ += v;
}

void Distribution::Sort() const {
  if (!sorted_) {
    std::sort(samples_.begin(), samples_.end());
    sorted_ = true;
  }
}

double Distribution::Quantile(double q) const {
  if (samples_.empty()) return 0;
  Sort();
  q = std::clamp(q, 0.0, 1.0);
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(samples_.size())));
  if (rank == 0) rank = 1;
  return samples_[rank - 1];
}

double Distribution::FractionAtMost(double threshold) const {
  if (samples_.empty()) return 0;
  Sort();
  auto it = std::upper_bound(samples_.begin(), samples_.end(), static_cast<float>(threshold));
  return static_cast<double>(it - samples_.begin()) / static_cast<double>(samples_.size());
}

Summary Distribution::Summarize() const {
  Summary s;
  s.count = samples_.size();
  if (s.count == 0) return s;
  s.mean = mean();
  if (sorted_) {
    s.min = samples_.front();
    s.max = samples_.back();
    s.p50 = Quantile(0.50);
    s.p90 = Quantile(0.90);
    s.p99 = Quantile(0.99);
    return s;
  }
  // Three selections instead of a full sort: each partitions the part above the previous one,
  // so the work is linear, which matters for tens of millions of samples.
  auto rank = [&](double q) {
    size_t r = static_cast<size_t>(std::ceil(q * static_cast<double>(samples_.size())));
    return (r == 0 ? size_t{1} : r) - 1;
  };
  auto begin = samples_.begin();
  const size_t r50 = rank(0.50), r90 = rank(0.90), r99 = rank(0.99);
  std::nth_element(begin, begin + static_cast<std::ptrdiff_t>(r50), samples_.end());
  s.p50 = samples_[r50];
  s.min = *std::min_element(begin, begin + static_cast<std::ptrdiff_t>(r50 + 1));
  std::nth_element(begin + static_cast<std::ptrdiff_t>(r50), begin + static_cast<std::ptrdiff_t>(r90), samples_.end());
  s.p90 = samples_[r90];
  std::nth_element(begin + static_cast<std::ptrdiff_t>(r90), begin + static_cast<std::ptrdiff_t>(r99), samples_.end());
  s.p99 = samples_[r99];
  s.max = *std::max_element(begin + static_cast<std::ptrdiff_t>(r99), samples_.end());
  return s;
}

void TimeWeighted::Set(Nanos now, double value) {
  if (now > last_) {
    area_ += value_ * NanosToSeconds(now - last_);
    last_ = now;
  }
  value_ = value;
}

double TimeWeighted::Integral(Nanos now) const {
  return area_ + (now > last_ ? value_ * NanosToSeconds(now - last_) : 0.0);
}

double TimeWeighted::Average(Nanos now) const {
  double span = NanosToSeconds(now - start_);
  return span > 0 ? Integral(now) / span : value_;
}

}  // namespace myriad
