#pragma once
// The scenario's `elastic.rollout:` section (docs/elasticity.md, "Rollout"): a new model version
// on the first units of some pools, the gateway's split sending it a canary share, and
// policy/rollout.h's judge deciding from the simulated SLO and probe verdicts. The canary's
// regression is part of the scenario: slower steps and wrong known answers.
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "core/time.h"
#include "policy/rollout.h"
#include "sim/yaml_reader.h"

namespace myriad::sim {

// Bounds (documented in docs/elasticity.md).
inline constexpr double kMaxCanarySlowdown = 100;

struct CanaryUnits {
  std::string pool;
  int pool_index = -1;
  int units = 1;  // the pool's first `units` units run the new version
};

struct RolloutSimConfig {
  bool enabled = false;
  Nanos start = 0;     // the canary takes its first share (the ladder's first rung) here
  Nanos interval = 0;  // the judge's cadence; 0: elastic.interval
  std::vector<CanaryUnits> canary;
  policy::JudgeOptions judge;
  // The regression: the canary's steps take `slowdown` times as long (1: none), and each judge
  // round every canary unit answers the known-answer probe, wrongly with this probability.
  double slowdown = 1;
  double wrong_answers = 0;
};

// `n` is the rollout mapping at `path`; pools as ParseElastic takes them.
absl::Status ParseRollout(const YamlReader& rd, const YAML::Node& n, const std::string& path,
                          const std::vector<std::string>& pool_names, const std::vector<int>& pool_counts,
                          RolloutSimConfig* c);

}  // namespace myriad::sim
