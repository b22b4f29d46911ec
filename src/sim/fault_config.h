#pragma once
// What goes wrong in a simulated cluster and how the cluster copes: fault kinds with their
// rates, scripted faults for tests, and the settings of detection, straggler eviction,
// recovery and the recompute limiter (the scenario's `faults:` section).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "policy/backend_health.h"
#include "policy/health.h"
#include "policy/recovery.h"
#include "policy/straggler.h"

namespace myriad {
class YamlReader;
}  // namespace myriad

namespace myriad::sim {

using Reader = YamlReader;

enum class FaultKind {
  kCrash,          // a GPU or host part dies: the process exits, the node is replaced
  kSoftwareCrash,  // the engine process exits: restarted in place
  kHang,           // a collective stalls (NCCL watchdog timeout): restarted in place
  kNic,            // a NIC dies: the unit's collectives stall, the node is replaced
  kNetwork,        // a cable or switch port: the node is cut off, its unit stalls
  kSwitch,         // a leaf switch: every node of a rack is cut off
  kSdc,            // silent data corruption: wrong answers until a probe catches it
  kStraggler,      // a rank slowed by a factor (thermal throttling, ECC retries, noisy neighbour)
  kMaintenance,    // a host drained for maintenance: planned, nothing lost
  kCacheLoss,      // a KV cache tier lost: cached prefixes gone on a fraction of the units
};
inline constexpr int kFaultKinds = 10;
std::string_view FaultKindName(FaultKind k);
absl::StatusOr<FaultKind> ParseFaultKind(std::string_view name);

// Per GPU-hour, except switch and cache_loss: per hour for the whole cluster. Defaults: the
// Llama 3 paper's interruption counts over 54 days on 16,384 H100 (arXiv 2407.21783, Table 5;
// reference/PUBLIC_DATA.md), mapped to kinds as fault_config.cc says. Leaf-switch and
// cache-tier losses have no public rate: 0 unless set.
std::array<double, kFaultKinds> DefaultFaultRates();

struct ScriptedFault {
  Nanos at = 0;
  FaultKind kind = FaultKind::kCrash;
  int unit = -1;        // target unit (global index in pool order); -1 with `pool`/`index`
  int rack = -1;        // kSwitch
  int rank = 0;         // kStraggler: which DP rank
  double factor = 1.5;  // kStraggler
  Nanos duration = 0;   // kStraggler: how long it lasts if not evicted; 0: until evicted
  double fraction = 1.0;  // kCacheLoss: share of the entry units that lose their cache
};

struct StragglerDetection {
  bool enabled = true;       // cordon and replace flagged ranks
  Nanos interval = 30 * kSecond;  // telemetry window
  double noise = 0.03;       // per-rank jitter of compute time in a window (lognormal sigma)
  policy::StragglerOptions options;
};

// Elastic EP: a unit whose lost rank (a node, for faults that take one) leaves every expert a
// live copy keeps serving with fewer ranks while the node is replaced, instead of stopping.
// Applies to pools with expert parallelism and redundant experts: those stepped by the
// evenly-loaded model (slowed by a factor from a placement made for the purpose) and those with
// a `moe:` section and an EPLB placement (stepped rank by rank without the lost ranks, on the
// pool's own placement, which then keeps these copies); other units stop as a whole.
struct ElasticEpConfig {
  bool enabled = false;
  // Copies of every expert before the redundant slots go by load (as far as the slots allow):
  // with one, a GPU's loss orphans whatever it alone holds.
  int min_copies = 2;
  // Place the redundant copies on distinct nodes after EPLB (policy::SpreadReplicas).
  bool spread = true;
  // Rebuilding the communicator without the lost ranks, and again with the new node; -1: the
  // recovery's comm_init.
  Nanos reconfigure = -1;
  // `moe:` pools: after a loss, a fresh EPLB of the experts over the live GPUs (the weights
  // each fetches from peers are charged, after the reconfiguration) instead of leaving the lost
  // copies' load on the surviving ones.
  bool rebalance = false;
  // incremental: keep the surviving slots and move only what brings the balance near the fresh
  // EPLB's (policy::ReplaceIncrementally); full: the fresh EPLB's placement.
  std::string rebalance_mode = "incremental";
  double rebalance_tolerance = 0.02;  // incremental: how far above the fresh max/mean it may stay
};

struct FaultConfig {
  bool enabled = false;  // a `faults:` section was given
  std::array<double, kFaultKinds> rates{};  // see DefaultFaultRates for the units
  double rate_scale = 1.0;
  std::vector<ScriptedFault> scripted;
  // Random stragglers: factor uniform in [min, max], lasting an exponential time of this mean.
  double straggler_factor_min = 1.2, straggler_factor_max = 2.0;
  Nanos straggler_duration = 2 * kHour;
  Nanos maintenance_duration = 4 * kHour;
  Nanos drain_timeout = 5 * kMinute;  // maintenance: in-flight work gets this long to finish
  policy::DetectionOptions detection;
  // Passive ejection (faults.detection.eject_after_errors): the gateway's state machine and
  // default; the units' heartbeat and watchdog detection is `detection`'s.
  policy::BackendHealthOptions backend_health;
  StragglerDetection stragglers;
  policy::RecoveryOptions recovery;
  int spare_nodes = -1;       // -1: every node no unit uses
  int max_retries = 3;        // per request, before it is failed with a reason
  // Cap on prefill tokens admitted per second, as a fraction of the entry pools' nominal
  // prefill throughput; 0 disables the limiter.
  double recompute_limit = 1.0;
  Nanos timeline_bucket = 0;  // 0: duration / 48
  ElasticEpConfig elastic_ep;
};

// Parses the `faults:` mapping; errors name the file, line and key.
absl::Status ParseFaults(const Reader& rd, const YAML::Node& n, FaultConfig* out);
// The recovery pipeline's stage times and weight sources under `path` (faults.recovery, or
// elastic.scale_out with spare_nodes null: no eject, stop, repair or spare pool there).
absl::Status ParseRecovery(const Reader& rd, const YAML::Node& n, const std::string& path,
                           policy::RecoveryOptions* out, int* spare_nodes);
// The expert re-placement settings `rebalance_mode` (incremental or full) and
// `rebalance_tolerance` of node `n` at `where` (a pool's moe: section, faults.elastic_ep).
absl::Status ParseReplaceSettings(const Reader& rd, const YAML::Node& n, const std::string& where, std::string* mode,
                                  double* tolerance);

}  // namespace myriad::sim
