#include "kvstore/store_client.h"

#include <fmt/format.h>

#include <functional>
#include <thread>

#include "kvstore/checksum.h"

namespace myriad::kvstore {

namespace {
constexpr size_t kParallelPutBytes = 256 << 10;
// Bytes per pipelined call to one node in a batched put.
constexpr uint64_t kPipelinedPutBytes = uint64_t{256} << 20;
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
  return PutAvoiding(ns, keys, bytes, ObjectChecksum(bytes), replicas, pinned, {});
}

absl::Status StoreClient::PutAvoiding(std::string_view ns, std::span<const BlockKey> keys,
                                      std::string_view bytes, uint64_t checksum, int replicas,
                                      bool pinned, std::vector<NodeId> avoid) {
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
  return BatchPut(ns, items, replicas, false);
}

std::vector<absl::Status> StoreClient::BatchPut(std::string_view ns, std::span<const PutItem> items,
                                                int replicas, bool pinned) {
  std::vector<absl::Status> out(items.size());
  // Chunks within the master's bounds on one request.
  for (size_t begin = 0; begin < items.size();) {
    size_t end = begin, keys = 0;
    while (end < items.size() && end - begin < kMaxBatchPuts &&
           (end == begin || keys + items[end].keys.size() <= kMaxBatchKeys)) {
      keys += items[end++].keys.size();
    }
    BatchPutOnce(ns, items.subspan(begin, end - begin), replicas, pinned,
                 std::span(out).subspan(begin, end - begin));
    begin = end;
  }
  return out;
}

void StoreClient::BatchPutOnce(std::string_view ns, std::span<const PutItem> items, int replicas,
                               bool pinned, std::span<absl::Status> out) {
  std::vector<uint64_t> checksums(items.size(), 0);
  std::vector<BatchPutSpec> specs;
  std::vector<size_t> item_of;  // specs[j] is items[item_of[j]]
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].keys.empty()) {
      out[i] = absl::InvalidArgumentError(fmt::format("BatchPut: item {} has no keys", i));
      continue;
    }
    checksums[i] = ObjectChecksum(items[i].bytes);
    specs.push_back({items[i].keys, items[i].bytes.size(), checksums[i]});
    item_of.push_back(i);
  }
  if (specs.empty()) return;
  auto placed = master_->PlacePutBatch(ns, specs, replicas, pinned);
  if (!placed.ok()) {
    for (size_t i : item_of) out[i] = placed.status();
    return;
  }
  // Per node, the replicas it is to hold: (spec index, replica index).
  struct NodeWrites {
    DataClient* client = nullptr;
    std::vector<std::pair<size_t, size_t>> writes;
  };
  absl::flat_hash_map<std::string, NodeWrites> by_node;
  // Per spec, per replica: the write's result.
  std::vector<std::vector<absl::Status>> written(specs.size());
  uint64_t bytes = 0;
  for (size_t j = 0; j < specs.size(); ++j) {
    if (!(*placed)[j].ok()) {
      out[item_of[j]] = (*placed)[j].status();
      continue;
    }
    ++stats_.puts;
    const std::vector<ReplicaInfo>& nodes = (*placed)[j]->replicas;
    written[j].resize(nodes.size());
    for (size_t r = 0; r < nodes.size(); ++r) {
      if (nodes[r].address.empty()) {
        written[j][r] = absl::FailedPreconditionError("the node registered no data address");
        continue;
      }
      NodeWrites& w = by_node[nodes[r].address];
      if (w.client == nullptr) w.client = &Node(nodes[r].address);
      w.writes.emplace_back(j, r);
      bytes += specs[j].size;
    }
  }
  auto write_node = [&](NodeWrites& w) {
    // Calls of at most kPipelinedPutBytes, so each stays well inside the node timeout.
    for (size_t begin = 0; begin < w.writes.size();) {
      std::vector<ObjectName> names;
      std::vector<std::string_view> values;
      uint64_t call_bytes = 0;
      size_t end = begin;
      for (; end < w.writes.size() && (end == begin || call_bytes < kPipelinedPutBytes); ++end) {
        const size_t j = w.writes[end].first;
        names.push_back({(*placed)[j]->namespace_id, (*placed)[j]->object});
        values.push_back(items[item_of[j]].bytes);
        call_bytes += values.back().size();
      }
      std::vector<absl::Status> statuses;
      (void)w.client->PutMany(names, values, &statuses);  // each object's status is in statuses
      for (size_t k = begin; k < end; ++k) {
        written[w.writes[k].first][w.writes[k].second] = std::move(statuses[k - begin]);
      }
      begin = end;
    }
  };
  if (by_node.size() > 1 && bytes >= kParallelPutBytes) {
    // Every node at once, each on its own connection and thread.
    std::vector<std::thread> threads;
    auto it = by_node.begin();
    for (++it; it != by_node.end(); ++it) threads.emplace_back(write_node, std::ref(it->second));
    write_node(by_node.begin()->second);
    for (std::thread& t : threads) t.join();
  } else {
    for (auto& [address, w] : by_node) write_node(w);
  }
  std::vector<BlockKey> done;
  std::vector<uint64_t> done_sizes;
  std::vector<size_t> done_specs;
  for (size_t j = 0; j < specs.size(); ++j) {
    if (!(*placed)[j].ok()) continue;
    const std::vector<ReplicaInfo>& nodes = (*placed)[j]->replicas;
    std::vector<NodeId> failed;
    absl::Status first_failure;
    for (size_t r = 0; r < nodes.size(); ++r) {
      if (written[j][r].ok()) continue;
      failed.push_back(nodes[r].node);
      if (first_failure.ok()) {
        first_failure = absl::Status(
            written[j][r].code(),
            fmt::format("writing replica {} on node {} ({}): {}", r, nodes[r].node,
                        nodes[r].address, std::string(written[j][r].message())));
      }
    }
    if (failed.empty()) {
      done.push_back((*placed)[j]->object);
      done_sizes.push_back(specs[j].size);
      done_specs.push_back(j);
      continue;
    }
    // Revoke and put it again on its own, as Put does after a failed write.
    ++stats_.revoked;
    const ObjectName name{(*placed)[j]->namespace_id, (*placed)[j]->object};
    for (size_t r = 0; r < nodes.size(); ++r) {
      if (written[j][r].ok()) (void)Node(nodes[r].address).Delete(std::span<const ObjectName>(&name, 1));
    }
    const size_t i = item_of[j];
    if (absl::Status st = master_->PutRevoke(ns, name.key); !st.ok()) {
      out[i] = absl::Status(first_failure.code(),
                            fmt::format("{}; revoking the put failed too: {}",
                                        std::string(first_failure.message()),
                                        std::string(st.message())));
      continue;
    }
    ++stats_.put_retries;
    absl::Status again = PutAvoiding(ns, items[i].keys, items[i].bytes, checksums[i], replicas,
                                     pinned, std::move(failed));
    out[i] = again.ok() ? again
                        : absl::Status(first_failure.code(),
                                       fmt::format("{}; putting it again: {}",
                                                   std::string(first_failure.message()),
                                                   std::string(again.message())));
  }
  if (done.empty()) return;
  auto ended = master_->PutEndBatch(ns, done, done_sizes);
  for (size_t k = 0; k < done.size(); ++k) {
    out[item_of[done_specs[k]]] = ended.ok() ? (*ended)[k] : ended.status();
  }
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
    // One batched request per node; the nodes at once when there is enough to read.
    struct NodeRead {
      const std::string* address;
      const std::vector<size_t>* indices;
      DataClient* client;
      absl::Status st;
      std::vector<std::string> got;
      std::vector<absl::StatusCode> codes;
      std::vector<uint8_t> matches;  // read, and the bytes match the checksum
    };
    std::vector<NodeRead> reads;
    uint64_t bytes = 0;
    for (auto& [address, indices] : by_node) {
      reads.push_back({&address, &indices, address.empty() ? nullptr : &Node(address), {}, {}, {}, {}});
      for (size_t i : indices) bytes += (*found)[i].size;
    }
    auto read_node = [&](NodeRead& r) {
      const std::vector<size_t>& indices = *r.indices;
      r.matches.assign(indices.size(), 0);
      if (r.client == nullptr) {
        r.st = absl::FailedPreconditionError("the node registered no address");
        return;
      }
      std::vector<ObjectName> names;
      for (size_t i : indices) names.push_back({(*found)[i].namespace_id, (*found)[i].object});
      r.st = r.client->Get(names, &r.got, &r.codes);
      for (size_t j = 0; r.st.ok() && j < indices.size(); ++j) {
        const uint64_t want = (*found)[indices[j]].checksum;
        r.matches[j] = r.codes[j] == absl::StatusCode::kOk &&
                       (want == 0 || ObjectChecksum(r.got[j]) == want);
      }
    };
    if (reads.size() > 1 && bytes >= kParallelPutBytes) {
      std::vector<std::thread> threads;
      for (size_t k = 1; k < reads.size(); ++k) threads.emplace_back(read_node, std::ref(reads[k]));
      read_node(reads[0]);
      for (std::thread& t : threads) t.join();
    } else {
      for (NodeRead& r : reads) read_node(r);
    }
    for (NodeRead& r : reads) {
      const std::vector<size_t>& indices = *r.indices;
      for (size_t j = 0; j < indices.size(); ++j) {
        const size_t i = indices[j];
        if (r.matches[j]) {
          (*values)[i] = std::move(r.got[j]);
          if (round > 0) ++stats_.fallbacks;
          continue;
        }
        const bool read = r.st.ok() && r.codes[j] == absl::StatusCode::kOk;
        std::string why = !r.st.ok() ? std::string(r.st.message())
                          : !read    ? std::string("does not hold the object")
                                     : fmt::format("its bytes do not match the checksum {:016x}",
                                                   (*found)[i].checksum);
        if (read) {
          ++mismatches[i];
          ++stats_.checksum_mismatches;
        }
        errors[i] += fmt::format(" [{} {}: {}]", (*found)[i].replicas[round].node, *r.address, why);
        next.push_back(i);
      }
    }
    open = std::move(next);
  }
  for (size_t i : open) all_failed(i);
  return absl::OkStatus();
}

}  // namespace myriad::kvstore
