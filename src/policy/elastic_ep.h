#pragma once
// Elastic EP: what a unit can do when some of its GPUs die. If every logical expert of every
// layer still has a replica on a live GPU, the unit keeps serving, degraded: the dead GPUs'
// replicas are dropped and their experts' load falls on the surviving copies. If some expert
// has no live copy, the unit stops as a whole (the communicator fails as one) until rebuilt.
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "policy/eplb.h"
#include "policy/eplb_incremental.h"

namespace myriad::policy {

struct ElasticVerdict {
  bool survives = false;
  // Physical-to-logical map with the dead GPUs' slots set to -1 (same shape as phy2log).
  std::vector<int32_t> phy2log;
  // (layer, logical expert) pairs left without any live replica, as layer * experts + expert.
  std::vector<int64_t> orphaned;
  int live_gpus = 0;
};

// `failed_gpus` are GPU indices in [0, placement.num_gpus); duplicates are allowed.
absl::StatusOr<ElasticVerdict> CheckElasticEp(const EplbPlacement& placement, std::span<const int> failed_gpus);

// Anti-affinity for elastic EP. EPLB places replicas for load alone and may put two copies of
// an expert in one failure domain (with even loads it puts both on one GPU), where they die
// together. This moves such a copy to another domain by swapping it with a replica there,
// chosen so that neither expert then has more copies in a domain than an even spread over the
// domains gives, and so that the two replicas' loads
// (weight / copies, `weight` being the layers x logical_experts loads EPLB was fed) differ the
// least, so the GPUs' loads barely move. Every GPU keeps its slot count and every layer its
// multiset of replicas; log2phy is rebuilt. A domain is `gpus_per_domain` consecutive GPUs (a
// node). Returns the swaps made (best effort: a copy stays put when no partner qualifies).
absl::StatusOr<int> SpreadReplicas(std::span<const double> weight, int gpus_per_domain,
                                   EplbPlacement* placement);

// Re-placement after a loss (what SGLang's elastic EP does instead of leaving the dead GPUs'
// load on the surviving copies): a fresh EPLB (DeepSeek's, one copy of each expert first, the
// rest by load) of every expert over the live GPUs alone, each keeping its slot count, and the
// cost of moving there: a live GPU fetches, from a peer, every expert it did not hold.
struct ElasticReplacement {
  // Over all of `current`'s GPUs in their numbering, the failed GPUs' slots -1 (as in
  // ElasticVerdict::phy2log); log2phy and logcnt count the live copies only.
  EplbPlacement placement;
  int64_t moved_slots = 0;  // (layer, slot) pairs whose expert the GPU did not hold before
  double bytes = 0;
  Nanos pause = 0;          // the slowest GPU's fetch
};

// `weight`: [layers x logical_experts] loads (what EPLB is fed); `expert_bytes`: one expert's
// weights in one layer; `fetch_bytes_per_s`: per GPU. Fails when no GPU is left. With
// ReplaceMode::kIncremental the surviving slots stay and only what brings the balance within
// `tolerance` of the fresh placement's moves (ReplaceIncrementally, the fresh placement its
// reference).
absl::StatusOr<ElasticReplacement> ReplaceOnLiveGpus(std::span<const double> weight, const EplbPlacement& current,
                                                     std::span<const int> failed_gpus, int num_groups,
                                                     double expert_bytes, double fetch_bytes_per_s,
                                                     ReplaceMode mode = ReplaceMode::kFull, double tolerance = 0.02);

}  // namespace myriad::policy
