#pragma once
// Loading one model's weights onto many units at once (a burst's scale-out, a rolling rebuild,
// a cold start). Every node of a unit needs its shard (the unit's bytes / its nodes). Two ways:
// every node pulls its shard from shared storage, whose aggregate bandwidth all readers share
// (thousands of cards at once: tens of minutes, seed 002), or the shard is read once (or taken
// from units that already hold it) and copied on between the units' nodes over RDMA, node i of
// one unit feeding node i of the next: a pipelined chain (chunks flow on while the rest
// arrives, so a chain of L units costs one shard time plus L-1 chunk times) or a binomial tree
// (every holder copies whole shards, doubling the holders each round). The plan is the fastest
// of the three for the given fabric; it gives each unit's ready time. Pure.
#include <string_view>
#include <vector>

#include "core/time.h"

namespace myriad::policy {

struct WeightFabric {
  double storage_bytes_per_s = 20e9;       // shared storage, every reader together
  double storage_node_bytes_per_s = 5e9;   // one node reading from storage
  double peer_bytes_per_s = 4.3e9;         // one node's point-to-point copy from a peer node
  double nic_bytes_per_s = 0;              // one node's NICs, effective (0: no cap beyond the above)
  double oversubscription = 1;             // the spine's: a copy between racks gets nic / this
  double chunk_bytes = 256e6;              // a chain's pipelining granularity
};

struct WeightLoad {
  double unit_bytes = 0;     // the weights one unit holds, over all its nodes
  int nodes_per_unit = 1;
  int units = 1;             // units loading at once
  int loaded_units = 0;      // units that already hold the weights and can feed copies
  bool peers_allowed = true; // false: every unit pulls from storage
};

enum class WeightPlanKind { kStorage, kChain, kTree };
std::string_view WeightPlanName(WeightPlanKind k);

struct WeightPlan {
  WeightPlanKind kind = WeightPlanKind::kStorage;
  std::vector<Nanos> ready;   // per unit to load, from the start of the load
  Nanos makespan = 0;         // the last unit's ready time
  Nanos storage_makespan = 0; // every unit pulling from storage, for comparison
};

WeightPlan PlanWeightLoad(const WeightLoad& job, const WeightFabric& f);

}  // namespace myriad::policy
