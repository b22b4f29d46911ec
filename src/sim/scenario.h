#pragma once
// A simulation scenario: the cluster, the model, the pools of serving units, the workload,
// the routing policy, the SLOs and the price, as read from a YAML file.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "perf/step_model.h"
#include "policy/tenants.h"
#include "sim/elastic_config.h"
#include "sim/fault_config.h"
#include "sim/store_config.h"
#include "sim/synthetic_workload.h"
#include "sim/trace_workload.h"
#include "sim/unit.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace myriad {
class YamlReader;
}  // namespace myriad

namespace myriad::sim {

// The largest cluster a scenario may describe (hardware, and after --scale): prefix caches take
// about 74 KiB per GPU, so this is some 19 GiB of them.
inline constexpr int kMaxGpus = 262'144;
// The longest `duration` or `drain`: their sum stays far inside the nanosecond clock.
inline constexpr Nanos kMaxScenarioTime = 10'000 * kHour;
// Per pool: redundant_experts beyond the model's experts.
inline constexpr int kMaxRedundantExperts = 65'536;

struct HardwareConfig {
  std::string gpu = "H200";
  int nodes = 1;
  int gpus_per_node = 8;
  int nodes_per_rack = 16;  // nodes under one leaf group; flows between racks cross the spine
  double nic_gbps = 400;    // per GPU
  double spine_oversubscription = 1.0;
  int gpus() const { return nodes * gpus_per_node; }
};

// Rank-by-rank MoE stepping for a pool (perf/moe_step.h): expert popularity, placement and
// the unit-level remedies.
struct MoeConfig {
  bool enabled = false;
  double expert_skew = 0.5;          // Zipf exponent of expert popularity per layer
  std::string placement = "eplb";    // eplb | contiguous | balanced
  bool two_batch_overlap = false;
  bool dp_padding = true;
  // Popularity drift: every drift_interval, drift_fraction of each layer's experts trade
  // places in the popularity order (0: static).
  Nanos drift_interval = 0;
  double drift_fraction = 0.05;
  // EPLB rebalancing from the moving average of observed loads (0: the placement of t=0
  // stays); the pool's units pause while the moved experts' weights arrive.
  Nanos rebalance_interval = 0;
  // incremental: move only what brings the balance near a fresh EPLB's
  // (policy::ReplaceIncrementally); full: move to the fresh placement.
  std::string rebalance_mode = "incremental";
  // incremental: how far above the fresh placement's max/mean a layer may stay.
  double rebalance_tolerance = 0.02;
};

struct PoolConfig {
  std::string name;
  Role role = Role::kColocated;
  int count = 1;
  perf::UnitLayout layout;
  int max_batch_tokens = 8192;  // per DP rank per step
  int max_seqs = 128;           // running sequences per DP rank
  int max_waiting = 0;          // queued requests per unit before new ones are rejected; 0: no cap
  MoeConfig moe;
  // The pool's own card and its price (empty / negative: hardware.gpu and gpu_hour_price).
  std::string gpu;
  double gpu_hour_price = -1;
};

struct WorkloadConfig {
  std::string type = "synthetic";  // synthetic | mooncake | azure
  SyntheticOptions synthetic;
  std::string trace_path;          // resolved relative to the scenario file
  TraceReplayOptions replay;
};

struct RouterConfig {
  // random | round-robin | least-loaded | prefix-only | kv-aware, optionally with +spread
  // (hot-prefix spreading) and +fair (tenant fairness).
  std::string policy = "least-loaded";
  Nanos event_delay = 50 * kMillisecond;  // engine cache event -> index
  double event_loss = 0;                  // probability an event batch is lost
  bool event_replay = false;              // a gap asks the engine's replay socket (vLLM's replay_endpoint)
  double reject_factor = 0;               // 429 when estimated TTFT > factor x SLO; 0: never
  int64_t disagg_min_uncached = 0;        // prefill on the decode unit below this many tokens
  double hot_queue_seconds = 0.5;         // a holder queued longer than this is saturated
  int64_t index_max_entries = int64_t{64} << 20;
  Nanos provisional_ttl = 2 * kSecond;
  double contention = 0.5;                // fairness: contended above this x SLO
  // P/D: from a prefill's end to the start of its KV hand-off, the decode pick included. A
  // vLLM-style proxy (our gateway) reads the prefill engine's whole answer and then opens the
  // decode call: a second exchange of a few milliseconds per request. 0: instant.
  Nanos handoff_delay = 0;
  // Each pool's prefill cost learned from its simulated first-token times (as the gateway
  // learns each backend's, policy/backend_cost_model.h); false: the performance model alone.
  bool learn_cost = true;
};

struct SloConfig {
  Nanos ttft = 2 * kSecond;
  Nanos tpot = 100 * kMillisecond;
};

struct Scenario {
  std::string name;
  uint64_t seed = 1;
  Nanos duration = kHour;   // arrivals stop here
  Nanos drain = 10 * kMinute;  // then in-flight requests get this long to finish
  HardwareConfig hardware;
  std::string model = "DeepSeek-V3";
  std::vector<PoolConfig> pools;
  WorkloadConfig workload;
  RouterConfig router;
  std::vector<policy::TenantConfig> tenants;
  SloConfig slo;
  double gpu_hour_price = 2.0;  // dollars
  int kv_block_tokens = 256;
  perf::Calibration calibration;
  FaultConfig faults;  // enabled only when the scenario has a `faults:` section
  StoreConfig store;   // enabled only when the scenario has a `store:` section
  ElasticConfig elastic;  // enabled only when the scenario has an `elastic:` section
  const std::string& PoolGpu(size_t p) const { return pools[p].gpu.empty() ? hardware.gpu : pools[p].gpu; }
  double PoolPrice(size_t p) const { return pools[p].gpu_hour_price >= 0 ? pools[p].gpu_hour_price : gpu_hour_price; }
  // GPU-hours are counted per pool from each unit's allocation (elasticity, or pools with their
  // own card or price) rather than as the whole cluster for the whole run.
  bool PerPoolAccounting() const;
};

// Errors name the file, the line and the key: "default.yaml:12: pools[0].layout.tp: ...".
absl::StatusOr<Scenario> ParseScenario(std::string_view yaml, const std::string& source_name);
absl::StatusOr<Scenario> LoadScenario(const std::string& path);
// The same, from a tree already read (errors name the tree's own lines): `myriad plan` builds a
// scenario's common part out of a plan spec's keys this way.
absl::StatusOr<Scenario> ParseScenarioTree(const YAML::Node& root, const std::string& source_name,
                                           const std::string& source_dir);
// One pool's `layout:` mapping at key path `path` (defaults: nodes from tp x dp), checked against
// the cluster's node size and count.
absl::Status ParseUnitLayout(const YamlReader& rd, const YAML::Node& layout, const std::string& path,
                             const HardwareConfig& hw, perf::UnitLayout* out);
// One pool's `moe:` mapping at key path `path` (rank-by-rank MoE stepping; sets `enabled`).
absl::Status ParseMoeConfig(const YamlReader& rd, const YAML::Node& moe, const std::string& path, MoeConfig* out);
// The same, after applying overrides "a.b.0.c=value" (keys, or list indices) to the YAML.
absl::StatusOr<Scenario> LoadScenario(const std::string& path, const std::vector<std::string>& overrides);

// Scales the cluster, every pool's unit count and the workload's rate by `factor`, keeping the
// shape: the cost-versus-size benchmark uses it. Fails if a count would round to zero, or the
// result would pass kMaxGpus or kMaxSimulatedRequests.
absl::Status ScaleScenario(Scenario& s, double factor);

// Multiplies the offered load alone (synthetic arrival rate, or a trace's replay speed) by
// `factor`, leaving the cluster as it is. Fails past kMaxSimulatedRequests.
absl::Status ScaleLoad(Scenario& s, double factor);

std::string_view RoleName(Role r);

}  // namespace myriad::sim
