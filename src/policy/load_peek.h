#pragma once
// The unit a least-loaded balancer will pick next, asked before the pick: the simulator warms
// that unit's prefix-cache lines for a prompt while it generates the next arrival, so the
// admission's cache reads hit. One decision: the answer is the balancer's own, its turn among
// equally loaded units included.
#include "policy/load_balancer.h"
#include "policy/load_ranking.h"

namespace myriad::policy {

// What `balancer`'s next Pick over the candidates that `ranking` ranks would answer, without
// taking its turn; -1 when `balancer` is not least-loaded (its choice needs a draw or a
// rotation it does not share) or no candidate is available.
int PeekLeastLoaded(const LoadBalancer& balancer, const LoadRanking& ranking);

}  // namespace myriad::policy
