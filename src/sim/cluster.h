#pragma once
// The simulated cluster: serving units placed on the topology, the router that sends each
// arriving request to a unit, KV hand-off from prefill to decode units over the modelled links,
// and the run loop in virtual time. One seed, one result.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "core/rng.h"
#include "perf/transfer.h"
#include "policy/load_balancer.h"
#include "sim/event_queue.h"
#include "sim/metrics.h"
#include "sim/scenario.h"
#include "sim/topology.h"
#include "sim/unit.h"

namespace myriad::sim {

// Called now and then with the fraction of simulated time done (0..1).
using ProgressFn = std::function<void(double)>;

class Cluster final : public UnitHost {
 public:
  // `workload` supplies the requests; the scenario's own workload section is not read here.
  static absl::StatusOr<std::unique_ptr<Cluster>> Create(const Scenario& scenario,
                                                         std::unique_ptr<Workload> workload);

  // Runs to the end of the scenario (arrivals until `duration`, then `drain`).
  void Run(const ProgressFn& progress = nullptr);

  // The results document: deterministic for a given scenario and seed.
  nlohmann::ordered_json Report() const;

  const RequestMetrics& metrics() const { return metrics_; }
  const std::vector<std::unique_ptr<Unit>>& units() const { return units_; }
  uint64_t events_executed() const { return events_.executed(); }
  Nanos end_time() const { return end_; }
  size_t peak_in_flight() const { return table_.capacity(); }

  void OnPrefillDone(int unit, uint32_t slot) override;
  void OnRequestDone(int unit, uint32_t slot) override;

 private:
  Cluster(const Scenario& s, std::unique_ptr<Workload> workload);
  absl::Status Build();
  void ScheduleNextArrival();
  void OnArrival(Request r);
  int PickUnit(const std::vector<int>& candidates, const std::vector<policy::UnitLoad>& loads,
               policy::Phase phase);
  void FinishRun();

  Scenario scenario_;
  std::unique_ptr<Workload> workload_;
  EventQueue events_;
  Rng rng_;
  RequestTable table_;
  RequestMetrics metrics_;
  Topology topology_;
  perf::TransferModel transfer_;
  std::unique_ptr<policy::LoadBalancer> balancer_;
  std::vector<std::unique_ptr<perf::StepModel>> pool_models_;
  std::vector<std::unique_ptr<Unit>> units_;
  std::vector<Placement> placements_;
  std::vector<std::vector<Nanos>> nic_free_;  // per unit, per DP rank: when its NIC frees up
  std::vector<uint32_t> nic_next_;            // round-robin over a unit's DP ranks
  std::vector<int> entry_units_;   // prefill and colocated: where requests arrive
  std::vector<int> decode_units_;
  // Loads the units publish, in the order of entry_units_ and decode_units_.
  std::vector<policy::UnitLoad> entry_loads_, decode_loads_;
  int64_t max_prompt_tokens_ = 0;
  int64_t transfers_ = 0;
  double transfer_bytes_ = 0;
  Distribution transfer_s_;
  Nanos end_ = 0;
  bool arrivals_done_ = false;
};

}  // namespace myriad::sim
