#pragma once
// MasterClient: the typed C++ client of the KV store master's HTTP API (kvstore/master_server.h),
// for engines' connectors, tools and tests. Each call is one request on a kept-alive connection;
// the master's HTTP errors come back as absl statuses with its message: 400 InvalidArgument,
// 404 NotFound, 409 FailedPrecondition (exists already, pending, leased), 413 ResourceExhausted,
// 503 Unavailable (no placement possible), 401 Unauthenticated (no or a wrong token); a master that cannot be reached is Unavailable or
// DeadlineExceeded. Not thread-safe: one client per thread.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/block_hash.h"
#include "core/time.h"
#include "kvstore_core/types.h"
#include "net/http_client.h"

namespace myriad::kvstore {

struct ReplicaInfo {
  NodeId node = 0;
  std::string fault_domain;
  std::string address;  // where the node serves its bytes, when it registered one
};

struct Lookup {
  NamespaceId namespace_id = 0;  // how storage nodes name the namespace
  BlockKey key = 0;
  bool found = false;
  bool pending = false;  // stored but its put has not ended
  BlockKey object = 0;   // the run holding the key (its last block key)
  uint32_t block = 0;    // the key's position in the run
  uint32_t blocks = 0;
  uint64_t size = 0;
  Nanos lease_until = 0;  // on the master's clock
  uint64_t checksum = 0;  // the writer's ObjectChecksum of the bytes; 0: none was given
  std::vector<ReplicaInfo> replicas;
};

// Following the leader of a group of masters (kvstore/ha_server.h): a standby answers 421 with
// the leader's URL, and the client moves there and retries; a master that cannot be reached is
// left for the next one in the list. Calls that are safe to repeat (reads, heartbeats,
// registration, put end/revoke, repair reports) are retried after a connection failure too;
// the others (put start, remove, namespace create/drop) are retried only on 421, which
// guarantees that the request was not executed, and return the connection error otherwise
// (the next call goes to the next master).
struct MasterClientOptions {
  Nanos timeout = 10 * kSecond;  // one request
  // How long a call keeps looking for the leader before it gives up with the last error.
  Nanos failover_timeout = 15 * kSecond;
  // The cluster's shared secret (kvstore/auth.h), sent with every request; empty: none.
  std::string auth_token = {};
};

// A put's placement: the storage nodes name objects by (namespace id, object).
struct Placement {
  NamespaceId namespace_id = 0;
  BlockKey object = 0;
  std::vector<ReplicaInfo> replicas;
};

// One put of a batch (MasterClient::PlacePutBatch).
struct BatchPutSpec {
  std::span<const BlockKey> keys;  // the run, in chain order; the last key names the object
  uint64_t size = 0;
  uint64_t checksum = 0;  // the bytes' ObjectChecksum; 0: none
};

// A repair task with the data-path addresses of its two nodes (empty when not registered).
struct RepairOrder {
  RepairTask task;
  std::string source_address;
  std::string destination_address;
};

class MasterClient {
 public:
  // "http://host:port", or several masters of one group comma-separated (as ConnectAny):
  // storage nodes, repair agents and store clients given a list follow the leader.
  static absl::StatusOr<std::unique_ptr<MasterClient>> Connect(std::string_view url,
                                                               Nanos timeout = 10 * kSecond,
                                                               std::string auth_token = {});
  // Several masters of one group: "http://a:7700", "http://b:7700"...; starts with the first.
  static absl::StatusOr<std::unique_ptr<MasterClient>> ConnectAny(std::vector<std::string> urls,
                                                                  MasterClientOptions options = {});
  // The group's masters as registered in etcd (kvstore/ha_server.h): the leader named by
  // `election_key` first, then every member under election_key + "/members/". Fails when etcd
  // cannot be reached or no master is registered.
  static absl::StatusOr<std::unique_ptr<MasterClient>> ConnectViaEtcd(
      std::string_view etcd, std::string_view election_key = "/myriad/kvstore/leader",
      MasterClientOptions options = {});
  // The master the next call goes to.
  const std::string& current_url() const { return urls_[current_]; }
  // Calls answered after moving to another master (leader changes followed).
  uint64_t failovers() const { return failovers_; }

  absl::Status RegisterNode(NodeId node, std::string_view fault_domain, uint64_t capacity_bytes,
                            std::string_view address = {});
  absl::Status Heartbeat(NodeId node);
  absl::Status CreateNamespace(std::string_view name);
  absl::Status DropNamespace(std::string_view name);

  // Two-phase put of the run `keys` (chain order): where to write, then done (or revoked).
  absl::StatusOr<std::vector<ReplicaInfo>> PutStart(std::string_view ns, std::span<const BlockKey> keys,
                                                    uint64_t size, int replicas = 1, bool pinned = false);
  // PutStart with the namespace id that the storage nodes key objects by.
  // `avoid`: nodes not to place on (they failed an earlier attempt of this put).
  absl::StatusOr<Placement> PlacePut(std::string_view ns, std::span<const BlockKey> keys,
                                     uint64_t size, int replicas = 1, bool pinned = false,
                                     std::span<const NodeId> avoid = {},
                                     uint64_t checksum = 0);
  // `size` (nonzero): the put's size; an end resent after a failover that finds the object
  // complete with that size is then OK rather than "already complete".
  absl::Status PutEnd(std::string_view ns, BlockKey object, uint64_t size = 0);
  absl::Status PutRevoke(std::string_view ns, BlockKey object);
  // The batched forms, one request each (at most kMaxBatchPuts puts and kMaxBatchKeys keys):
  // a placement or the master's refusal per put, in order; the returned status is the call's
  // (unknown namespace, a bad batch, the master unreachable). Like PutStart, a batch start is
  // sent again only when the master answered that it is not the leader.
  absl::StatusOr<std::vector<absl::StatusOr<Placement>>> PlacePutBatch(
      std::string_view ns, std::span<const BatchPutSpec> puts, int replicas = 1,
      bool pinned = false, std::span<const NodeId> avoid = {});
  // `sizes`: empty, or each object's size as PutEnd's.
  absl::StatusOr<std::vector<absl::Status>> PutEndBatch(std::string_view ns,
                                                        std::span<const BlockKey> objects,
                                                        std::span<const uint64_t> sizes = {});

  // One result per key, in order; a found key's run is leased to the caller.
  absl::StatusOr<std::vector<Lookup>> Get(std::string_view ns, std::span<const BlockKey> keys);
  absl::StatusOr<std::vector<bool>> Exists(std::string_view ns, std::span<const BlockKey> keys);
  // One status per object: removal fails while an object is leased or pending.
  absl::StatusOr<std::vector<absl::Status>> Remove(std::string_view ns, std::span<const BlockKey> objects);

  // Repair agents: copy tasks within the master's repair byte budget, each reported back.
  absl::StatusOr<std::vector<RepairTask>> PlanRepairs(size_t max_tasks = 64);
  // PlanRepairs with where to send the copy order and the bytes.
  absl::StatusOr<std::vector<RepairOrder>> PlanRepairOrders(size_t max_tasks = 64);
  absl::Status RepairDone(const RepairTask& task);
  absl::Status RepairFailed(const RepairTask& task);

  absl::StatusOr<nlohmann::json> Stats();
  // The data addresses of the registered nodes (those that gave one).
  absl::StatusOr<std::vector<std::string>> NodeAddresses();

  // Storage nodes: the indices of `held` that the master no longer places on `node` (free
  // them). NotFound when the node is not registered (register again first).
  absl::StatusOr<std::vector<uint32_t>> Reconcile(NodeId node, std::span<const HeldObject> held);

 private:
  MasterClient(std::vector<std::string> urls, MasterClientOptions options)
      : urls_(std::move(urls)), options_(options) {}
  // The answer's JSON when the status is 2xx, the master's error as a status otherwise.
  // `idempotent`: safe to send again after a connection failure (see above).
  absl::StatusOr<nlohmann::json> Call(std::string_view method, std::string_view target,
                                      const nlohmann::json* body, bool idempotent = true);
  // Points the client at urls_[i] (a new connection).
  absl::Status Use(size_t i);
  std::vector<std::string> urls_;
  MasterClientOptions options_;
  size_t current_ = 0;
  uint64_t failovers_ = 0;
  std::unique_ptr<net::HttpClient> http_;
};

// The status for an HTTP error answer of the master (its {"error": {...}} body).
absl::Status StatusFromHttp(int http_status, std::string_view body);

}  // namespace myriad::kvstore
