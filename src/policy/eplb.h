#pragma once
// Expert-parallel load balancer: DeepSeek's EPLB (deepseek-ai/EPLB, eplb.py) as pure policy code.
// Given per-layer loads of the logical experts of an MoE model, it chooses how many replicas each
// expert gets and which GPU holds each replica, so that the busiest GPU of a unit is as little
// busier than the mean as the greedy algorithm manages.
//
// The placement is the one eplb.py's rebalance_experts computes, with its float32 arithmetic.
// Ties are common (the replicas of one expert have equal loads), and eplb.py leaves them to
// torch.sort(descending=True) without stable=True, whose order of equal keys depends on the torch
// build: std::sort on CPU in older builds (Debian's 1.13), x86-simd-sort in recent ones on
// AVX2/AVX-512 machines. We fix them as follows:
// - sorting by load (descending) keeps equal loads in ascending index order (EplbTies::kStable,
//   the default), as torch.sort(stable=True) does, and as torch's std::sort does for up to 16
//   items (insertion sort); EplbTies::kStdSort instead runs libstdc++'s std::sort on the
//   loads alone, which reproduces torch builds whose CPU sort is std::sort;
// - the replica goes to the lowest-indexed expert among those with the highest load per replica
//   (torch.max(dim) returns the first maximal index);
// - an item goes to the lowest-indexed pack among the lightest packs that are not full (Python's
//   min returns the first minimum).
// Group loads (the sum of a group's experts) are summed in double and rounded to float32, which is
// what torch computes whenever the sum is exact in float32 (integer token counts below 2^24).
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace myriad::policy {

enum class EplbTies {
  kStable,   // equal loads in index order: torch.sort(..., stable=True)
  kStdSort,  // std::sort comparing loads only: torch's default CPU sort where that is std::sort
};

struct EplbPlacement {
  int layers = 0;
  int logical_experts = 0;
  int physical_experts = 0;  // num_replicas
  int num_gpus = 0;
  int max_replicas = 0;          // the largest logcnt over all layers: log2phy's last dimension
  bool hierarchical = false;     // false: the global policy (one group, one node)
  std::vector<int32_t> phy2log;  // [layers x physical_experts]: logical expert of each replica
  std::vector<int32_t> log2phy;  // [layers x logical_experts x max_replicas], padded with -1
  std::vector<int32_t> logcnt;   // [layers x logical_experts]: replicas of each logical expert

  int experts_per_gpu() const { return num_gpus > 0 ? physical_experts / num_gpus : 0; }
  // Physical expert p of every layer lives on GPU p / experts_per_gpu().
  int32_t Phy2Log(int layer, int phys) const {
    return phy2log[static_cast<size_t>(layer) * static_cast<size_t>(physical_experts) +
                   static_cast<size_t>(phys)];
  }
};

// weight: [layers x logical_experts] loads (finite, >= 0; row-major). Uses the hierarchical policy
// (groups packed onto nodes, replicas chosen within each node, then packed onto its GPUs) when
// num_groups % num_nodes == 0, else the global policy. Returns InvalidArgument naming the
// parameter when a size or divisibility requirement does not hold. min_copies > 1 departs from
// DeepSeek's algorithm on purpose: every logical expert gets that many replicas before the rest
// go by load, which elastic EP needs (a lone copy dies with its GPU); 1 is DeepSeek's EPLB.
absl::StatusOr<EplbPlacement> RebalanceExperts(std::span<const double> weight, int layers,
                                               int logical_experts, int num_replicas,
                                               int num_groups, int num_nodes, int num_gpus,
                                               EplbTies ties = EplbTies::kStable, int min_copies = 1);

// Load imbalance, max/mean of the per-GPU load, of a placement ("after": a replica carries
// weight / logcnt of its expert) and of no rebalancing at all ("before": logical expert e of L on
// GPU e * num_gpus / L, no replicas). A layer whose total load is 0 has imbalance 1.
struct EplbImbalance {
  std::vector<double> gpu_load_before, gpu_load_after;  // [layers x num_gpus]
  std::vector<double> per_layer_before, per_layer_after;
  double mean_before = 0, mean_after = 0;  // means over layers
  double max_before = 0, max_after = 0;    // maxima over layers
};

// `weight` must be the loads the placement was computed from (its size is checked).
absl::StatusOr<EplbImbalance> MeasureImbalance(std::span<const double> weight,
                                               const EplbPlacement& placement);

// One layer's load per GPU (`load` has one entry per GPU, row.size() / per_gpu of them): each
// copy carries its expert's load divided by the expert's copies on live GPUs (those whose
// `dead` entry is 0; all when `dead` is empty); dead GPUs and -1 slots carry nothing. Every
// expert in `row` must be below layer_weight.size().
void LayerGpuLoads(std::span<const double> layer_weight, std::span<const int32_t> row, int per_gpu,
                   std::span<const uint8_t> dead, std::span<double> load);
// max/mean of `load` over the live GPUs (as above); 1 when their total is 0 or none is live.
double MaxOverMean(std::span<const double> load, std::span<const uint8_t> dead = {});

}  // namespace myriad::policy
