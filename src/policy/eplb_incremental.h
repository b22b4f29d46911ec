#pragma once
// Incremental expert re-placement. A fresh EPLB placement (RebalanceExperts) is computed from
// scratch, so moving to it re-fetches most slots' weights even when a few experts drifted or one
// node died. This starts from the placement the unit runs instead: every live slot stays where
// it is, an expert left without enough live copies gets them first, and then, while the hottest
// GPU is over the balance a fresh placement reaches (times 1 + tolerance), one slot change at a
// time: the one that lowers the hottest GPU's load the most per expert fetched (replicate one of
// its experts onto a cooler GPU, give one of its slots to another expert, or swap one of its
// experts with a lighter one elsewhere).
//
// The fresh placement is an input (`reference`: what the full mode would move to, over the same
// GPU numbering). Where the search stops short (no single slot change helps), it runs again
// after first giving every expert the reference's number of copies (the surplus copies on the
// most loaded GPUs give up their slots to the missing ones, packed heaviest first onto the
// lightest GPUs); a layer where that also ends over the tolerance, or fetches more than the
// reference does, takes the reference's layer instead. So, layer by layer, the result
// fetches no more than the reference and its max/mean is within the tolerance of the
// reference's, whatever the loads.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/eplb.h"

namespace myriad::policy {

// How a rebalance or an elastic EP re-placement reaches its new placement.
enum class ReplaceMode {
  kIncremental,  // ReplaceIncrementally from the running placement
  kFull,         // a fresh EPLB placement
};
absl::StatusOr<ReplaceMode> ParseReplaceMode(std::string_view name);  // "incremental" | "full"
std::string_view ReplaceModeName(ReplaceMode mode);

struct IncrementalOptions {
  // A layer stops improving once its max/mean is at most (1 + tolerance) x the reference's.
  // 0.02 moved a fifth of the full mode's bytes in docs/moe.md's drift run (0.05: a fifteenth,
  // for 4% more imbalance).
  double tolerance = 0.02;
  // No slot change leaves an expert with fewer live copies than this (and one with fewer gets
  // them first).
  int min_copies = 1;
  // When positive, a new copy never goes to a domain (this many consecutive GPUs) already
  // holding more of the expert's copies than an even spread over the domains gives.
  int gpus_per_domain = 0;
  // Estimated expert fetches per layer before the greedy search stops (0: no limit). A layer
  // stopped by the budget keeps its result rather than taking the reference's.
  int64_t max_fetches_per_layer = 0;
};

struct IncrementalReplacement {
  // Over all of `current`'s GPUs in their numbering, the failed GPUs' slots -1; log2phy and
  // logcnt count the live copies.
  EplbPlacement placement;
  int64_t moved_slots = 0;        // (layer, slot) pairs whose expert the GPU did not hold before
  std::vector<int64_t> incoming;  // per GPU: the experts it fetches
  int reference_layers = 0;       // layers that took the reference's placement
};

// `weight`: [layers x logical_experts] loads; `current`: the running placement; `failed_gpus`:
// GPUs whose slots are gone (may be empty); `reference`: the fresh placement of the same shape
// (its failed GPUs' slots are ignored). Fails when the shapes disagree, an expert has no copy in
// `reference`, or the live slots cannot hold min_copies of every expert.
absl::StatusOr<IncrementalReplacement> ReplaceIncrementally(std::span<const double> weight,
                                                            const EplbPlacement& current,
                                                            std::span<const int> failed_gpus,
                                                            const EplbPlacement& reference,
                                                            const IncrementalOptions& options = {});

// The slots of `after` whose expert the GPU did not hold (in any of its slots) in `before`: what
// it must fetch. `incoming` (optional) gets the count per GPU. Slots set to -1 fetch nothing.
int64_t CountFetchedSlots(const EplbPlacement& before, const EplbPlacement& after,
                          std::vector<int64_t>* incoming = nullptr);

// max/mean of the per-GPU load of one layer over the GPUs whose `dead` entry is 0 (all, when
// `dead` is empty); a copy carries its expert's load / its live copies; -1 slots hold nothing.
double LayerImbalance(std::span<const double> layer_weight, std::span<const int32_t> row, int per_gpu,
                      std::span<const uint8_t> dead = {});

// log2phy, logcnt and max_replicas from phy2log (copies in physical order, -1 slots skipped).
void RebuildLog2Phy(EplbPlacement* p);

}  // namespace myriad::policy
