#pragma once
// `myriad control`'s configuration (docs/controller.md): the engines to watch (or the gateway
// to ask for them), how often to scrape, the detection thresholds of policy/fleet_controller.h,
// the warmup gate's known-answer probe, and the actuators.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "policy/autoscaler.h"
#include "policy/fleet_controller.h"
#include "policy/pd_ratio.h"
#include "policy/rollout.h"

namespace myriad::control {

struct EngineConfig {
  std::string name;  // the gateway's backend name: what drain and undrain address
  std::string url;   // http://host:port of the engine's OpenAI API and /metrics
  std::string role = "colocated";  // its pool: prefill, decode or colocated
};

// An engine's role, which is also the name of its pool.
inline bool IsEngineRole(std::string_view role) {
  return role == "prefill" || role == "decode" || role == "colocated";
}

// Bounds (docs/controller.md).
inline constexpr size_t kMaxEngines = 10'000;
inline constexpr Nanos kMinScrapeInterval = 10 * kMillisecond;
inline constexpr Nanos kMaxScrapeInterval = 10 * kMinute;
inline constexpr Nanos kMaxScrapeTimeout = kMinute;
inline constexpr Nanos kMaxExecTimeout = kHour;
inline constexpr int kMaxProbeTokens = 4096;
inline constexpr Nanos kMaxLeaseTtl = kMinute;
// A serving engine's known-answer probe, unless gate.probe_period says otherwise (0: off).
inline constexpr Nanos kDefaultProbePeriod = kMinute;
// The policy's options as the controller defaults them (the policy itself leaves probes off).
inline policy::FleetControllerOptions DefaultControlPolicy() {
  policy::FleetControllerOptions o;
  o.probe_period = kDefaultProbePeriod;
  return o;
}

// Several controllers, one leader (net/etcd_election.h): only the leader acts; each action is
// recorded under prefix + "/actions/" before it is carried out (policy/action_journal.h), and a
// new leader skips those recorded.
struct HaConfig {
  std::string etcd;  // etcd's client URL; empty: no election, this controller acts alone
  std::string prefix = "/myriad/control";  // the leader key is prefix + "/leader"
  // A dead leader's lease expires within this; a follower then takes over within about it.
  Nanos lease_ttl = 2 * kSecond;
  std::string id;  // this controller's identity; empty: http://LISTEN_HOST:PORT once bound
};

// rollout: the canary of one of the gateway's rollouts, judged each round (control/rollout_driver.h).
struct RolloutJudgeConfig {
  std::string model;  // the gateway's rollout to judge; empty: off
  policy::JudgeOptions judge;
  // Each round, every canary engine answers the gate's probe prompt; an answer other than a
  // stable engine's is a mismatch (the judge rolls back at once).
  bool probe = true;
};

// autoscale: policy::Autoscaler per pool (a pool is the engines of one role), as the
// simulator's `elastic.autoscale` drives it (control/elastic_driver.h).
inline constexpr double kMaxEngineConcurrency = 100'000;
struct PoolBounds {
  int min = 1;
  int max = 1;
};
struct AutoscaleConfig {
  std::map<std::string, PoolBounds> pools;  // by role; empty: no autoscaling
  // The scaler's options; min_units and max_units come from each pool's bounds.
  policy::ScalerOptions scaler;
  Nanos forecast_period = 24 * kHour;
  int forecast_buckets = 96;
};

// signals: how both policies read a pool's load off the engines' metrics.
struct ElasticSignalsConfig {
  // Requests in flight (running + waiting) that make one engine fully busy: its utilisation is
  // in-flight over this, or its KV usage when higher.
  double engine_concurrency = 8;
  // The time constant a pool's utilisation is smoothed with (a gauge sampled once a round).
  Nanos smoothing = 10 * kSecond;
};

// pd_ratio: policy::PdRatioController over the prefill and decode pools.
struct PdRatioControlConfig {
  bool enabled = false;
  policy::PdRatioOptions options;
};

struct ControlConfig {
  std::string listen = "127.0.0.1:9300";
  Nanos scrape_interval = kSecond;
  Nanos scrape_timeout = kSecond;
  // Every field as documented, also for a config built in code (myriad up --control without
  // --control-config).
  policy::FleetControllerOptions policy = DefaultControlPolicy();
  // The warmup gate: a fixed prompt at temperature 0 whose answer is recorded at admission.
  std::string probe_prompt = "The capital of France is";
  int probe_max_tokens = 8;
  std::string probe_model;  // "" : the request names no model (the engine's default)
  Nanos probe_timeout = 30 * kSecond;
  // The gateway's admin API: its backend list when `engines` is empty, and drain/undrain.
  std::string gateway_url;
  std::string gateway_admin_token;
  // The controller's own operator requests (POST /admin/engines/NAME/maintain, repair, role)
  // need `Authorization: Bearer <admin_token>`; empty: they are refused (403).
  std::string admin_token;
  bool drain_in_gateway = true;  // when gateway_url is set
  std::vector<EngineConfig> engines;
  // A shell command per action name (drain, restart, readmit, cordon, change_role, scale_out,
  // stop), run with MYRIAD_ACTION, MYRIAD_TARGET, MYRIAD_TARGET_URL and MYRIAD_REASON (and
  // MYRIAD_ROLE, MYRIAD_COUNT) in its environment.
  std::map<std::string, std::string> exec;
  Nanos exec_timeout = kMinute;
  bool dry_run = false;
  HaConfig ha;
  RolloutJudgeConfig rollout;
  ElasticSignalsConfig signals;
  AutoscaleConfig autoscale;
  PdRatioControlConfig pd_ratio;
};

// `fleet_given`: the caller supplies the engines and the gateway (myriad up --control), so the
// file must name neither.
absl::StatusOr<ControlConfig> ParseControlConfig(std::string_view yaml, std::string_view source,
                                                 bool fleet_given = false);
absl::StatusOr<ControlConfig> LoadControlConfig(const std::string& path, bool fleet_given = false);

}  // namespace myriad::control
