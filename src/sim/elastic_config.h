#pragma once
// The scenario's `elastic:` section: predictive autoscaling per pool and prefill/decode role
// switches (policy/autoscaler.h, policy/pd_ratio.h), with the scale-out pipeline's stage times
// (policy/recovery.h). A pool's `count` is the most units it may have (all built, and all
// allocated when elasticity is off); the section says how many start allocated and the floor.
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "core/time.h"
#include "policy/autoscaler.h"
#include "policy/pd_ratio.h"
#include "policy/recovery.h"
#include "policy/rollout.h"
#include "policy/unit_sleep.h"
#include "sim/rollout_config.h"
#include "sim/yaml_reader.h"

namespace myriad::sim {

// Bounds of the section (documented in docs/elasticity.md).
inline constexpr Nanos kMinElasticInterval = kSecond;
inline constexpr int kMaxSleepingUnits = 1'000'000;

struct AutoscaleConfig {
  std::string pool;
  int pool_index = -1;
  int min = 1;
  int initial = -1;  // -1: the pool's count
  // target_utilisation, headroom and the scale-in keys; the driver sets the units and lead time.
  policy::ScalerOptions scaler;
};

struct PdRatioConfig {
  bool enabled = false;
  std::string prefill, decode;
  int prefill_index = -1, decode_index = -1;
  int prefill_initial = -1, decode_initial = -1;  // -1: the pool's count
  policy::PdRatioOptions options;
};

// A rolling restart of one pool (`elastic.restarts[]`): from `at`, its serving units are taken
// out a few at a time as policy::NextToRestart allows, each drained, reloaded (the scale-out
// pipeline without a node: weights from a peer, communicator, warm-up, readiness) and returned.
struct RestartConfig {
  std::string pool;
  int pool_index = -1;
  Nanos at = 0;
  policy::RestartOptions options;
};
inline constexpr size_t kMaxRestarts = 64;

struct ElasticConfig {
  bool enabled = false;
  bool act = true;  // false: observe only, every unit allocated (the static baseline of --compare)
  Nanos interval = 15 * kSecond;  // the controller's cadence
  Nanos forecast_period = 24 * kHour;
  int forecast_buckets = 96;
  std::vector<double> forecast_profile;
  policy::RecoveryOptions scale_out;
  policy::SleepOptions sleep;  // its warm-up and readiness are scale_out's
  std::vector<AutoscaleConfig> autoscale;
  PdRatioConfig pd_ratio;
  RolloutSimConfig rollout;  // a model rollout with its canary (sim/rollout_config.h)
  std::vector<RestartConfig> restarts;
};

// The fewest units pool `pool` may serve under `c` (its autoscale min, or pd_ratio's min_units;
// INT_MAX when neither resizes it): a rollout's canary units stay below it.
int CanaryFloor(const ElasticConfig& c, int pool);

// `pool_names` and `pool_counts` are the scenario's pools, in order.
absl::Status ParseElastic(const YamlReader& rd, const YAML::Node& n, const std::vector<std::string>& pool_names,
                          const std::vector<int>& pool_counts, ElasticConfig* c);

}  // namespace myriad::sim
