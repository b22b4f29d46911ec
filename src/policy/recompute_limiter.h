#pragma once
// A cap on the rate of prefill work admitted, so that losing a cache tier (or a unit's
// in-flight requests) turns into a bounded recompute load instead of a storm that swamps every
// prefill GPU and misses the SLO for everyone. A token bucket over prompt tokens to compute,
// refilled at `tokens_per_s`; lower priority classes must leave a reserve in the bucket, so as
// it drains they are shed first (HTTP 429) and the most important traffic keeps flowing.
#include <cstdint>
#include <span>

#include "core/time.h"
#include "policy/prefill_cost.h"

namespace myriad::policy {

struct RecomputeLimiterOptions {
  double tokens_per_s = 0;     // 0 disables the limiter
  double burst_seconds = 5;    // bucket depth, in seconds of the rate
  // A request `levels` classes below the top must leave this fraction of the bucket per level
  // (at most `max_reserve`).
  double reserve_per_level = 0.25;
  double max_reserve = 0.75;
};

// Both drivers configure the limiter in one unit: a fraction of the nominal prefill throughput
// of the units that take new prompts (PrefillCost::ThroughputTokensPerSecond, the router's own
// cost model; the simulator's faults.recompute_limit, the gateway's routing.recompute_limit),
// so that one setting means the same in a simulated cluster and behind the gateway, and
// follows the fleet as units come and go. The result is the limiter's tokens_per_s.
double RecomputeTokensPerSecond(double fraction, std::span<const PrefillCost* const> entry_units);

class RecomputeLimiter {
 public:
  explicit RecomputeLimiter(RecomputeLimiterOptions o);

  // Admits `tokens` of prefill at `now` for a request `levels_below_top` priority classes
  // under the most important one (0: top). False: shed it.
  bool Admit(Nanos now, double tokens, int levels_below_top);
  // Work that must be redone whatever the load (a failed unit's requests, mid-stream): always
  // admitted, it takes its tokens from the bucket, going into debt if need be, so that new
  // arrivals are the ones shed until the recompute has been paid for.
  void Charge(Nanos now, double tokens);
  // The fleet changed (RecomputeTokensPerSecond again). Capacity added comes with its share of
  // a full bucket, as a limiter built with the new rate would have; capacity removed takes
  // its share away.
  void SetRate(Nanos now, double tokens_per_s);

  bool enabled() const { return o_.tokens_per_s > 0; }
  double level() const { return level_; }
  double depth() const { return depth_; }
  double rate() const { return o_.tokens_per_s; }
  uint64_t shed() const { return shed_; }

 private:
  void Refill(Nanos now);
  // Whether Admit lets it through, without taking anything.
  bool WouldAdmit(Nanos now, double tokens, int levels_below_top);
  RecomputeLimiterOptions o_;
  double depth_ = 0, level_ = 0;
  Nanos last_ = 0;
  uint64_t shed_ = 0;
};

}  // namespace myriad::policy
