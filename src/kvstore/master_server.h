#pragma once
// MasterServer: one KvMaster behind a mutex, served as a JSON API over net::HttpServer, with a
// background thread that runs the master's housekeeping (KvMaster::Tick) every tick_interval.
// The metadata path only: clients learn from it which storage nodes to write to or read from;
// the bytes travel between clients and storage nodes directly.
//
// API (bodies are JSON; keys are 64-bit block keys, as decimal or "0x"-prefixed hex strings or
// as JSON integers; answers write them as "0x" + 16 hex digits):
//   POST   /v1/nodes                  {id, fault_domain, capacity_bytes[, address]}   -> 201
//   GET    /v1/nodes                  -> {nodes: [{id, address}]} (the registered nodes)
//   POST   /v1/nodes/{id}/heartbeat                                                  -> 200
//   POST   /v1/nodes/{id}/reconcile   {namespaces: [ids], objects: [keys]} -> {drop: [indices]}
//   POST   /v1/namespaces             {name}                                          -> 201
//   DELETE /v1/namespaces/{name}      (name percent-encoded or raw, '/' allowed)      -> 200
//   POST   /v1/put/start              {namespace, keys, size[, replicas, pinned, avoid]} -> replicas
//   POST   /v1/put/end | /v1/put/revoke  {namespace, object[, size]}
//   POST   /v1/get                    {namespace, keys} -> per key: found, replicas, lease
//   POST   /v1/exists                 {namespace, keys} -> per key: bool
//   POST   /v1/remove                 {namespace, keys} -> per key: removed or its error
//   GET    /v1/stats, GET /metrics (Prometheus text), GET /health
// Errors are {"error": {"message", "type", "param"?}}: 400 invalid_request (bad JSON, a
// missing or invalid field, named in "param"), 404 not_found, 405 method_not_allowed,
// 409 conflict (exists already, pending put, leased object), 413 payload_too_large (from the
// HTTP layer), 503 unavailable (no placement possible: too few fault domains or no room).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "core/clock.h"
#include "core/time.h"
#include "kvstore_core/master.h"
#include "net/http.h"
#include "net/http_server.h"

namespace myriad::kvstore {

struct MasterServerOptions {
  KvMasterOptions master;
  net::HttpServerOptions http;
  Nanos tick_interval = 100 * kMillisecond;
  // The master's clock (core/clock.h); the real one when null. Leases, heartbeat deadlines, put
  // timeouts and the housekeeping tick's schedule are all read from it.
  std::shared_ptr<Clock> clock;
  // The cluster's shared secret (kvstore/auth.h): every route but /health and /metrics answers
  // 401 without it. Empty: open to anyone who reaches the port.
  std::string auth_token = {};
};

// The operations the API counts in its metrics: a fixed set, so label cardinality is bounded.

enum class MasterOp : int {
  kRegisterNode,
  kHeartbeat,
  kCreateNamespace,
  kDropNamespace,
  kPutStart,
  kPutEnd,
  kPutRevoke,
  kGet,
  kExists,
  kRemove,
  kRepairPlan,
  kRepairReport,
  kReconcile,
  kListNodes,
  kPutBatchStart,
  kPutBatchEnd,
  kStats,
  kMetrics,
  kHealth,
  kUnknown,
  kCount,
};

class MasterServer {
 public:
  explicit MasterServer(MasterServerOptions options);
  ~MasterServer();
  MasterServer(const MasterServer&) = delete;
  MasterServer& operator=(const MasterServer&) = delete;

  // Listens and starts the housekeeping thread.
  absl::Status Start();
  // Stops serving and housekeeping. Idempotent.
  void Stop();
  // The bound port (see net::HttpServer::port).
  uint16_t port() const { return http_.port(); }

  // One request, routed as the HTTP server routes it; thread-safe. Tests and benchmarks call it
  // directly to leave sockets out.
  net::HttpResponse Handle(const net::HttpRequest& request);
  // One housekeeping round at the clock's now (the background thread calls it).
  void Tick();

  // Replication (kvstore/ha_server.h drives these; each takes the lock; see
  // master_server_replication.cc). What changed since the last call: the master's operation-log
  // records plus the storage nodes' addresses registered. A server run by Start() alone (no
  // standbys) discards them every tick, so its log never grows without bound.
  std::string TakeLog();
  // A standby: applies a leader's TakeLog, or a SnapshotLog into a fresh server.
  absl::Status ApplyLog(std::string_view payload);
  // Everything replicated (metadata and node addresses), as one ApplyLog payload.
  std::string SnapshotLog() const;
  // A standby becomes the leader at the clock's now (leases and heartbeat clocks restart).
  void Promote();
  uint64_t CanonicalHash() const;

 private:
  net::HttpResponse Route(const net::HttpRequest& request, MasterOp* op);
  net::HttpResponse RegisterNode(const net::HttpRequest& request);
  net::HttpResponse NodeHeartbeat(std::string_view id);
  net::HttpResponse CreateNamespace(const net::HttpRequest& request);
  net::HttpResponse DropNamespace(std::string_view name);
  net::HttpResponse PutStart(const net::HttpRequest& request);
  net::HttpResponse PutEndOrRevoke(const net::HttpRequest& request, bool end);
  // A batch of puts in one call (master_server_batch.cc): every placement under one lock, one
  // result per put; then the ends of those written.
  net::HttpResponse PutBatchStart(const net::HttpRequest& request);
  net::HttpResponse PutBatchEnd(const net::HttpRequest& request);
  net::HttpResponse Get(const net::HttpRequest& request);
  net::HttpResponse Exists(const net::HttpRequest& request);
  net::HttpResponse Remove(const net::HttpRequest& request);
  // Metrics of a batch call: keys asked and found (or removed).
  void CountKeys(MasterOp op, size_t keys, uint64_t hits);
  // Repair agents: take copy tasks (within the master's repair byte budget), report each back.
  net::HttpResponse RepairPlan(const net::HttpRequest& request);
  net::HttpResponse RepairReport(const net::HttpRequest& request, bool done);
  // Storage nodes: which of the objects they hold to free (master_server_reconcile.cc).
  net::HttpResponse Reconcile(std::string_view id, const net::HttpRequest& request);
  net::HttpResponse Stats();
  // The live nodes' ids and data addresses: a node pushes a COPY_TO only to one of these.
  net::HttpResponse ListNodes();
  net::HttpResponse Metrics();
  // The replica list as JSON (id, fault_domain, address when known). Needs mu_.
  std::string ReplicasJson(const ReplicaList& replicas) const;
  // Ticks every tick_interval from `started` (read by Start, not by the thread: one that is
  // scheduled late must not shift the schedule past time a test has already stepped).
  void TickLoop(Nanos started);

  MasterServerOptions options_;
  std::shared_ptr<Clock> clock_;

  // Guards the master and the server's own view of the nodes and namespaces.
  mutable std::mutex mu_;
  KvMaster master_;
  absl::flat_hash_map<NodeId, std::string> addresses_;
  // Address registrations (empty: none) since the last TakeLog.
  std::vector<std::pair<NodeId, std::string>> address_log_;
  absl::flat_hash_set<NodeId> dead_;  // declared dead and not registered again
  uint64_t nodes_declared_dead_ = 0;
  uint64_t puts_expired_ = 0;
  uint64_t namespaces_reclaimed_ = 0;
  int64_t namespaces_ = 0;

  // Request counters, outside the lock.
  static constexpr int kOps = static_cast<int>(MasterOp::kCount);
  static constexpr int kErrorTypes = 7;
  std::atomic<uint64_t> requests_[kOps] = {};
  std::atomic<uint64_t> errors_[kOps][kErrorTypes] = {};
  std::atomic<uint64_t> keys_[kOps] = {};
  std::atomic<uint64_t> hits_[kOps] = {};

  net::HttpServer http_;

  std::unique_ptr<Sleeper> tick_sleeper_;
  std::atomic<bool> tick_stop_{false};
  std::thread ticker_;
};

}  // namespace myriad::kvstore
