#include "policy/recovery.h"

#include <algorithm>

namespace myriad::policy {

std::string_view StageName(RecoveryStage s) {
  switch (s) {
    case RecoveryStage::kEject: return "eject";
    case RecoveryStage::kStop: return "stop";
    case RecoveryStage::kSpare: return "spare";
    case RecoveryStage::kLoad: return "load_weights";
    case RecoveryStage::kCommInit: return "comm_init";
    case RecoveryStage::kWarmup: return "warmup";
    case RecoveryStage::kReadiness: return "readiness";
    case RecoveryStage::kDone: return "done";
  }
  return "?";
}

WeightFabric FabricOf(const RecoveryOptions& o, double nic_bytes_per_s, double oversubscription) {
  return WeightFabric{.storage_bytes_per_s = o.storage_bytes_per_s,
                      .storage_node_bytes_per_s = o.storage_per_node_bytes_per_s,
                      .peer_bytes_per_s = o.peer_bytes_per_s,
                      .nic_bytes_per_s = nic_bytes_per_s,
                      .oversubscription = oversubscription};
}

Nanos ScaleOutLeadTime(const WeightLoad& load, const WeightFabric& f, const RecoveryOptions& o) {
  return o.spare_acquire + PlanWeightLoad(load, f).makespan + o.comm_init + o.warmup + o.readiness;
}

Nanos ScaleOutLeadTime(double bytes, int nodes, bool from_peers, int storage_loaders, const RecoveryOptions& o) {
  const int n = std::max(nodes, 1);
  // Storage's other loaders stand for units loading beside this one.
  const int units = from_peers ? 1 : std::max(1, (storage_loaders + n - 1) / n);
  return ScaleOutLeadTime(
      {.unit_bytes = bytes, .nodes_per_unit = n, .units = units, .loaded_units = from_peers ? 1 : 0, .peers_allowed = from_peers},
      FabricOf(o), o);
}

}  // namespace myriad::policy
