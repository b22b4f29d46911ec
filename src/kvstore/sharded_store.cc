#include "kvstore/sharded_store.h"

#include <fmt/format.h>

#include "kvstore_core/routing.h"

namespace myriad::kvstore {

absl::StatusOr<std::unique_ptr<ShardedStore>> ShardedStore::Connect(std::span<const std::string> cells,
                                                                    StoreClientOptions options) {
  if (cells.empty()) return absl::InvalidArgumentError("sharded store: no cell given");
  std::vector<std::unique_ptr<StoreClient>> clients;
  for (size_t i = 0; i < cells.size(); ++i) {
    auto c = StoreClient::Connect(cells[i], options);
    if (!c.ok()) {
      return absl::Status(c.status().code(), fmt::format("cell {} ({}): {}", i, cells[i], std::string(c.status().message())));
    }
    clients.push_back(*std::move(c));
  }
  return std::unique_ptr<ShardedStore>(new ShardedStore(std::move(clients)));
}

size_t ShardedStore::CellOf(BlockKey root) const {
  return MasterForKey(root, static_cast<uint32_t>(cells_.size()));
}

absl::Status ShardedStore::CreateNamespace(std::string_view ns) {
  for (size_t i = 0; i < cells_.size(); ++i) {
    absl::Status st = cells_[i]->master().CreateNamespace(ns);
    if (!st.ok() && st.code() != absl::StatusCode::kFailedPrecondition &&
        st.code() != absl::StatusCode::kAlreadyExists) {
      return absl::Status(st.code(), fmt::format("cell {}: {}", i, std::string(st.message())));
    }
  }
  return absl::OkStatus();
}

absl::Status ShardedStore::Put(BlockKey root, std::string_view ns, std::span<const BlockKey> keys,
                               std::string_view bytes, int replicas, bool pinned) {
  return cells_[CellOf(root)]->Put(ns, keys, bytes, replicas, pinned);
}

absl::StatusOr<std::string> ShardedStore::Get(BlockKey root, std::string_view ns, BlockKey key) {
  return cells_[CellOf(root)]->Get(ns, key);
}

absl::Status ShardedStore::BatchGet(std::span<const BlockKey> roots, std::string_view ns,
                                    std::span<const BlockKey> keys, std::vector<std::string>* values,
                                    std::vector<absl::Status>* statuses) {
  if (roots.size() != keys.size()) {
    return absl::InvalidArgumentError(fmt::format("BatchGet: {} roots for {} keys", roots.size(), keys.size()));
  }
  values->assign(keys.size(), std::string());
  statuses->assign(keys.size(), absl::OkStatus());
  absl::Status first;
  const auto parts = SplitByMaster(roots, static_cast<uint32_t>(cells_.size()));
  for (size_t c = 0; c < parts.size(); ++c) {
    if (parts[c].empty()) continue;
    std::vector<BlockKey> part;
    for (uint32_t i : parts[c]) part.push_back(keys[i]);
    std::vector<std::string> got;
    std::vector<absl::Status> st;
    absl::Status call = cells_[c]->BatchGet(ns, part, &got, &st);
    for (size_t j = 0; j < parts[c].size(); ++j) {
      const uint32_t i = parts[c][j];
      if (!call.ok()) {
        (*statuses)[i] = absl::Status(call.code(), fmt::format("cell {}: {}", c, std::string(call.message())));
      } else {
        (*statuses)[i] = std::move(st[j]);
        (*values)[i] = std::move(got[j]);
      }
    }
    if (!call.ok() && first.ok()) first = (*statuses)[parts[c].front()];
  }
  return first;
}

}  // namespace myriad::kvstore
