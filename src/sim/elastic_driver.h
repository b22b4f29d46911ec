#pragma once
// The simulator's driver of the elasticity policies (policy/autoscaler.h, policy/pd_ratio.h):
// every `elastic.interval` it samples what a fleet controller would scrape (arrival rate, and
// per pool utilisation, queues and step times), asks the policies, and carries out their
// actions with their costs in virtual time. A pool's units are all built up front (its
// `count`); the ones not allocated are shells that take no traffic and cost nothing. A
// scale-out allocates a shell and makes it routable after the scale-out pipeline (node,
// weights from a serving peer or from shared storage, communicator, warm-up, readiness); a
// scale-in stops routing to a unit and frees it once its in-flight work has drained; a role
// switch drains a unit of one pool and brings up a shell of the other after warm-up, the
// weights staying resident. GPU-hours are counted from each unit's allocation.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/autoscaler.h"
#include "policy/pd_ratio.h"
#include "policy/rollout.h"
#include "policy/unit_sleep.h"
#include "policy/weight_plan.h"
#include "sim/event_queue.h"
#include "sim/metrics.h"
#include "sim/scenario.h"
#include "sim/shared_bandwidth.h"
#include "sim/unit.h"

namespace myriad::sim {

class ElasticDriver {
 public:
  // `act` false: observe and report only (the static baseline of a comparison), every unit
  // allocated for the whole run.
  ElasticDriver(const Scenario& s, EventQueue& events, const std::vector<std::unique_ptr<Unit>>& units,
                const RequestMetrics& metrics, bool act);

  // Takes the shells out of routing; call once the units publish their loads.
  void Init();
  // Schedules the controller's ticks until `horizon`.
  void Start(Nanos horizon);

  // GPU-hours and dollars of pool `p` up to `end` (its units' allocations, at its own price).
  double PoolGpuHours(size_t p, Nanos end) const;
  double PoolDollars(size_t p, Nanos end) const { return PoolGpuHours(p, end) * s_.PoolPrice(p); }
  nlohmann::ordered_json Report(Nanos end) const;
  // Units (by index, non-zero) never to drain or switch: a rollout's canary (null: none).
  void Pin(const std::vector<uint8_t>* pinned) { pinned_ = pinned; }
  // How long unit u takes to load another version's weights from a serving peer (or storage)
  // and come back: the scale-out pipeline without acquiring a node.
  Nanos ReloadTime(int u) const;

 private:
  enum class State { kOff, kStarting, kServing, kDraining, kSleeping };
  struct UnitRec {
    State state = State::kServing;
    Nanos alloc_since = 0;  // -1: not allocated
    Nanos allocated = 0;    // closed allocation intervals, summed
    int switch_to = -1;     // draining for a role switch into this pool
    bool sleep_after = false;  // draining to sleep, not to be released
    bool restart_after = false;  // draining for a rolling restart (elastic.restarts)
    Nanos asleep_since = 0;
    Nanos slept = 0;        // closed sleeping intervals, summed
    Nanos last_busy = 0;
    uint64_t last_steps = 0;
    int64_t last_prefilled = 0;
    int64_t last_admitted = 0;
  };
  struct PoolRec {
    std::vector<int> units;
    std::unique_ptr<policy::Autoscaler> scaler;  // null: not autoscaled
    Nanos lead = 0;
    int64_t scale_outs = 0, scale_ins = 0, switched_in = 0, switched_out = 0, sleeps = 0, wakes = 0;
    int peak = 0, low = 0;
    double unit_seconds = 0;  // serving units integrated over time
    policy::PoolSignals last;
  };
  struct ActionRec {
    Nanos at;
    std::string pool, what, reason;
  };
  // A rolling restart in progress or done (elastic.restarts, policy::NextToRestart).
  struct RestartRec {
    Nanos start = -1, end = -1;
    std::vector<int> units;                // the pool's serving units when it began
    std::vector<policy::UnitState> state;  // per units[i]
    struct Event {
      Nanos at;
      int unit;
      bool out;  // true: taken out; false: back serving
    };
    std::vector<Event> events;
  };

  void Tick();
  policy::PoolSignals Sample(size_t p, Nanos dt);
  int Count(size_t p, State st) const;
  void Allocate(int u);
  void Free(int u);
  void ScaleOut(size_t p, int n, const std::string& reason);
  void ScaleIn(size_t p, int n, const std::string& reason);
  // Brings shells started together to serving after the scale-out pipeline, their weights
  // loaded as one plan (policy::PlanWeightLoad) from the pool's `loaded` serving units.
  void BringUp(size_t p, std::vector<int> units, int loaded);
  void Serve(int u);
  // A drained unit keeps its weights and drops its KV; its GPUs are released unless it sleeps
  // on them (policy/unit_sleep.h).
  void Sleep(int u);
  void Wake(int u);
  // The serving unit of pool p with the least work (the last one on ties): cheapest to drain.
  int LeastLoaded(size_t p) const;
  void Record(size_t p, std::string what, std::string reason);
  // Rolling restarts (sim/elastic_restart.cc): the first round at the restart's `at`, then one
  // each tick; a drained unit reloads and comes back.
  void BeginRestart(size_t k);
  void RestartRound(size_t k);
  void Reload(int u);
  void RestartBack(int u);
  nlohmann::ordered_json RestartReport() const;
  void ObserveBurst(double arrival_rate);

  const Scenario& s_;
  EventQueue& events_;
  const std::vector<std::unique_ptr<Unit>>& units_;
  const RequestMetrics& metrics_;
  const bool act_;
  const std::vector<uint8_t>* pinned_ = nullptr;
  std::vector<UnitRec> rec_;
  std::vector<PoolRec> pools_;
  std::unique_ptr<policy::PdRatioController> pd_;
  policy::WeightFabric fabric_;
  SharedBandwidth storage_;
  // Weight loads by plan kind, and the largest batch loaded at once with its two times.
  int64_t plans_[3] = {0, 0, 0};
  int largest_load_ = 0;
  Nanos largest_load_time_ = 0, largest_load_storage_time_ = 0;
  uint64_t last_arrived_ = 0;
  Nanos last_tick_ = 0;
  Nanos horizon_ = 0;
  std::vector<ActionRec> actions_;
  std::vector<RestartRec> restarts_;  // one per elastic.restarts entry
  int64_t actions_total_ = 0;
  // The last tick, from the burst's start, at which a pool's latency signal was over its SLO.
  Nanos burst_over_slo_ = -1;
};

}  // namespace myriad::sim
