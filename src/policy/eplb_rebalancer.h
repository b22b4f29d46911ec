#pragma once
// Periodic expert rebalancing: an exponential moving average of the loads the unit observes,
// and every `interval` a new EPLB placement with what moving to it costs (the expert weights
// each GPU must fetch, and the pause while they arrive). DeepSeek refreshes its redundant set
// about every 10 minutes (arXiv 2412.19437, s3.4).
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "policy/eplb.h"
#include "policy/eplb_incremental.h"

namespace myriad::policy {

struct EplbLayout {
  int layers = 0, logical_experts = 0, physical_experts = 0, groups = 1, nodes = 1, gpus = 1;
};

struct RebalancerOptions {
  Nanos interval = 10 * kMinute;
  double ema_weight = 0.2;               // weight of each new observation
  double expert_bytes = 0;               // one expert's weights in one layer
  double fetch_bytes_per_s = 40e9;       // per GPU, from a peer holding the expert
  // Skip a rebalance whose mean imbalance gain (max/mean) is below this.
  double min_gain = 0.02;
  // Elastic EP's placement rules, kept by every rebalance: this many copies of each expert
  // before the rest go by load, and (when positive) copies moved apart over domains of this
  // many GPUs (policy::SpreadReplicas).
  int min_copies = 1;
  int spread_gpus_per_domain = 0;
  // kIncremental: from the running placement, moving only what brings the balance within
  // `tolerance` of the fresh placement's (ReplaceIncrementally); kFull: to the fresh placement.
  ReplaceMode mode = ReplaceMode::kIncremental;
  double tolerance = 0.02;
};

struct Rebalance {
  EplbPlacement placement;
  int64_t moved_slots = 0;   // (layer, slot) pairs whose expert a GPU did not hold before
  double bytes = 0;
  Nanos pause = 0;           // the slowest GPU's fetch
  double imbalance_before = 0, imbalance_after = 0;  // mean max/mean under the averaged loads
  double imbalance_fresh = 0;  // what the fresh placement would have given
};

class EplbRebalancer {
 public:
  static absl::StatusOr<EplbRebalancer> Create(EplbLayout layout, RebalancerOptions options,
                                               std::span<const double> initial_loads);

  // Loads seen since the last call ([layers x logical]).
  void Observe(std::span<const double> loads);
  // A new placement when one is due and worth its gain, else nothing.
  std::optional<Rebalance> MaybeRebalance(Nanos now);

  const EplbPlacement& placement() const { return placement_; }
  const std::vector<double>& averaged_loads() const { return ema_; }

 private:
  EplbRebalancer(EplbLayout layout, RebalancerOptions options) : layout_(layout), options_(options) {}
  double MeanImbalance(const EplbPlacement& p) const;
  absl::StatusOr<EplbPlacement> Place() const;

  EplbLayout layout_;
  RebalancerOptions options_;
  std::vector<double> ema_;
  EplbPlacement placement_;
  Nanos last_ = 0;
};

}  // namespace myriad::policy
