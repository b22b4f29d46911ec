// KvMaster::HeldBy: which of the objects a storage node holds the master still places on it.
// Nodes learn of evictions, removals, revoked puts, failed repairs and dropped namespaces by
// asking (kvstore/storage_node.h): the answer derives from the replicated metadata alone, so it
// survives a failover, and the master keeps no per-node queue of bytes to free.
#include "kvstore_core/master.h"

namespace myriad::kvstore {

using internal::NamespaceState;

void KvMaster::HeldBy(NodeId node, std::span<const HeldObject> objects,
                      std::vector<uint8_t>* keep) const {
  keep->assign(objects.size(), 0);
  for (size_t i = 0; i < objects.size(); ++i) {
    const HeldObject& o = objects[i];
    if (o.ns >= namespaces_.size()) continue;
    Namespace& ns = *namespaces_[o.ns];
    if (ns.state == NamespaceState::kGone) continue;
    if (ns.state == NamespaceState::kDropping) {
      (*keep)[i] = 1;
      continue;
    }
    const RunPos pos = Locate(ns, o.object);
    if (pos.run == nullptr || pos.run->last_key != o.object) continue;
    for (NodeId r : pos.run->replicas) {
      if (r == node) {
        (*keep)[i] = 1;
        break;
      }
    }
  }
}

}  // namespace myriad::kvstore
