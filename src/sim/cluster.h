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
#include "policy/admission.h"
#include "policy/backend_cost_model.h"
#include "policy/eplb_rebalancer.h"
#include "policy/prefix_index.h"
#include "policy/recompute_limiter.h"
#include "policy/router.h"
#include "policy/tenant_fill.h"
#include "policy/tenants.h"
#include "sim/cache_events.h"
#include "sim/elastic_driver.h"
#include "sim/event_queue.h"
#include "sim/failures.h"
#include "sim/metrics.h"
#include "sim/rollout_driver.h"
#include "sim/scenario.h"
#include "sim/store_tier.h"
#include "sim/timeseries.h"
#include "sim/topology.h"
#include "sim/unit.h"

namespace myriad::sim {

// Called now and then with the fraction of simulated time done (0..1).
using ProgressFn = std::function<void(double)>;

class Cluster final : public UnitHost, public FailureHost, private policy::AdmissionTargets {
 public:
  // `workload` supplies the requests; the scenario's own workload section is not read here.
  static absl::StatusOr<std::unique_ptr<Cluster>> Create(const Scenario& scenario,
                                                         std::unique_ptr<Workload> workload);

  // Runs to the end of the scenario (arrivals until `duration`, then `drain`).
  void Run(const ProgressFn& progress = nullptr);

  // The results document: deterministic for a given scenario and seed.
  nlohmann::ordered_json Report() const;

  const RequestMetrics& metrics() const { return metrics_; }
  // Each request's end (completed or rejected) as it happens; set before Run.
  void set_outcome_sink(OutcomeSink sink) { metrics_.set_outcome_sink(std::move(sink)); }
  const std::vector<std::unique_ptr<Unit>>& units() const { return units_; }
  // The run's agenda, for a driver that acts on the units in virtual time (FleetDriver).
  EventQueue& events() { return events_; }
  // Samples the run every `interval` of virtual time (widened to at most kMaxSeriesPoints
  // windows); set before Run. Without it nothing is sampled.
  void EnableSampling(Nanos interval);
  // After Run: the sampled series with the faults and controller actions as markers (an empty
  // series without EnableSampling).
  TimeSeries Series() const;

  void OnPrefillDone(int unit, uint32_t slot) override;
  void OnRequestDone(int unit, uint32_t slot) override;
  void OnPrefillToken(int unit, uint32_t slot) override;
  void OnCacheStored(int unit, uint32_t first_position, std::span<const BlockKey> blocks) override;
  void OnCacheRemoved(int unit, std::span<const BlockKey> blocks) override;
  void EvacuateUnit(int unit) override;
  MoePoolView MoePool(int pool) const override;

 private:
  Cluster(const Scenario& s, std::unique_ptr<Workload> workload);
  absl::Status Build();
  absl::StatusOr<std::unique_ptr<perf::MoeStepModel>> BuildMoe(size_t pool);
  void ScheduleNextArrival();
  void OnArrival(Request r);
  // Routes and admits the request in `slot` (a new arrival, or a retry after a unit failed)
  // through the admission pipeline the gateway runs too.
  void Admit(uint32_t slot, bool retry);
  // P/D: picks the decode unit for the prompt `unit` computed and starts the KV transfer.
  void HandOff(int unit, uint32_t slot);
  // Takes a request off its decode unit's hand-off charge, if it is on one.
  void ReleaseDecodeCharge(ReqState& r);
  // What the pipeline asks of the chosen unit: its queue and memory, and its cached prefix.
  std::string_view Refuses(const policy::AdmissionRequest& req, const policy::RouteDecision& d) override;
  int64_t CachedTokens(const policy::AdmissionRequest& req, const policy::RouteDecision& d) override;
  int UnitOf(const policy::RouteDecision& d) const;
  void Reject(uint32_t slot, const std::string& reason);
  void Retry(uint32_t slot);
  absl::Status BuildFailures();
  nlohmann::ordered_json FailureReport() const;
  // Sends an admitted request to `unit`, first copying `copy_blocks` leading blocks of its KV
  // from `copy_from` when the router asked for it (what that unit really holds, re-verified).
  void Dispatch(uint32_t slot, int unit, int copy_from, int64_t copy_blocks);
  nlohmann::ordered_json RouterReport() const;
  void FinishRun();

  Scenario scenario_;
  std::unique_ptr<Workload> workload_;
  EventQueue events_;
  Rng rng_;
  RequestTable table_;
  RequestMetrics metrics_;
  Topology topology_;
  perf::TransferModel transfer_;
  std::unique_ptr<policy::PrefixIndex> index_;  // only for prefix-aware policies
  std::unique_ptr<policy::Router> router_;
  std::unique_ptr<policy::TenantPolicy> tenants_;
  std::vector<bool> fill_tenant_;  // by tenant index: a low-priority fill tenant's (preempted first)
  std::unique_ptr<policy::DecodePressure> decode_pressure_;  // null: no fill tenant
  std::unique_ptr<CacheEventBus> bus_;
  std::string policy_name_;
  std::vector<policy::PrefillCost> pool_costs_;
  // router.learn_cost: each pool's prefill cost learned from its units' first tokens (a pool is
  // a class of identical units, so they keep pricing alike), and what each admitted request
  // was dispatched with, by slot, until its first token (or its prefill on a prefill unit)
  // is observed.
  std::vector<std::unique_ptr<policy::BackendCostModel>> pool_learned_;
  struct PendingCost {
    policy::CostSample sample;
    Nanos start = 0;
    int unit = -1;  // -1: nothing pending
  };
  std::vector<PendingCost> cost_pending_;
  void ObserveFirstToken(int unit, uint32_t slot);
  std::vector<std::unique_ptr<perf::MoeStepModel>> pool_moe_;  // null for evenly-stepped pools
  // Expert popularity that drifts and the placement that follows it, per MoE pool.
  struct MoeDynamics {
    size_t pool = 0;
    perf::ExpertPopularity popularity;
    policy::EplbPlacement placement;  // the current EPLB placement (no phy2log: contiguous or balanced)
    int physical = 0;
    int swaps = 0;  // elastic EP's anti-affinity swaps in the initial placement
    std::unique_ptr<policy::EplbRebalancer> rebalancer;
    Rng rng{0};
    int64_t drifts = 0, rebalances = 0, moved_slots = 0;
    double moved_bytes = 0;
    Nanos pause = 0;
    // Mean max/mean under the averaged loads after each rebalance, and what a fresh EPLB
    // placement would have given: summed over rebalances.
    double imbalance_after_sum = 0, imbalance_fresh_sum = 0;
  };
  std::vector<std::unique_ptr<MoeDynamics>> moe_dynamics_;
  void DriftExperts(MoeDynamics& d);
  void RebalanceExperts(MoeDynamics& d);
  void RefreshLoad(MoeDynamics& d);
  // `act` every `interval` of virtual time until the run's horizon.
  void Every(Nanos interval, std::function<void()> act);
  void RunRecurring(size_t i);
  struct Recurring {
    Nanos interval;
    std::function<void()> act;
  };
  std::vector<Recurring> recurring_;
  std::vector<std::unique_ptr<perf::StepModel>> pool_models_;
  std::vector<std::unique_ptr<Unit>> units_;
  std::vector<Placement> placements_;
  std::vector<std::vector<Nanos>> nic_free_;  // per unit, per DP rank: when its NIC frees up
  std::vector<uint32_t> nic_next_;            // round-robin over a unit's DP ranks
  std::vector<int> entry_units_;   // prefill and colocated: where requests arrive
  std::vector<int> decode_units_;
  // The router's view of the units, in the order of entry_units_ and decode_units_; the units
  // publish their loads straight into these.
  std::vector<policy::Candidate> entry_cands_, decode_cands_;
  // Their least-loaded rankings, kept current by the units (none for random and round-robin).
  std::unique_ptr<policy::LoadRanking> entry_ranking_, decode_ranking_;
  // A rollout's split (cluster_rollout.cc): the canary's units come first in the lists above,
  // `*_canary_` of them, ranked apart; the stable version's are the rest. 0: no split.
  size_t entry_canary_ = 0, decode_canary_ = 0;
  std::unique_ptr<policy::LoadRanking> entry_canary_ranking_, decode_canary_ranking_;
  // The version group the request being admitted routes in: where its spans start.
  size_t entry_off_ = 0, decode_off_ = 0;
  std::unique_ptr<RolloutDriver> rollout_;  // only with an elastic.rollout section
  // (Re)builds the candidate lists and rankings, the canary's units first while a split is on.
  void FillCandidates();
  // Points the router at one version's group; returns its entry and decode candidates.
  std::pair<std::span<const policy::Candidate>, std::span<const policy::Candidate>> UseGroup(bool canary);
  void BuildRollout();
  uint64_t hot_spots_ = 0, kv_fetches_ = 0, prefill_on_decode_ = 0;
  double kv_fetch_bytes_ = 0;
  int64_t max_prompt_tokens_ = 0;
  int64_t transfers_ = 0;
  double transfer_bytes_ = 0;
  Distribution transfer_s_;
  Nanos end_ = 0;
  bool arrivals_done_ = false;
  Request pending_arrival_;
  // Faults (only with a `faults:` section).
  std::unique_ptr<FailureModel> failures_;
  std::unique_ptr<policy::RecomputeLimiter> limiter_;
  std::unique_ptr<policy::AdmissionPipeline> admission_;
  int64_t retries_ = 0, evacuated_ = 0, lost_kv_tokens_ = 0, retried_context_tokens_ = 0, failed_transfers_ = 0;
  std::vector<uint32_t> evacuees_;  // scratch
  // The KV store tier (only with a `store:` section; cluster_store.cc).
  std::unique_ptr<StoreTier> store_;
  bool offload_paused_ = false;  // a failed unit's cache is lost with it, not offloaded
  int64_t limiter_shed_at_loss_ = -1;
  absl::Status BuildStore();
  // Leading blocks of `blocks` the unit supplies from HBM or will load from the store (for a
  // prompt of `input_tokens`: the store's run only when loading it beats recomputing it).
  size_t CachedBlocks(const Unit& u, std::span<const BlockKey> blocks, int64_t input_tokens) const;
  // The prefill cost the router ranks `u` by (learned, when the scenario learns costs).
  const policy::PrefillCost& CostOf(const Unit& u) const;
  // Per pool: the path its units load store-tier blocks over (the router's candidates point here).
  std::vector<policy::StorePath> pool_store_paths_;
  // Loads the prefix blocks that continue the unit's own from the store, then enqueues the
  // prefill; false (nothing done) when the store has none.
  bool LoadFromStore(uint32_t slot, int unit);
  nlohmann::ordered_json StoreReport() const;
  std::unique_ptr<ElasticDriver> elastic_;  // only with an `elastic:` section
  // Sampling (cluster_series.cc).
  std::unique_ptr<TimeSeriesSampler> sampler_;
  ClusterGauges gauges_;  // reused
  const ClusterGauges& ReadGauges();
  // Runs the events up to `until`, closing every sampling window that ends by then.
  void RunSampledUntil(Nanos until);
};

}  // namespace myriad::sim
