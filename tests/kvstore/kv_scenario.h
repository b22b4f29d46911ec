#pragma once
// Scenario helpers for the KV store master tests: Given nodes in fault domains, When puts,
// heartbeats and failures, Expect replicas and states.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/block_hash.h"
#include "kvstore_core/master.h"

namespace myriad::kvstore::testing {

// A chain of `n` block keys, distinct per `seed`.
inline std::vector<BlockKey> Chain(uint64_t seed, size_t n) {
  std::vector<BlockKey> keys;
  BlockKey parent = kRootBlockKey;
  for (size_t i = 0; i < n; ++i) {
    parent = HashContentBlock(parent, seed * 1'000'003 + i);
    keys.push_back(parent);
  }
  return keys;
}

inline PutRequest Req(const std::vector<BlockKey>& keys, uint64_t size, int replicas = 1,
                      bool pinned = false) {
  return PutRequest{keys.data(), static_cast<uint32_t>(keys.size()), size, replicas, pinned};
}

class KvScenario : public ::testing::Test {
 protected:
  explicit KvScenario(KvMasterOptions options = {}) : master_(options) {
    ns_ = master_.CreateNamespace("llama3-70b/fp8").value();
  }

  // Given: `per_domain` nodes in each of `domains` racks, ids 1.., each `capacity` bytes.
  void GivenNodes(int domains, int per_domain, uint64_t capacity, Nanos now = 0) {
    for (int d = 0; d < domains; ++d) {
      for (int i = 0; i < per_domain; ++i) {
        ASSERT_TRUE(master_.AddNode(next_id_++, "rack-" + std::to_string(d), capacity, now).ok());
      }
    }
  }

  // When: a whole put (start and end) of `keys`; returns its replicas.
  ReplicaList Put(const std::vector<BlockKey>& keys, uint64_t size, int replicas, Nanos now,
                  bool pinned = false) {
    absl::StatusOr<ReplicaList> r = master_.PutStart(ns_, Req(keys, size, replicas, pinned), now);
    EXPECT_TRUE(r.ok()) << std::string(r.status().message());
    if (!r.ok()) return {};
    EXPECT_TRUE(master_.PutEnd(ns_, keys.back()).ok());
    return *r;
  }

  void HeartbeatAll(Nanos now, NodeId except = kNoNode) {
    for (const NodeInfo& n : master_.nodes().nodes()) {
      if (n.id != except) {
        ASSERT_TRUE(master_.Heartbeat(n.id, now).ok());
      }
    }
  }

  std::set<std::string> Domains(const ReplicaList& r) const {
    std::set<std::string> out;
    for (int i = 0; i < r.count; ++i) {
      out.insert(master_.nodes().DomainName(master_.nodes().DomainOf(r.nodes[i])));
    }
    return out;
  }

  uint64_t Used(NodeId id) const { return master_.nodes().Find(id)->used; }

  KvMaster master_;
  NamespaceId ns_ = 0;
  NodeId next_id_ = 1;
};

}  // namespace myriad::kvstore::testing
