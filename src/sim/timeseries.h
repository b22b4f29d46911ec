#pragma once
// The run as series over virtual time, for `myriad sim --report` and `--timeseries`: a sampler
// closes one window every `interval` of virtual time (latency percentiles and SLO attainment
// of the requests that ended in it, each pool's busy share and queues, KV and store traffic),
// and the run's faults and controller actions become markers on the same time axis. Nothing
// is collected unless a run asks for it; the run itself is the same with or without it.
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "core/stats.h"
#include "core/time.h"

namespace myriad::sim {

inline constexpr Nanos kDefaultSampleInterval = 10 * kSecond;
inline constexpr size_t kMaxSeriesPoints = 2000;
// The bounds of --sample-interval (docs/simulator.md).
inline constexpr Nanos kMinSampleInterval = kMillisecond;
inline constexpr Nanos kMaxSampleInterval = 1'000'000 * kSecond;

// The interval a run of `horizon` samples at: `requested`, widened (to whole seconds, when
// one second or more) so that the run has at most `max_points` windows.
Nanos EffectiveSampleInterval(Nanos requested, Nanos horizon, size_t max_points = kMaxSeriesPoints);

// Cumulative counters and current levels the cluster reads at each sample; the sampler turns
// counters into per-window rates.
struct ClusterGauges {
  double kv_handoff_bytes = 0;  // prefill -> decode KV hand-offs
  double kv_fetch_bytes = 0;    // peer-to-peer prefix copies
  double store_offload_bytes = 0, store_load_bytes = 0, store_repair_bytes = 0;
  int64_t limiter_shed = 0;
  int64_t rebalances = 0;  // EPLB expert rebalances, all pools
  int64_t in_flight = 0;   // requests admitted and not ended
  int units_down = 0;      // units the router may not use (ejected, draining, rebuilding)
  // Per pool, in the scenario's order: busy unit-time so far, and queued and running sequences.
  std::vector<Nanos> pool_busy;
  std::vector<int64_t> pool_waiting, pool_running;
};

// One window (t_s - window_s, t_s]. Latency figures are NaN when no request completed in it.
struct SeriesPoint {
  double t_s = 0, window_s = 0;
  int64_t arrived = 0, completed = 0, rejected = 0, within_slo = 0;
  double ttft_p50_s = 0, ttft_p99_s = 0, tpot_p50_s = 0, tpot_p99_s = 0;
  double slo_attainment = 0;  // within SLO / (completed + rejected); NaN when none ended
  double goodput_tokens_per_s = 0;
  double cost_per_million_tokens_within_slo = 0;  // NaN when no token met the SLO
  int64_t in_flight = 0;
  int units_down = 0;
  double kv_handoff_gbps = 0, kv_fetch_gbps = 0;  // decimal GB per second
  double store_offload_gbps = 0, store_load_gbps = 0, store_repair_gbps = 0;
  int64_t limiter_shed = 0, rebalances = 0;
  // Markers that fell in the window, by kind.
  int64_t faults = 0, ejections = 0, readmissions = 0, store_node_losses = 0;
  std::vector<double> pool_busy;  // fraction of the pool's unit-time spent stepping, 0..1
  std::vector<int64_t> pool_waiting, pool_running;
};

// A fault or controller action at one instant.
struct Marker {
  enum class Kind { kFault, kEjection, kReadmission, kStoreNodeLoss, kStoreNodeDeclaredDead };
  Kind kind = Kind::kFault;
  double t_s = 0;
  std::string label;
};
std::string_view MarkerKindName(Marker::Kind k);

struct TimeSeries {
  std::string variant;  // the routing policy the run used
  double interval_s = 0;
  double slo_ttft_s = 0, slo_tpot_s = 0;
  std::vector<std::string> pools;
  std::vector<SeriesPoint> points;
  std::vector<Marker> markers;  // in time order
  // Sorts the markers and counts them into their windows.
  void FinishMarkers();
};

class TimeSeriesSampler {
 public:
  // `dollars_per_second`: the whole cluster's price, for cost within SLO per window.
  TimeSeriesSampler(Nanos interval, std::vector<std::string> pools, std::vector<int> pool_units,
                    double dollars_per_second, Nanos slo_ttft, Nanos slo_tpot);

  Nanos interval() const { return interval_; }
  // The request events of the current window.
  void OnArrival() { ++arrived_; }
  void OnReject() { ++rejected_; }
  // `tpot_s` < 0: a one-token answer has no TPOT. `good_tokens`: its tokens when within SLO.
  void OnComplete(double ttft_s, double tpot_s, bool good, int64_t good_tokens);
  // Closes the window ending at `now` (ignored when no time passed since the last).
  void Sample(Nanos now, const ClusterGauges& g);
  // The run's end: a last window up to `now`; when the last sample is at `now` already, the
  // requests cut off at the end are rejections of that last window.
  void Close(Nanos now, const ClusterGauges& g);
  Nanos last_sample() const { return last_; }

  TimeSeries& series() { return series_; }
  const TimeSeries& series() const { return series_; }

 private:
  Nanos interval_;
  std::vector<int> pool_units_;
  double dollars_per_second_;
  TimeSeries series_;
  Nanos last_ = 0;
  ClusterGauges prev_;
  int64_t arrived_ = 0, rejected_ = 0, completed_ = 0, good_ = 0, good_tokens_ = 0;
  Distribution ttft_, tpot_;  // this window's
};

// The series as CSV: a header row, then one row per window and variant (docs/simulator.md,
// "Time series"). Empty fields are undefined values (no completion, no token within SLO).
void WriteSeriesCsv(std::ostream& out, std::span<const TimeSeries> runs);

}  // namespace myriad::sim
