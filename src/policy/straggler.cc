#include "policy/straggler.h"

#include <algorithm>
#include <cmath>

namespace myriad::policy {

namespace {

double Median(std::vector<double>& v) {
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  double m = v[mid];
  if (v.size() % 2 == 0) m = (m + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
  return m;
}

}  // namespace

StragglerDetector::StragglerDetector(int ranks, StragglerOptions options)
    : o_(options), streak_(static_cast<size_t>(std::max(ranks, 0)), 0), excess_(streak_.size(), 0.0) {}

void StragglerDetector::Reset() {
  std::fill(streak_.begin(), streak_.end(), 0);
  std::fill(excess_.begin(), excess_.end(), 0.0);
}

std::span<const int> StragglerDetector::Observe(std::span<const double> rank_times) {
  flagged_.clear();
  const size_t n = std::min(rank_times.size(), streak_.size());
  if (n == 0) return flagged_;
  scratch_.assign(rank_times.begin(), rank_times.begin() + static_cast<std::ptrdiff_t>(n));
  const double median = Median(scratch_);
  if (!(median > 0)) return flagged_;
  for (size_t i = 0; i < n; ++i) scratch_[i] = std::abs(rank_times[i] - median);
  const double mad = std::max(Median(scratch_), o_.mad_floor * median);
  const double sigma = 1.4826 * mad;
  for (size_t i = 0; i < n; ++i) {
    const double t = rank_times[i];
    const double rel = t / median - 1;
    excess_[i] += o_.radar_decay * (rel - excess_[i]);
    const bool suspicious = rel >= o_.min_excess && (t - median) >= o_.robust_z * sigma;
    if (!suspicious) {
      streak_[i] = 0;
      continue;
    }
    if (++streak_[i] == o_.windows) flagged_.push_back(static_cast<int>(i));
  }
  return flagged_;
}

std::vector<RadarEntry> TopRadar(std::span<const StragglerDetector* const> units, size_t k) {
  std::vector<RadarEntry> radar;
  for (size_t u = 0; u < units.size(); ++u) {
    if (!units[u]) continue;
    for (int r = 0; r < units[u]->ranks(); ++r) radar.push_back({static_cast<int>(u), r, units[u]->excess(r)});
  }
  const size_t top = std::min(k, radar.size());
  std::partial_sort(radar.begin(), radar.begin() + static_cast<std::ptrdiff_t>(top), radar.end(),
                    [](const RadarEntry& a, const RadarEntry& b) {
                      return a.excess != b.excess ? a.excess > b.excess
                                                  : (a.unit != b.unit ? a.unit < b.unit : a.rank < b.rank);
                    });
  radar.resize(top);
  return radar;
}

}  // namespace myriad::policy
