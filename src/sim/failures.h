#pragma once
// Faults in the simulated cluster and the practices that contain them. Injection (random, at
// the configured rates per GPU-hour, and scripted) and the time each recovery stage takes are
// the simulator's own; detection and the decisions (drain, restart, the warmup gate before
// re-admission, cordon) are policy::FleetController's, the object `myriad control` runs against
// real engines, driven here through FleetLoop: a scrape of every unit each heartbeat interval
// (reachable unless its process is gone, running and waiting sequences, steps as the progress
// counter, per-rank step times each telemetry window) and the known-answer probe (wrong while
// the unit is silently corrupt). A restart is the recovery pipeline (eject, stop, spare node,
// weight load, communicator init, warm-up, readiness), with a spare pool and shared storage
// bandwidth; a cordoned unit is repaired the same way (a node replaced) and comes back through
// the gate. The cluster around it retries in-flight work.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "core/rng.h"
#include "core/stats.h"
#include "perf/moe_step.h"
#include "policy/backend_health.h"
#include "policy/eplb.h"
#include "policy/straggler.h"
#include "sim/event_queue.h"
#include "sim/fleet_loop.h"
#include "sim/scenario.h"
#include "sim/shared_bandwidth.h"
#include "sim/topology.h"
#include "sim/unit.h"

namespace myriad::sim {

// A `moe:` pool as its units step now: elastic EP derives a degraded unit's model from it.
struct MoePoolView {
  const perf::MoeStepModel* model = nullptr;          // null: not a `moe:` pool
  const perf::ExpertPopularity* popularity = nullptr;
  const policy::EplbPlacement* placement = nullptr;   // null: not an EPLB placement
  int swaps = 0;                                      // anti-affinity swaps in the initial placement
};

// What the failure model asks of the cluster.
class FailureHost {
 public:
  virtual ~FailureHost() = default;
  // Every request the unit holds is retried elsewhere; the unit is left empty.
  virtual void EvacuateUnit(int unit) = 0;
  virtual MoePoolView MoePool(int /*pool*/) const { return {}; }
};

struct FaultRecord {
  FaultKind kind = FaultKind::kCrash;
  Nanos at = 0;
  int unit = -1;       // -1: a spare node, or a cluster-wide fault
  Nanos detected = -1;
  Nanos recovered = -1;
  std::string detected_by;
  bool absorbed = false;  // hit a unit already down: recovered with it
  double factor = 1;      // stragglers
  int rank = -1;          // the unit's GPU it hit (-1: not tied to one)
  Nanos resumed = -1;     // elastic EP: serving again, degraded, before the rebuild ends
  // Elastic EP on a `moe:` unit: the hottest live GPU's expert load while degraded (mean over
  // layers, x the unit's GPUs: 1 is a perfectly balanced whole unit), and the surviving copies'
  // re-placement, if made: weights moved and the pause to fetch them.
  double degraded_imbalance = 0;
  double replaced_bytes = -1;
  Nanos replace_pause = 0;
};

class FailureModel : private FleetLoop {
 public:
  static absl::StatusOr<std::unique_ptr<FailureModel>> Create(const Scenario& s, EventQueue& events,
                                                              const std::vector<std::unique_ptr<Unit>>& units,
                                                              const std::vector<Placement>& placements,
                                                              FailureHost& host);

  // Schedules the faults of the run (random ones drawn now, from the seed) and the telemetry.
  void Start(Nanos horizon);

  // A request sent to the unit fails at once because its process is gone (connection refused):
  // true for a crashed unit not yet ejected. Counts toward passive ejection.
  bool RefusesWork(int unit);

  // The unit answers wrongly (silent corruption not yet caught).
  bool corrupt(int unit) const { return state_[static_cast<size_t>(unit)].corrupt; }
  // The controller's actions, one line each as `myriad control` logs them.
  using FleetLoop::timeline;

  // Availability per pool over time, faults with their detection and recovery, time to detect
  // and recover per kind, the slow-node radar.
  nlohmann::ordered_json Report(Nanos end) const;
  // Fraction of pool `pool`'s unit-time in [from, to) that its units were serving.
  double Availability(int pool, Nanos from, Nanos to) const;

  // A `moe:` pool's expert popularity or placement changed (drift, rebalancing): its degraded
  // units follow the popularity on their own placement.
  void MoeLoadChanged(int pool);

  const std::vector<FaultRecord>& faults() const { return faults_; }
  int spares() const { return spares_; }

 private:
  struct UnitState {
    bool stopped = false;     // a fault stopped it dead, not yet restarted
    bool crashed = false;     // its process is gone: scrapes fail and requests are refused
    bool corrupt = false;
    bool rebuilding = false;  // restarted (or repaired): the recovery pipeline is under way
    bool draining = false;    // a planned restart waits for its in-flight work
    bool planned = false;     // the restart under way is planned maintenance
    bool ejected = false;     // the router ejected it for refused requests (passive ejection)
    int fault = -1;         // record being handled
    int nodes_needed = 0;   // nodes to take from the spare pool
    bool node_to_maintenance = false;
    int slow_fault = -1;    // the straggler record slowing it, if any
    int slow_rank = -1;
    double slow = 1;
    Nanos slow_since = 0;
    uint64_t steps_seen = 0;
    policy::BackendHealth passive;  // refused requests in a row (passive ejection)
    std::vector<std::pair<Nanos, Nanos>> down;  // intervals not serving correctly; -1: open
    bool elastic = false;      // elastic EP: will serve degraded while rebuilt
    bool elastic_node = false; // it lost a node (else one GPU's rank)
    bool degraded = false;     // serving with fewer ranks now
    double elastic_slow = 1;   // its step-time factor from the lost ranks' experts
    double elastic_live = 1;   // the fraction of its ranks left
    Nanos degraded_since = 0;
    Nanos degraded_total = 0;
    // A degraded `moe:` unit steps with its own model: the placement it keeps while degraded
    // (the lost GPUs' slots -1, or re-placed over the live GPUs) and its dead ranks.
    std::vector<int32_t> moe_phy2log;
    std::unique_ptr<perf::MoeStepModel> moe;
  };

  FailureModel(const Scenario& s, EventQueue& events, const std::vector<std::unique_ptr<Unit>>& units,
               const std::vector<Placement>& placements, FailureHost& host);
  void Inject(int fault);
  void HitUnit(int unit, int fault, bool needs_node);
  void MarkDown(int unit);
  // The fault the controller's verdict is about (a straggler flagged on a healthy rank, or a
  // hang with no fault behind it, gets a record of its own: a false positive).
  int Blame(int unit, const policy::FleetAction& a);
  void Detected(int fault, const char* by);
  // The world's side of the controller (FleetLoop): scrapes, probes and actions.
  void BeginRound() override;
  policy::EngineObservation Observe(int unit) override;
  policy::ProbeOutcome Probe(int unit) override;
  void Act(int unit, const policy::FleetAction& a) override;
  // The recovery pipeline: a restart (or the repair of a cordoned unit) stops the unit, takes
  // spare nodes for its bad ones, loads weights, sets up the communicator and warms up; then
  // the controller's gate decides the re-admission.
  void Restart(int unit);
  void BeginDrain(int unit);
  void Eject(int unit);
  void TakeSpares(int unit);
  void ServeSpareQueue();
  void LoadWeights(int unit);
  void Rebuilt(int unit);
  void Readmit(int unit);
  // The unit's slow rank is gone (replaced, or the slowness passed).
  void ClearSlow(int unit);
  // Per-rank step times of the telemetry window ending now (lognormal jitter, the slow rank's
  // factor for the part of the window it was slow).
  void StepTimes(int unit, std::vector<double>& out);
  void ReturnNodes(int n, Nanos after);
  // Elastic EP (failures_elastic.cc): per pool, which lost node or GPU leaves every expert a
  // live copy, and the degraded unit's step-time factor then.
  struct ElasticPool {
    bool applies = false;
    bool moe = false;  // a `moe:` pool: the verdict is taken at the fault, on its placement then
    int gpus_per_node = 1;
    std::vector<uint8_t> node_ok, gpu_ok;
    std::vector<double> node_slow, gpu_slow;
    int swaps = 0;  // anti-affinity swaps made in the pool's placement
  };
  absl::Status BuildElastic();
  // After ejection: whether the unit's fault leaves it able to serve degraded; if so, it
  // resumes after the reconfiguration while its rebuild goes on.
  bool MaybeDegrade(int unit, bool node_lost);
  absl::Status BuildElasticMoe(size_t pool, ElasticPool& e);
  // The verdict on each single-node and single-GPU loss of a unit of `gpus`, into e's node_*
  // and gpu_* lists: whether it survives and the degraded figure the verdict returns.
  using LossVerdict = std::function<double(std::span<const int> dead, bool* survives)>;
  static void RecordLosses(ElasticPool& e, int gpus, const LossVerdict& verdict);
  // A `moe:` unit that lost `dead` GPUs: whether every expert keeps a live copy on its pool's
  // placement; if so its degraded model is made (re-placing the copies when asked).
  bool PrepareDegradedMoe(int unit, std::span<const int> dead, FaultRecord& f);
  void RefreshDegradedLoad(int unit, const perf::ExpertPopularity& pop);
  void ResumeDegraded(int unit, int fault);
  // The degraded unit is whole again (rebuilt), or stops after all (a second fault).
  void EndDegraded(int unit);
  void ApplySlowdown(int unit);
  nlohmann::ordered_json ElasticReport(Nanos end) const;
  int UnitOfGpu(int gpu) const;
  int PoolOf(int unit) const { return units_[static_cast<size_t>(unit)]->config().pool; }

  const Scenario& s_;
  const FaultConfig& cfg_;
  EventQueue& events_;
  const std::vector<std::unique_ptr<Unit>>& units_;
  const std::vector<Placement>& placements_;
  FailureHost& host_;
  Rng rng_;
  std::vector<UnitState> state_;
  std::vector<FaultRecord> faults_;
  std::deque<int> waiting_spares_;  // units waiting for spare nodes, first come first served
  int spares_ = 0;
  int spares_min_ = 0;
  int spares_initial_ = 0;
  int64_t spare_waits_ = 0;
  SharedBandwidth storage_;
  std::vector<double> weight_bytes_per_node_;  // per pool
  bool window_ = false;     // this scrape closes a straggler telemetry window
  Nanos next_window_ = 0;
  std::vector<ElasticPool> elastic_;  // per pool; empty when elastic EP is off
  int64_t elastic_kept_ = 0;          // faults a unit rode out degraded
  int64_t elastic_stopped_ = 0;       // eligible faults whose placement left an expert orphaned
  int64_t replacements_ = 0;          // `moe:` units whose surviving copies were re-placed
  double replaced_bytes_ = 0;
  Nanos replace_pause_ = 0;
  Nanos horizon_ = 0;
};

}  // namespace myriad::sim
