#pragma once
// How a step's routed (token, expert) pairs fall on the GPUs of an expert-parallel group:
// per MoE layer, each GPU's share. It follows from the experts' popularity and their placement
// (contiguous, or EPLB's with redundant replicas, whose copies split an expert's load evenly).
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace myriad::perf {

// Per-layer routing probability of each logical expert (rows sum to 1).
struct ExpertPopularity {
  int layers = 0;
  int experts = 0;
  std::vector<double> p;  // layers x experts

  // Zipf(s) over experts, in a different seeded order per layer (s = 0: uniform).
  static ExpertPopularity Zipf(int layers, int experts, double s, uint64_t seed);
  // From measured loads (layers x experts, non-negative, each row with a positive sum).
  static absl::StatusOr<ExpertPopularity> FromLoads(std::span<const double> loads, int layers, int experts);
};

class ExpertLoad {
 public:
  // Every GPU the same share.
  static ExpertLoad Balanced(int layers, int gpus);
  // Logical expert e on GPU e * gpus / experts, one copy each (no rebalancing).
  static ExpertLoad Contiguous(const ExpertPopularity& pop, int gpus);
  // A placement as EPLB returns it: phy2log (layers x physical), physical experts split evenly
  // over the GPUs in order, each copy of an expert taking an equal part of its load. A slot of
  // -1 is a dead GPU's (elastic EP): it takes nothing; every expert needs a live copy.
  static absl::StatusOr<ExpertLoad> FromPlacement(const ExpertPopularity& pop, std::span<const int32_t> phy2log,
                                                  int physical, int gpus);

  int layers() const { return layers_; }
  int gpus() const { return gpus_; }
  double share(int layer, int gpu) const { return share_[static_cast<size_t>(layer) * gpus_ + gpu]; }
  // The largest share of any GPU in the layer (1/gpus when perfectly balanced).
  double max_share(int layer) const { return max_share_[static_cast<size_t>(layer)]; }
  // Mean over layers of max_share x gpus: the expert-compute slowdown against perfect balance.
  double mean_imbalance() const;

 private:
  void Finish();
  int layers_ = 0, gpus_ = 0;
  std::vector<double> share_;
  std::vector<double> max_share_;
};

}  // namespace myriad::perf
