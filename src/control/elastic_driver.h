#pragma once
// `myriad control`'s driver of the elasticity policies, the real path's twin of the simulator's
// sim::ElasticDriver: each round it turns what the engines' /metrics said into the signals of
// policy::Autoscaler (one per autoscaled pool; a pool is the engines of one role) and of
// policy::PdRatioController, asks them, and names the engines their decisions fall on. It decides
// nothing itself and does no I/O: the controller scrapes and carries the actions out.
//
// Signals, per pool: the arrival rate is the requests its engines finished plus the change of
// their in-flight requests (running + waiting) since the last round; an engine's utilisation is
// its in-flight over `engine_concurrency`, or its KV usage when higher, capped at 1, and the
// pool's mean is smoothed with the `smoothing` time constant (a gauge sampled each
// round is noisy where the simulator's busy time is an integral) (`signals` in the config).
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "control/config.h"
#include "core/time.h"
#include "policy/autoscaler.h"
#include "policy/pd_ratio.h"

namespace myriad::control {

// One engine as this round saw it.
struct ElasticEngine {
  enum class Phase {
    kServing,   // taking traffic
    kStarting,  // added, not admitted yet (its known answer not recorded)
    kChanging,  // drained for a restart or a role change, not re-admitted yet
    kOut,       // cordoned, or not reachable
    kRetiring,  // drained for a scale-in, not stopped yet
  };
  std::string name = "";
  std::string role = "";  // prefill, decode, colocated
  Phase phase = Phase::kServing;
  bool reachable = false;
  double running = 0, waiting = 0, kv_usage = 0;
  double finished = 0;  // vllm:request_success_total
};

struct ElasticAction {
  enum class Kind {
    kScaleOut,  // start `count` engines of `role`
    kScaleIn,   // drain `engine`, then stop it once idle
    kSwitch,    // change `engine`'s role to `role`
    kKeep,      // take `engine`, retiring, back into service (a scale-out's fastest capacity)
  };
  Kind kind = Kind::kScaleOut;
  std::string role = "";
  int count = 0;
  std::string engine = "";
  Nanos ready_by = 0;  // scale-out: when the policy expects the new engines to serve
  std::string reason = "";
};

class ElasticDriver {
 public:
  ElasticDriver(const ElasticSignalsConfig& signals, const AutoscaleConfig& autoscale,
                const PdRatioControlConfig& pd_ratio);

  bool enabled() const { return !pools_.empty() || pd_ != nullptr; }
  // One round at `now` over every engine the controller knows (retired ones left out). The
  // first round only takes the counters' baseline.
  std::vector<ElasticAction> Round(Nanos now, const std::vector<ElasticEngine>& engines);

 private:
  struct Pool {
    std::unique_ptr<policy::Autoscaler> scaler;  // null: not autoscaled
    double utilisation = -1;                     // smoothed; -1: not sampled yet
    // Engines asked for and not seen yet (an exec hook's arrive through the gateway's list):
    // starting until the policy's ready_by plus one lead time.
    std::vector<std::pair<Nanos, int>> pending;  // (expires, count)
  };
  struct Sample {
    double rate = 0;
    policy::PoolSignals signals;
    int starting = 0;
  };
  Sample Measure(const std::string& role, Pool& pool, const std::vector<ElasticEngine>& engines, double dt_s);
  // The `n` serving engines of `role` with the least in flight (the last ones on ties): the
  // cheapest to drain.
  std::vector<std::string> LeastLoaded(const std::string& role, int n, const std::vector<ElasticEngine>& engines) const;

  ElasticSignalsConfig signals_;
  std::map<std::string, Pool> pools_;  // by role
  std::unique_ptr<policy::PdRatioController> pd_;
  std::map<std::string, std::pair<double, double>> last_;  // engine -> (finished, in flight)
  std::set<std::string> seen_;                             // every engine name met so far
  Nanos last_round_ = -1;
};

}  // namespace myriad::control
