#include "cli/local_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace myriad::cli {

absl::StatusOr<std::unique_ptr<LocalStore>> LocalStore::Start(const LocalStoreOptions& o) {
  if (o.nodes < 1 || o.nodes > kMaxLocalStoreNodes) {
    return absl::InvalidArgumentError(fmt::format("--store-nodes {} is not in [1, {}]", o.nodes, kMaxLocalStoreNodes));
  }
  if (o.node_capacity_bytes < kMinLocalStoreNodeBytes || o.node_capacity_bytes > kvstore::kMaxNodeCapacityBytes) {
    return absl::InvalidArgumentError(fmt::format("--store-node-capacity {} is not in [{}, {}] bytes",
                                                  o.node_capacity_bytes, kMinLocalStoreNodeBytes,
                                                  kvstore::kMaxNodeCapacityBytes));
  }
  std::unique_ptr<LocalStore> s(new LocalStore());
  kvstore::MasterServerOptions mo;
  mo.http.address = "127.0.0.1";
  mo.http.port = 0;
  s->master_ = std::make_unique<kvstore::MasterServer>(std::move(mo));
  if (absl::Status st = s->master_->Start(); !st.ok()) {
    return absl::Status(st.code(), fmt::format("kv store master: {}", std::string(st.message())));
  }
  s->url_ = fmt::format("http://127.0.0.1:{}", s->master_->port());
  for (int i = 0; i < o.nodes; ++i) {
    kvstore::StorageNodeOptions no;
    no.master_url = s->url_;
    no.id = static_cast<kvstore::NodeId>(i + 1);
    no.fault_domain = fmt::format("local-{}", i + 1);
    no.capacity_bytes = o.node_capacity_bytes;
    // Segments are committed as they are written; a node smaller than one has one segment.
    no.segment_bytes = std::min(no.segment_bytes, o.node_capacity_bytes);
    no.data.address = "127.0.0.1";
    no.data.port = 0;
    auto node = std::make_unique<kvstore::StorageNode>(std::move(no));
    if (absl::Status st = node->Start(); !st.ok()) {
      return absl::Status(st.code(), fmt::format("kv store node {}: {}", i + 1, std::string(st.message())));
    }
    s->nodes_.push_back(std::move(node));
  }
  // Registration runs on the nodes' own threads: wait for it, so that the engines' first
  // offloads find room instead of failing and resting.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (const auto& n : s->nodes_) {
    while (!n->registered()) {
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::UnavailableError("kv store: the nodes did not register with the master within 10 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return s;
}

void LocalStore::Stop() {
  for (auto& n : nodes_) n->Stop();
  if (master_) master_->Stop();
}

}  // namespace myriad::cli
