#include "kvstore/store_client.h"

#include <fmt/format.h>

#include <thread>

#include "kvstore/checksum.h"

namespace myriad::kvstore {

namespace {
constexpr size_t kParallelPutBytes = 256 << 10;
}  // namespace

absl::StatusOr<std::unique_ptr<StoreClient>> StoreClient::Connect(std::string_view master_url,
                                                                 StoreClientOptions options) {
  auto master = MasterClient::Connect(master_url, options.master_timeout, options.auth_token);
  if (!master.ok()) return master.status();
  return std::unique_ptr<StoreClient>(new StoreClient(std::move(*master), options));
}

DataClient& StoreClient::Node(const std::string& address) {
  auto& c = nodes_[address];
  if (!c) c = std::make_unique<DataClient>(address, DataClientOptions{.timeout = options_.node_timeout,
                                                       .shared_memory = options_.shared_memory,
                                                       .shm_spin = options_.shm_spin,
                                                       .auth_token = options_.auth_token});
  return *c;
}

absl::Status StoreClient::Put(std::string_view ns, std::span<const BlockKey> keys,
                              std::string_view bytes, int replicas, bool pinned) {
  if (keys.empty()) return absl::InvalidArgumentError("Put: no keys");
  std::vector<NodeId> avoid;
  const uint64_t checksum = ObjectChecksum(bytes);
  absl::Status st;
  absl::Status node_failure;  // the last failed node write
  for (int attempt = 0; attempt < kPutAttempts; ++attempt) {
    const size_t avoided = avoid.size();
    st = PutOnce(ns, keys, bytes, checksum, replicas, pinned, avoid, &avoid);
    // Only a failed node write is worth another placement; the master's refusals are final.
    if (st.ok()) return st;
    if (avoid.size() == avoided) break;
    node_failure = st;
    if (avoid.size() > kMaxAvoidNodes) return st;
    ++stats_.put_retries;
  }
  // A placement refused after a failed write (no other node has room, or none is left in the
  // fault domains) would hide why the put failed: the node's error comes first, with its code.
  if (!node_failure.ok() && st != node_failure) {
    return absl::Status(node_failure.code(),
                        fmt::format("{}; placing it again without the node(s) that failed: {}",
                                    std::string(node_failure.message()),
                                    std::string(st.message())));
  }
  return st;
}

absl::Status StoreClient::PutOnce(std::string_view ns, std::span<const BlockKey> keys,
                                  std::string_view bytes, uint64_t checksum, int replicas,
                                  bool pinned, std::span<const NodeId> avoid,
                                  std::vector<NodeId>* failed_nodes) {
  const size_t failed_before = failed_nodes->size();
  absl::StatusOr<Placement> placed =
      master_->PlacePut(ns, keys, bytes.size(), replicas, pinned, avoid, checksum);
  if (!placed.ok()) return placed.status();
  ++stats_.puts;
  const ObjectName name{placed->namespace_id, placed->object};
  const std::vector<ReplicaInfo>& nodes = placed->replicas;
  std::vector<absl::Status> results(nodes.size());
  std::vector<DataClient*> clients(nodes.size(), nullptr);
  for (size_t r = 0; r < nodes.size(); ++r) {
    if (nodes[r].address.empty()) {
      results[r] = absl::FailedPreconditionError("the node registered no data address");
    } else {
      clients[r] = &Node(nodes[r].address);  // distinct nodes: one client each
    }
  }
  std::vector<uint8_t> attempted(nodes.size(), 0);
  auto write = [&](size_t r) {
    attempted[r] = 1;
    if (clients[r] != nullptr) results[r] = clients[r]->Put(name, bytes);
  };
  if (bytes.size() >= kParallelPutBytes) {
    // Large objects go to every replica at once, each node on its own connection and thread.
    std::vector<std::thread> threads;
    for (size_t r = 1; r < nodes.size(); ++r) threads.emplace_back(write, r);
    write(0);
    for (std::thread& t : threads) t.join();
  } else {
    // Small ones one after another, where a thread would cost more than the write.
    for (size_t r = 0; r < nodes.size(); ++r) {
      write(r);
      if (!results[r].ok()) break;
    }
  }
  absl::Status failed;
  for (size_t r = 0; r < nodes.size(); ++r) {
    if (!attempted[r] || results[r].ok()) continue;
    failed_nodes->push_back(nodes[r].node);
    if (!failed.ok()) continue;
    failed = absl::Status(results[r].code(),
                          fmt::format("writing replica {} on node {} ({}): {}", r, nodes[r].node,
                                      nodes[r].address, std::string(results[r].message())));
  }
  if (failed.ok()) return master_->PutEnd(ns, placed->object, bytes.size());
  ++stats_.revoked;
  // Best effort: the nodes' reconciliation frees these anyway once the put is revoked.
  for (size_t r = 0; r < nodes.size(); ++r) {
    if (attempted[r] && results[r].ok() && clients[r] != nullptr) {
      (void)clients[r]->Delete(std::span<const ObjectName>(&name, 1));
    }
  }
  if (absl::Status st = master_->PutRevoke(ns, placed->object); !st.ok()) {
    failed_nodes->resize(failed_before);  // still pending: placing it again would be refused
    return absl::Status(failed.code(), fmt::format("{}; revoking the put failed too: {}",
                                                   std::string(failed.message()),
                                                   std::string(st.message())));
  }
  return failed;
}

std::vector<absl::Status> StoreClient::BatchPut(std::string_view ns, std::span<const PutItem> items,
                                                int replicas) {
  std::vector<absl::Status> out;
  out.reserve(items.size());
  for (const PutItem& item : items) out.push_back(Put(ns, item.keys, item.bytes, replicas));
  return out;
}

absl::StatusOr<std::string> StoreClient::Get(std::string_view ns, BlockKey key) {
  std::vector<std::string> values;
  std::vector<absl::Status> statuses;
  if (absl::Status st = BatchGet(ns, std::span<const BlockKey>(&key, 1), &values, &statuses);
      !st.ok()) {
    return st;
  }
  if (!statuses[0].ok()) return statuses[0];
  return std::move(values[0]);
}

absl::Status StoreClient::BatchGet(std::string_view ns, std::span<const BlockKey> keys,
                                   std::vector<std::string>* values,
                                   std::vector<absl::Status>* statuses) {
  absl::StatusOr<std::vector<Lookup>> found = master_->Get(ns, keys);
  if (!found.ok()) return found.status();
  ++stats_.gets;
  values->assign(keys.size(), std::string());
  statuses->assign(keys.size(), absl::OkStatus());
  std::vector<std::string> errors(keys.size());
  std::vector<uint8_t> mismatches(keys.size(), 0);
  // Every replica failed: DataLoss when each returned bytes that are not the object's.
  auto all_failed = [&](size_t i) {
    const Lookup& l = (*found)[i];
    const std::string message = fmt::format("key {:016x} (object {:016x} in namespace '{}'): {}:{}",
                                            keys[i], l.object, ns,
                                            mismatches[i] == l.replicas.size()
                                                ? "no replica's bytes match the object's checksum"
                                                : "every replica failed",
                                            errors[i]);
    (*statuses)[i] = mismatches[i] == l.replicas.size() ? absl::DataLossError(message)
                                                         : absl::UnavailableError(message);
  };
  std::vector<size_t> open;  // keys still to read
  for (size_t i = 0; i < keys.size(); ++i) {
    const Lookup& l = (*found)[i];
    if (!l.found) {
      (*statuses)[i] = absl::NotFoundError(
          fmt::format("no key {:016x} in namespace '{}'{}", keys[i], ns,
                      l.pending ? " (its put has not ended)" : ""));
    } else if (l.replicas.empty()) {
      (*statuses)[i] = absl::UnavailableError(fmt::format("key {:016x}: no readable replica", keys[i]));
    } else {
      open.push_back(i);
    }
  }
  // Round r reads every open key from its r-th replica, one batched request per node.
  for (size_t round = 0; !open.empty() && round < kMaxReplicas; ++round) {
    absl::flat_hash_map<std::string, std::vector<size_t>> by_node;
    std::vector<size_t> next;
    for (size_t i : open) {
      const Lookup& l = (*found)[i];
      if (round >= l.replicas.size()) {
        all_failed(i);
        continue;
      }
      by_node[l.replicas[round].address].push_back(i);
    }
    for (auto& [address, indices] : by_node) {
      std::vector<ObjectName> names;
      for (size_t i : indices) names.push_back({(*found)[i].namespace_id, (*found)[i].object});
      std::vector<std::string> got;
      std::vector<absl::StatusCode> codes;
      absl::Status st = address.empty()
                            ? absl::FailedPreconditionError("the node registered no address")
                            : Node(address).Get(names, &got, &codes);
      for (size_t j = 0; j < indices.size(); ++j) {
        const size_t i = indices[j];
        const uint64_t want = (*found)[i].checksum;
        const bool read = st.ok() && codes[j] == absl::StatusCode::kOk;
        const bool matches = read && (want == 0 || ObjectChecksum(got[j]) == want);
        if (matches) {
          (*values)[i] = std::move(got[j]);
          if (round > 0) ++stats_.fallbacks;
          continue;
        }
        std::string why = !st.ok() ? std::string(st.message())
                          : !read  ? std::string("does not hold the object")
                                   : fmt::format("its bytes do not match the checksum {:016x}", want);
        if (read) {
          ++mismatches[i];
          ++stats_.checksum_mismatches;
        }
        errors[i] += fmt::format(" [{} {}: {}]", (*found)[i].replicas[round].node, address, why);
        next.push_back(i);
      }
    }
    open = std::move(next);
  }
  for (size_t i : open) all_failed(i);
  return absl::OkStatus();
}

}  // namespace myriad::kvstore
