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
  Sort();
  s.mean = mean();
  s.min = samples_.front();
  s.max = samples_.back();
  s.p50 = Quantile(0.50);
  s.p90 = Quantile(0.90);
  s.p99 = Quantile(0.99);
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
