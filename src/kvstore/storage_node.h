#pragma once
// StorageNode: one `myriad kvstore node`: the bytes (kvstore/node_store.h), the TCP data path
// (kvstore/data_server.h), and a control thread that registers with the master, heartbeats,
// registers again when the master has forgotten it (declared dead, or a new master), and
// reconciles: it lists the objects it holds to the master in batches and frees those the master
// no longer places on it (evicted, removed, revoked, failed repairs, dropped namespaces).
//
// Why reconciliation rather than a queue of frees pushed by the master: the answer derives from
// the master's replicated metadata alone, so it is right after a failover (a queue would be
// soft state lost with the leader), after a node's restart or a missed message, and the master
// keeps nothing per node. Its cost is a sweep of the node's objects every reconcile_interval
// (16 bytes per object on the wire, one hash lookup each on the master); a put that finds no
// room triggers a sweep at once, so bytes the master already counts as free come back when they
// are needed. Writes of objects the master did not place here are not refused up front (that
// would take a master round trip per write): the next sweep frees them.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "core/clock.h"
#include "core/time.h"
#include "kvstore/data_server.h"
#include "kvstore/node_store.h"
#include "kvstore/shm_server.h"
#include "kvstore_core/types.h"

namespace myriad::net {
class HttpServer;
}

namespace myriad::kvstore {

struct StorageNodeOptions {
  std::string master_url;  // http://host:port
  NodeId id = 0;
  std::string fault_domain;
  uint64_t capacity_bytes = uint64_t{1} << 30;
  uint64_t segment_bytes = uint64_t{256} << 20;
  DataServerOptions data;
  // Registered as the node's address; default: the data path's listen address and port.
  std::string advertise;
  // Well under the master's 10 s death timeout.
  Nanos heartbeat_interval = 1 * kSecond;
  Nanos reconcile_interval = 5 * kSecond;
  size_t reconcile_batch = 4096;
  Nanos master_timeout = 2 * kSecond;
  // An HTTP port for /metrics (Prometheus) and /health; -1: none, 0: ephemeral.
  int http_port = -1;
  // The same-host shared-memory data path's Unix socket (kvstore/shm_server.h); empty: none.
  // Clients on this host that reach the path use it instead of TCP (kvstore/data_client.h).
  std::string shm_socket;
  // Seeds the token a shm client must present (it proves the socket is this node's, not
  // another host's node at the same path); 0: seeded from the clock and the process id.
  uint64_t shm_seed = 0;
  // How long the shm path's connection threads poll before they sleep (ShmServerOptions::spin).
  Nanos shm_spin = shm::kDefaultSpin;
  // The cluster's shared secret (kvstore/auth.h): sent to the master, required on the data path
  // and the shm hello, presented when pushing a COPY_TO. Overrides data.auth_token. Empty: open.
  std::string auth_token = {};
  // The control loop's clock (core/clock.h): heartbeats, reconcile sweeps and the peer list's
  // refresh run on it; the real one when null. Master calls keep their own transport timeouts.
  std::shared_ptr<Clock> clock = {};
};

struct StorageNodeStats {
  uint64_t registrations = 0;
  uint64_t heartbeats = 0;
  uint64_t master_errors = 0;
  uint64_t reconcile_sweeps = 0;
  uint64_t objects_freed = 0;  // by reconciliation
};

class StorageNode {
 public:
  explicit StorageNode(StorageNodeOptions options);
  ~StorageNode();
  StorageNode(const StorageNode&) = delete;
  StorageNode& operator=(const StorageNode&) = delete;

  // Listens (data path, metrics) and starts the control thread; the first registration happens
  // there (a master that is not up yet is retried every heartbeat interval).
  absl::Status Start();
  void Stop();  // idempotent

  uint16_t data_port() const { return data_.port(); }
  uint16_t http_port() const;
  const std::string& address() const { return advertise_; }
  NodeStore& store() { return store_; }
  const DataServer& data_server() const { return data_; }
  // nullptr unless options.shm_socket was set.
  const ShmServer* shm_server() const { return shm_.get(); }
  StorageNodeStats stats() const;
  bool registered() const { return registered_.load(); }
  // Runs a reconcile sweep now (the control thread does it at its next wake-up).
  void RequestReconcile();
  // Whether `address` is a node the master has registered, as last asked (COPY_TO pushes only
  // there); a miss asks the master again at the control thread's next wake-up.
  bool KnownPeer(std::string_view address);
  // Prometheus text of the node's store, data path and control loop.
  std::string MetricsText();

 private:
  void ControlLoop();
  // One sweep over every object held; false when the master could not be asked.
  bool Reconcile(class MasterClient& master);
  // Asks the master for the registered nodes' addresses; false when it could not.
  bool RefreshPeers(class MasterClient& master);

  StorageNodeOptions options_;
  NodeStore store_;
  DataServer data_;
  std::unique_ptr<ShmServer> shm_;
  std::unique_ptr<net::HttpServer> http_;
  std::string advertise_;

  std::shared_ptr<Clock> clock_;
  std::unique_ptr<Sleeper> sleeper_;  // the control loop's waits; woken by the flags below
  std::mutex mu_;
  bool stop_ = false;
  bool reconcile_now_ = false;
  bool peers_now_ = true;
  absl::flat_hash_set<std::string> peers_;  // guarded by mu_
  std::thread control_;
  std::atomic<bool> registered_{false};
  std::atomic<bool> started_{false};

  std::atomic<uint64_t> registrations_{0}, heartbeats_{0}, master_errors_{0}, sweeps_{0},
      freed_{0};
};

}  // namespace myriad::kvstore
