#pragma once
// A KV store split over several independent cells when one master is not enough: each cell is
// a master group (kvstore/ha_server.h) with its own storage nodes, and a prefix lives in the
// cell its chain's root key maps to (kvstore_core/routing.h, a jump consistent hash), so every run
// of one prefix is in one cell and is found by any of its block keys there. Callers name the
// root (the key of the chain's block 0, which every request of that prefix knows) with each
// call. Cells share nothing: a node's capacity is placed by its own master only. Not
// thread-safe: one client per thread.
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kvstore/store_client.h"

namespace myriad::kvstore {

class ShardedStore {
 public:
  // One entry per cell: its master URL, or its group's URLs comma-separated. The order is the
  // key-to-cell map: every client of a deployment must list the cells alike.
  static absl::StatusOr<std::unique_ptr<ShardedStore>> Connect(std::span<const std::string> cells,
                                                               StoreClientOptions options = {});

  size_t cells() const { return cells_.size(); }
  // The cell a prefix lives in.
  size_t CellOf(BlockKey root) const;
  StoreClient& cell(size_t i) { return *cells_[i]; }

  // Creates the namespace in every cell; one that exists already is fine.
  absl::Status CreateNamespace(std::string_view ns);
  absl::Status Put(BlockKey root, std::string_view ns, std::span<const BlockKey> keys, std::string_view bytes,
                   int replicas = 1, bool pinned = false);
  absl::StatusOr<std::string> Get(BlockKey root, std::string_view ns, BlockKey key);
  // roots[i] is keys[i]'s chain root; one request per cell. statuses[i] as StoreClient's; the
  // returned status is the first cell call that failed as a whole (its keys say so too).
  absl::Status BatchGet(std::span<const BlockKey> roots, std::string_view ns, std::span<const BlockKey> keys,
                        std::vector<std::string>* values, std::vector<absl::Status>* statuses);

 private:
  explicit ShardedStore(std::vector<std::unique_ptr<StoreClient>> cells) : cells_(std::move(cells)) {}
  std::vector<std::unique_ptr<StoreClient>> cells_;
};

}  // namespace myriad::kvstore
