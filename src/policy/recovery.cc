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

Nanos ScaleOutLeadTime(double bytes, int nodes, bool from_peers, int storage_loaders, const RecoveryOptions& o) {
  const double per_node = bytes / std::max(nodes, 1);
  const double rate = std::min(o.storage_per_node_bytes_per_s, o.storage_bytes_per_s / std::max(storage_loaders, 1));
  const Nanos load = from_peers ? PeerLoadTime(per_node, o) : SecondsToNanos(per_node / rate);
  return o.spare_acquire + load + o.comm_init + o.warmup + o.readiness;
}

}  // namespace myriad::policy
