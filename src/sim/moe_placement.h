#pragma once
// The expert placement a pool's units start with, shared by the cluster (which steps `moe:`
// units with it) and elastic EP (which asks what a lost rank leaves): DeepSeek's EPLB over the
// pool's seeded expert popularity, or, with elastic EP on, `min_copies` copies of every expert
// (as far as the redundant slots allow) spread over the unit's nodes.
#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "perf/expert_load.h"
#include "policy/eplb.h"
#include "sim/scenario.h"

namespace myriad::sim {

struct PoolPlacement {
  perf::ExpertPopularity popularity;  // Zipf(moe.expert_skew), seeded per pool
  std::vector<double> weights;        // the popularity as token counts, what EPLB is fed
  policy::EplbPlacement placement;
  int min_copies = 1;  // what EPLB was asked for
  int swaps = 0;       // anti-affinity swaps made (policy::SpreadReplicas)
};

// The popularity as token counts, what EPLB is fed (as in production).
std::vector<double> EplbWeights(const perf::ExpertPopularity& pop);

// What one GPU pulls from a peer over its NIC (expert weights, KV): 80% of line rate.
double NicFetchBytesPerS(const Scenario& s);

// The popularity alone (also for contiguous and balanced placements).
perf::ExpertPopularity PoolPopularity(const Scenario& s, size_t pool);

// Errors name the pool (a dense model, a layout EPLB cannot place).
absl::StatusOr<PoolPlacement> PlacePoolExperts(const Scenario& s, size_t pool);

}  // namespace myriad::sim
