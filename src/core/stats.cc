#include "core/stats.h"

#include <algorithm>
#include <cmath>

namespace myriad {

namespace {

// Buckets grow by 0.5%: [1e-9 x 1.005^(b-1), 1e-9 x 1.005^b) for b >= 1; bucket 0 holds
// everything below 1e-9 (zero and negative values included).
constexpr double kFloor = 1e-9;
constexpr double kGrowth = 1.005;
const double kLogGrowth = std::log(kGrowth);
constexpr size_t kBuckets = 12000;  // up to ~1e17: far beyond any latency or size here

}  // namespace

size_t Distribution::Bucket(double v) {
  if (!(v >= kFloor)) return 0;
  const double b = std::floor(std::log(v / kFloor) / kLogGrowth) + 1;
  return std::min(static_cast<size_t>(b), kBuckets - 1);
}

double Distribution::BucketValue(size_t b) {
  if (b == 0) return 0;
  // The geometric middle of the bucket: within 0.25% of anything in it.
  return kFloor * std::exp((static_cast<double>(b) - 0.5) * kLogGrowth);
}

void Distribution::ToHistogram() {
  buckets_.assign(kBuckets, 0);
  for (float x : samples_) ++buckets_[Bucket(x)];
  samples_.clear();
  samples_.shrink_to_fit();
}

void Distribution::Add(double v) {
  if (count_ == 0 || v < min_) min_ = v;
  if (count_ == 0 || v > max_) max_ = v;
  ++count_;
  sum_ += v;
  if (!buckets_.empty()) {
    ++buckets_[Bucket(v)];
    return;
  }
  if (sorted_ && !samples_.empty() && v < samples_.back()) sorted_ = false;
  samples_.push_back(static_cast<float>(v));
  if (samples_.size() >= kExactLimit) ToHistogram();
}

void Distribution::Sort() const {
  if (!sorted_) {
    std::sort(samples_.begin(), samples_.end());
    sorted_ = true;
  }
}

double Distribution::HistogramQuantile(double q) const {
  size_t rank = static_cast<size_t>(std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(count_)));
  if (rank == 0) rank = 1;
  size_t seen = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    seen += buckets_[b];
    if (seen >= rank) return std::clamp(BucketValue(b), min_, max_);
  }
  return max_;
}

double Distribution::Quantile(double q) const {
  if (count_ == 0) return 0;
  if (!buckets_.empty()) return HistogramQuantile(q);
  Sort();
  q = std::clamp(q, 0.0, 1.0);
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(samples_.size())));
  if (rank == 0) rank = 1;
  return samples_[rank - 1];
}

double Distribution::FractionAtMost(double threshold) const {
  if (count_ == 0) return 0;
  if (!buckets_.empty()) {
    // Whole buckets at or below the threshold's bucket: resolution 0.5%.
    const size_t last = Bucket(threshold);
    uint64_t n = 0;
    for (size_t b = 0; b <= last; ++b) n += buckets_[b];
    return static_cast<double>(n) / static_cast<double>(count_);
  }
  Sort();
  auto it = std::upper_bound(samples_.begin(), samples_.end(), static_cast<float>(threshold));
  return static_cast<double>(it - samples_.begin()) / static_cast<double>(samples_.size());
}

Summary Distribution::Summarize() const {
  Summary s;
  s.count = count_;
  if (s.count == 0) return s;
  s.mean = mean();
  if (!buckets_.empty()) {
    s.min = min_;
    s.max = max_;
    s.p50 = HistogramQuantile(0.50);
    s.p90 = HistogramQuantile(0.90);
    s.p99 = HistogramQuantile(0.99);
    return s;
  }
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
