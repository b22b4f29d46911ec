#pragma once
// Predictive autoscaling of one pool. The demand forecast is seasonal: the period (a day) is cut
// into time-of-day buckets whose mean arrival rate is learned from the previous periods (an
// exponential average across days), optionally seeded with a configured profile (yesterday's
// curve, exported by the operator) so the first day is predicted too; it scales today's
// observed rate by the curve's shape ahead, so a day busier than yesterday is still followed.
// A rising trend extrapolated over the lead time covers what the curve did not foresee (a
// burst). Units are added when the forecast `lead_time` ahead, plus burst headroom, needs them
// (a new unit serves only after its weights load and it warms up), and removed by drain only
// after the demand has stayed below the pool, by a margin, for `scale_in_dwell`. The pool never
// leaves [min_units, max_units]. Pure: time comes in as `now`.
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/time.h"
#include "policy/option_error.h"

namespace myriad::policy {

class SeasonalForecast {
 public:
  // `profile`: relative rates for equal slices of the period (empty: learn only).
  SeasonalForecast(Nanos period, int buckets, std::vector<double> profile = {}, double learn_rate = 0.5);

  // The arrival rate seen at `now` (call at a steady cadence).
  void Observe(Nanos now, double rate);
  // The rate expected at `at`, given `rate_now` observed at `now`: rate_now times the curve's
  // ratio between the two times. Without a curve for either time (nothing learned, no profile):
  // rate_now.
  double Predict(Nanos now, double rate_now, Nanos at) const;
  // The curve's value for the bucket of `t` (0: unknown).
  double Shape(Nanos t) const;
  int learned_buckets() const;

 private:
  int Bucket(Nanos t) const;
  Nanos period_;
  int buckets_;
  std::vector<double> profile_, learned_;  // per bucket; 0: unknown
  double learn_rate_;
  int open_bucket_ = -1;
  double open_sum_ = 0;
  int64_t open_n_ = 0;
};

struct ScalerOptions {
  int min_units = 1;
  int max_units = 1;
  double target_utilisation = 0.7;  // what a unit should run at
  double headroom = 0.2;            // capacity beyond the forecast, for bursts
  Nanos lead_time = 3 * kMinute;    // ask -> serving (ScaleOutLeadTime)
  Nanos scale_in_dwell = 5 * kMinute;
  double scale_in_margin = 0.15;    // remove only when the need is this far below the pool
  double scale_in_step = 0.25;      // at most this fraction of the pool removed at once
  Nanos smoothing = kMinute;        // time constant of the observed rate
  Nanos trend_window = 3 * kMinute; // the rate's rise is measured over this
};

// The bounds a configuration is held to, one definition for the simulator's elastic.autoscale
// and elastic.forecast and the controller's autoscale (docs/elasticity.md, docs/controller.md).
inline constexpr int kMaxForecastBuckets = 10'000;
// target_utilisation [0.05, 1], headroom [0, 10], lead_time [0s, 1h], scale_in_dwell [0s, 24h],
// scale_in_margin [0, 0.9], scale_in_step [0.01, 1], smoothing and trend_window [1ms, 1h],
// min_units >= 1 and max_units >= min_units; nullopt when all hold.
std::optional<OptionError> CheckScalerOptions(const ScalerOptions& o);
// The keys a configuration sets them by (the units and lead time are each driver's own).
OptionFields ScalerFields(ScalerOptions& o);
// The forecast's period [1m, 168h] and buckets [1, kMaxForecastBuckets].
std::optional<OptionError> CheckForecast(Nanos period, int buckets);

// What a controller scrapes for one pool.
struct ScalerSignals {
  double arrival_rate = 0;     // requests/s offered to the service
  int serving = 0;             // units taking traffic
  int starting = 0;            // units asked for, not serving yet
  double utilisation = 0;      // mean over the serving units, 0..1
  double latency_over_slo = 0; // the pool's latency percentile / its SLO
};

// The decode pool's latency signal, from what its engines export: the worse of the mean step
// time over the TPOT SLO and the wait for a decode slot over the TTFT SLO (a disaggregated
// request's first token comes from its first decode step, so that wait is part of its TTFT,
// and a full pool can hold thousands of sequences at a step time well under the TPOT SLO). The
// wait is Little's law: the sequences waiting at the end of the window over the rate sequences
// took slots during it; a queue no sequence left for the whole window has waited at least the
// window.
struct DecodeWindow {
  double busy_s = 0;    // step time in the window, summed over the pool's serving units
  double steps = 0;     // steps in the window, summed likewise
  double waiting = 0;   // sequences waiting for a slot at the end of the window
  double admitted = 0;  // sequences that took a slot during the window
  double window_s = 0;
};
double DecodeLatencyOverSlo(const DecodeWindow& w, Nanos tpot_slo, Nanos ttft_slo);

struct ScaleAction {
  int delta = 0;        // > 0: add units; < 0: drain and remove units
  Nanos ready_by = 0;   // when added units are expected to serve
  int desired = 0;
  double forecast = 0;  // requests/s expected at now + lead_time
  std::string reason;
};

class Autoscaler {
 public:
  Autoscaler(ScalerOptions o, SeasonalForecast forecast);

  std::optional<ScaleAction> Decide(const ScalerSignals& s, Nanos now);

  // Requests/s one unit serves fully busy (learned; 0 until observed).
  double unit_capacity() const { return unit_capacity_; }
  const ScalerOptions& options() const { return o_; }
  const SeasonalForecast& forecast() const { return forecast_; }

 private:
  ScalerOptions o_;
  SeasonalForecast forecast_;
  double rate_ = -1;  // smoothed
  Nanos rate_time_ = 0;
  std::deque<std::pair<Nanos, double>> history_;  // smoothed rate over the trend window
  double unit_capacity_ = 0;
  Nanos below_since_ = -1;  // the need has been below the pool since
};

}  // namespace myriad::policy
