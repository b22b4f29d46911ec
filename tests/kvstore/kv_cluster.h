#pragma once
// A KV store cluster in one process for the data-path tests: a master and storage nodes on
// 127.0.0.1 with short heartbeat, death and reconcile intervals, so failures play out in
// hundreds of milliseconds.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kvstore/master_client.h"
#include "kvstore/master_server.h"
#include "kvstore/storage_node.h"

namespace myriad::kvstore::testing {

// Polls `done` every 10 ms for up to `limit`; true once it holds.
inline bool WaitFor(const std::function<bool()>& done, Nanos limit = 5 * kSecond) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(limit);
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// `n` bytes that depend on `seed` and their position, for values a test can tell apart.
inline std::string Bytes(uint64_t seed, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((seed * 131 + i * 7) & 0xff);
  return s;
}

// True when every one of `objects` in `ns` has `replicas` replicas, none on node `gone`: what a
// repair of a lost node ends with.
inline bool ReplicatedWithout(MasterClient& master, std::string_view ns,
                              const std::vector<BlockKey>& objects, size_t replicas, NodeId gone) {
  auto got = master.Get(ns, objects);
  if (!got.ok()) return false;
  for (const Lookup& l : *got) {
    if (l.replicas.size() != replicas) return false;
    for (const ReplicaInfo& r : l.replicas) {
      if (r.node == gone) return false;  // not yet declared dead
    }
  }
  return true;
}

class KvCluster {
 public:
  // `auth_token`: the cluster's shared secret, given to the master and every node.
  explicit KvCluster(KvMasterOptions master = Defaults(), std::string auth_token = "")
      : auth_token_(std::move(auth_token)) {
    MasterServerOptions options;
    options.master = master;
    options.auth_token = auth_token_;
    options.tick_interval = 50 * kMillisecond;
    master_ = std::make_unique<MasterServer>(std::move(options));
    EXPECT_TRUE(master_->Start().ok());
  }
  ~KvCluster() {
    for (auto& n : nodes_) {
      if (n) n->Stop();
    }
    master_->Stop();
  }

  static KvMasterOptions Defaults() {
    KvMasterOptions o;
    o.dead_after = 600 * kMillisecond;
    o.ramp = 0;  // new nodes take writes at once
    return o;
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(master_->port()); }
  MasterServer& master() { return *master_; }

  StorageNode& AddNode(NodeId id, std::string domain, uint64_t capacity = uint64_t{64} << 20,
                       uint64_t segment = uint64_t{16} << 20, std::string shm_socket = "") {
    StorageNodeOptions o;
    o.master_url = url();
    o.id = id;
    o.fault_domain = std::move(domain);
    o.capacity_bytes = capacity;
    o.segment_bytes = segment;
    o.heartbeat_interval = 100 * kMillisecond;
    o.reconcile_interval = 100 * kMillisecond;
    o.data.frame_timeout = 500 * kMillisecond;
    o.data.threads = 1;
    o.shm_socket = std::move(shm_socket);
    o.auth_token = auth_token_;
    if (nodes_.size() <= id) nodes_.resize(id + 1);
    nodes_[id] = std::make_unique<StorageNode>(std::move(o));
    EXPECT_TRUE(nodes_[id]->Start().ok());
    EXPECT_TRUE(WaitFor([&] { return nodes_[id]->registered(); }));
    return *nodes_[id];
  }
  StorageNode& node(NodeId id) { return *nodes_[id]; }

 private:
  std::string auth_token_;
  std::unique_ptr<MasterServer> master_;
  std::vector<std::unique_ptr<StorageNode>> nodes_;
};

}  // namespace myriad::kvstore::testing
