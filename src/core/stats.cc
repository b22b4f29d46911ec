#include "core/stats.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

namespace myriad {

namespace {

// Buckets grow by 0.5%: [1e-9 x 1.005^(b-1), 1e-9 x 1.005^b) for b >= 1; bucket 0 holds
// everything below 1e-9 (zero and negative values included).
constexpr double kFloor = 1e-9;
constexpr double kGrowth = 1.005;
const double kLogGrowth = std::log(kGrowth);
constexpr size_t kBuckets = 12000;  // up to ~1e17: far beyond any latency or size here

uint64_t Bits(double v) { return std::bit_cast<uint64_t>(v); }

// Bucket() without the logarithm: a day of the full cluster adds some 600 million samples
// once the exact limit is passed. The first bucket of each value is found exactly as the
// logarithm defines it (a binary search over the doubles around the nominal edge), so the
// two always agree; a value's bucket is then estimated from its exponent and the top eight
// bits of its mantissa (never more than one too low) and corrected against the edges.
class BucketEdges {
 public:
  BucketEdges() {
    for (size_t i = 0; i < 256; ++i) log2_mantissa_[i] = std::log2(1.0 + static_cast<double>(i) / 256);
    lower_[0] = -std::numeric_limits<double>::infinity();
    for (size_t b = 1; b < kBuckets; ++b) {
      // Positive doubles order as their bit patterns: search those for the first in b.
      const double nominal = kFloor * std::exp(static_cast<double>(b - 1) * kLogGrowth);
      uint64_t lo = Bits(nominal * (1 - 1e-9)), hi = Bits(nominal * (1 + 1e-9));
      if (b == 1) lo = Bits(kFloor) - 1;
      while (lo + 1 < hi) {  // invariant: Bucket(lo) < b <= Bucket(hi)
        const uint64_t mid = lo + (hi - lo) / 2;
        (BucketByLog(std::bit_cast<double>(mid)) >= b ? hi : lo) = mid;
      }
      lower_[b] = std::bit_cast<double>(hi);
    }
    lower_[kBuckets] = std::numeric_limits<double>::infinity();
  }

  size_t Bucket(double v) const {
    if (!(v >= kFloor)) return 0;
    if (v >= lower_[kBuckets - 1]) return kBuckets - 1;
    const uint64_t bits = Bits(v);
    const double log2v = static_cast<double>(static_cast<int64_t>(bits >> 52) - 1023) +
                         log2_mantissa_[(bits >> 44) & 255];  // at most log2(1 + 1/256) low
    size_t b = static_cast<size_t>(std::max((log2v - kLog2Floor) / kLog2Growth + 1, 1.0));
    b = std::min(b, kBuckets - 1);
    while (v >= lower_[b + 1]) ++b;
    while (v < lower_[b]) --b;
    return b;
  }

  static size_t BucketByLog(double v) {
    if (!(v >= kFloor)) return 0;
    // Clamped before the conversion: beyond ~1.8e299 the quotient overflows to infinity.
    const double b = std::floor(std::log(v / kFloor) / kLogGrowth) + 1;
    return static_cast<size_t>(std::min(b, static_cast<double>(kBuckets - 1)));
  }

 private:
  inline static const double kLog2Floor = std::log2(kFloor);
  inline static const double kLog2Growth = std::log2(kGrowth);
  std::array<double, 256> log2_mantissa_;
  std::array<double, kBuckets + 1> lower_;  // lower_[b]: the least double in bucket b; then +inf
};

const BucketEdges& Edges() {
  static const BucketEdges edges;
  return edges;
}

}  // namespace

size_t Distribution::Bucket(double v) { return Edges().Bucket(v); }
size_t Distribution::BucketByLog(double v) { return BucketEdges::BucketByLog(v); }

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
