#pragma once
// Elastic EP: what a unit can do when some of its GPUs die. If every logical expert of every
// layer still has a replica on a live GPU, the unit keeps serving, degraded: the dead GPUs'
// replicas are dropped and their experts' load falls on the surviving copies. If some expert
// has no live copy, the unit stops as a whole (the communicator fails as one) until rebuilt.
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/eplb.h"

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

}  // namespace myriad::policy
