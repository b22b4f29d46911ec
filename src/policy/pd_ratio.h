#pragma once
// The prefill/decode ratio: moves serving units between a prefill pool and a decode pool of the
// same card and unit size when one is pressed and the other is idle. A switch keeps the
// weights resident (no load) but costs a drain of the unit's in-flight work and a warm-up in
// its new role, so the controller acts only on a sustained imbalance (hysteresis: a high and a
// low threshold that must both hold for `confirm`) and waits `dwell` between switches, so noise
// around a threshold never makes it flap. Pure: time comes in as `now`.
#include <cstdint>
#include <optional>
#include <string>

#include "core/time.h"
#include "policy/option_error.h"

namespace myriad::policy {

// What a controller scrapes per pool (the simulator samples the same).
struct PoolSignals {
  int units = 0;               // serving units (not draining, not starting)
  double utilisation = 0;      // 0..1: compute busy (prefill), KV / sequence occupancy (decode)
  double queue_per_unit = 0;   // requests waiting for admission, per serving unit
  double latency_over_slo = 0; // the pool's latency percentile over its SLO (TTFT for prefill,
                               // TPOT for decode); 1: at the SLO
};

struct PdRatioOptions {
  double high = 0.85;          // a pool this pressed wants a unit
  double low = 0.5;            // a pool this idle may give one
  double queue_high = 4;       // waiting requests per unit that count as fully pressed
  Nanos confirm = 2 * kMinute; // the imbalance must hold this long
  Nanos dwell = 5 * kMinute;   // at least this long between switches
  int min_units = 1;           // neither pool is drained below this
};

// high [0.01, 100], low [0, 100] and below high, queue_high [0, 1e6], confirm and dwell
// [0s, 24h], min_units >= 1 (each configuration bounds it above by its pools); nullopt when all
// hold. The simulator's elastic.pd_ratio and the controller's pd_ratio both check with it.
std::optional<OptionError> CheckPdRatioOptions(const PdRatioOptions& o);
// The keys a configuration sets them by (min_units is each configuration's own).
OptionFields PdRatioFields(PdRatioOptions& o);

enum class PdSide { kPrefill, kDecode };

struct RoleSwitch {
  PdSide from = PdSide::kPrefill;  // the pool that gives a unit
  PdSide to = PdSide::kDecode;
  std::string reason;
};

// One number per pool: the worst of utilisation, queue and latency, each scaled so that 1 is
// "at capacity".
double Pressure(const PoolSignals& s, const PdRatioOptions& o);

class PdRatioController {
 public:
  explicit PdRatioController(PdRatioOptions o) : o_(o) {}

  // Observes both pools at `now` (call at a steady cadence); returns a switch to make, if any.
  std::optional<RoleSwitch> Decide(const PoolSignals& prefill, const PoolSignals& decode, Nanos now);

  const PdRatioOptions& options() const { return o_; }
  int64_t switches() const { return switches_; }

 private:
  PdRatioOptions o_;
  std::optional<PdSide> wanting_;  // the side pressed while the other is idle
  Nanos since_ = 0;                // when that imbalance began
  Nanos last_switch_ = -1;
  int64_t switches_ = 0;
};

}  // namespace myriad::policy
