#pragma once
// The storage nodes a master places replicas on: capacity and bytes in use (the master's own
// accounting of the replicas it placed, pending ones included), fault domain, heartbeat, and
// when the node joined (new nodes ramp up). Placement picks distinct fault domains by weighted
// random choice, weight = free bytes x ramp, so the fill of the cluster evens out without a
// fresh empty node taking every write at once.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "core/rng.h"
#include "core/time.h"
#include "kvstore_core/types.h"

namespace myriad::kvstore {

struct NodeInfo {
  NodeId id = kNoNode;
  uint32_t domain = 0;  // index into the registry's fault domain names
  uint64_t capacity = 0;
  uint64_t used = 0;
  Nanos joined_at = 0;
  // Soft state: not in the operation log; a promoted standby restarts every node's clock.
  Nanos last_heartbeat = 0;
};

class NodeRegistry {
 public:
  absl::Status Add(NodeId id, std::string_view domain, uint64_t capacity, Nanos now);
  absl::Status Heartbeat(NodeId id, Nanos now);
  // Forgets the node (its replicas are the master's business).
  void Remove(NodeId id);

  NodeInfo* Find(NodeId id);
  const NodeInfo* Find(NodeId id) const;
  const std::vector<NodeInfo>& nodes() const { return nodes_; }
  const std::string& DomainName(uint32_t domain) const { return domain_names_[domain]; }
  uint32_t DomainOf(NodeId id) const;

  // Every node's heartbeat clock restarts at `now` (a promoted standby has no heartbeat history).
  void ResetHeartbeats(Nanos now);
  // Nodes whose last heartbeat is older than `now - dead_after`, by id.
  std::vector<NodeId> Expired(Nanos now, Nanos dead_after) const;

  // Charges (or, negative, refunds) `bytes` to the node; unknown nodes are ignored.
  void AddUsed(NodeId id, int64_t bytes);
  uint64_t total_capacity() const { return total_capacity_; }
  uint64_t total_used() const { return total_used_; }

  // Picks `count` nodes in distinct fault domains, none in a domain of `exclude` (nodes already
  // holding the object), each with `size` free bytes, and appends them to `out`. The error
  // names how many domains qualified and which.
  // Nodes in `avoid` are not picked, but their domains stay open to the others.
  absl::Status Place(uint64_t size, int count, std::span<const NodeId> exclude, Nanos now,
                     const KvMasterOptions& options, Rng& rng, std::vector<NodeId>* out,
                     std::span<const NodeId> avoid = {}) const;

  size_t memory_bytes() const;

 private:
  double Weight(const NodeInfo& n, uint64_t size, Nanos now, const KvMasterOptions& o) const;

  std::vector<NodeInfo> nodes_;
  absl::flat_hash_map<NodeId, uint32_t> index_;  // id -> position in nodes_
  std::vector<std::string> domain_names_;
  absl::flat_hash_map<std::string, uint32_t> domain_ids_;
  uint64_t total_capacity_ = 0;
  uint64_t total_used_ = 0;
};

}  // namespace myriad::kvstore
