#pragma once
// The KV store of a local cluster (`myriad up --store`): a master and storage nodes, in this
// process, on loopback ports, each node its own fault domain. Engines reach it as they would a
// remote store, over the master's HTTP API and the nodes' TCP data path.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kvstore/master_server.h"
#include "kvstore/storage_node.h"

namespace myriad::cli {

// Bounds of `up --store` (README, docs/kvstore.md): a local cluster is one host.
inline constexpr int kMaxLocalStoreNodes = 16;
inline constexpr uint64_t kMinLocalStoreNodeBytes = uint64_t{1} << 20;

struct LocalStoreOptions {
  int nodes = 2;                                 // 1 .. kMaxLocalStoreNodes
  uint64_t node_capacity_bytes = uint64_t{1} << 30;  // each; kMinLocalStoreNodeBytes .. 1 PiB
};

class LocalStore {
 public:
  // Starts the master, then the nodes, and returns once every node has registered.
  // InvalidArgument: bad options; on any error what was started is stopped.
  static absl::StatusOr<std::unique_ptr<LocalStore>> Start(const LocalStoreOptions& o);
  ~LocalStore() { Stop(); }
  // Nodes first, so that none heartbeats to a master that is gone. Idempotent.
  void Stop();
  const std::string& url() const { return url_; }
  const std::vector<std::unique_ptr<kvstore::StorageNode>>& nodes() const { return nodes_; }

 private:
  LocalStore() = default;
  std::unique_ptr<kvstore::MasterServer> master_;
  std::vector<std::unique_ptr<kvstore::StorageNode>> nodes_;
  std::string url_;
};

}  // namespace myriad::cli
