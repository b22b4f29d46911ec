#pragma once
// Straggler detection from per-rank compute times. Each window the unit reports one figure per
// rank (its mean compute time per step over the window, before waiting at the collective: the
// wall time of a synchronous step is the same on every rank). A rank is suspicious in a window
// when it is both `min_excess` slower than the unit's median and `robust_z` robust standard
// deviations (1.4826 x median absolute deviation) above it; it is flagged only after
// `windows` suspicious windows in a row, so one noisy step or one uneven batch is never a
// straggler. An exponentially weighted excess per rank feeds the slow-node radar.
#include <cstdint>
#include <span>
#include <vector>

namespace myriad::policy {

struct StragglerOptions {
  double min_excess = 0.10;  // slower than the median by at least this fraction
  double robust_z = 5.0;
  int windows = 3;           // consecutive suspicious windows before flagging
  double mad_floor = 0.01;   // relative floor on the MAD, for units with almost no spread
  double radar_decay = 0.2;  // weight of the newest window in the radar's excess
};

class StragglerDetector {
 public:
  StragglerDetector(int ranks, StragglerOptions options);

  // One window of per-rank compute times (any unit of time). Returns the ranks that reached
  // `windows` suspicious windows in a row with this one (each rank once per streak).
  std::span<const int> Observe(std::span<const double> rank_times);

  // The radar's figure for a rank: smoothed (time / unit median - 1).
  double excess(int rank) const { return excess_[static_cast<size_t>(rank)]; }
  int ranks() const { return static_cast<int>(streak_.size()); }
  // After the unit is rebuilt: the old ranks' history no longer applies.
  void Reset();

 private:
  StragglerOptions o_;
  std::vector<int> streak_;
  std::vector<double> excess_;
  std::vector<double> scratch_;
  std::vector<int> flagged_;
};

// One rank on the slow-node radar.
struct RadarEntry {
  int unit;
  int rank;
  double excess;
};
// The `k` ranks with the largest smoothed excess over every unit's detector (unit = index in
// `units`; a null detector has no ranks), largest first, ties by unit then rank: the ranks an
// operator should look at first.
std::vector<RadarEntry> TopRadar(std::span<const StragglerDetector* const> units, size_t k);

}  // namespace myriad::policy
