#pragma once
// HaServer: a KV store master that is part of a highly available group of masters. One of them
// leads, elected through etcd; the others are standbys that apply the leader's operation log
// continuously and take over when the leader goes.
//
// Election: net/etcd_election.h (a lease, the election_key created while absent, its
// create_revision as the term, a watch on it, election_key + "/members/" + URL for the peers).
//
// Fencing. A leader accepts and acknowledges writes only while it is sure its lease is alive:
// until the election's fence_until (master.clock: the election loop's schedule, the fence and
// the housekeeping tick run on it; the replication acks' timeouts and the standby's pulls are
// network waits, on the real clock). Requests arriving later get 421, and a write waiting for
// its standbys' acks is answered 503 if the fence passes meanwhile. A new leader can only win
// once the old lease has expired, i.e. after the old leader stopped acknowledging.
//
// Log shipping (kvstore/repl_log.h). Every mutating request runs under one lock: the master
// handles it, and what it changed (MasterServer::TakeLog) becomes the next batch of the
// replication log. Standbys pull batches with GET /v1/log?from=SEQ&term=T&standby=URL&wait_ms=MS
// (a long poll; binary frames with a checksum each) and apply them; a pull from SEQ reports that
// the standby has applied every batch before SEQ. The leader answers a write only once
// sync_standbys standbys have applied its batch (semi-synchronous; 503 after sync_timeout), so
// an acknowledged write is on at least sync_standbys + 1 masters. A standby whose log does not
// match, or that needs batches already trimmed from the leader's memory, gets 410 and installs
// GET /v1/snapshot (the whole metadata as log records, KvMaster::SnapshotLog) into a fresh
// master.
//
// Promotion. The winner of an election first pulls from its peers any batches they applied and
// it has not (the standby that acknowledged the last writes may not be the one that won), or
// their snapshot when its own log is too short or diverged (a master that restarted empty and
// won), taking peers whose logs are ahead of its own (by term, then length), most up to date
// first; then it Promote()s its master and serves. Standbys answer every API request with 421
// naming the leader (header X-Myriad-Leader and the JSON error's "leader"), reads included: a
// standby's state lags the leader's and a read there would grant a lease the leader does not
// know of. They do serve /health, /metrics, /v1/ha (role, leader, term, log position, standbys'
// positions, errors), /v1/log and /v1/snapshot.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "core/clock.h"
#include "core/time.h"
#include "kvstore/master_server.h"
#include "kvstore/repl_log.h"
#include "net/etcd_election.h"
#include "net/http.h"
#include "net/http_server.h"

namespace myriad::kvstore {

struct HaOptions {
  // The master (its http options are this server's listener; at least 8 threads, since the
  // standbys' log pulls long-poll on the io threads; writes wait for acks off them). Its clock
  // is this server's too.
  MasterServerOptions master;
  // etcd's client URL; empty: no election, this master leads alone (sync_standbys must be 0).
  std::string etcd;
  std::string election_key = "/myriad/kvstore/leader";
  // The URL the other masters and clients reach this one at; http://address:port when empty.
  std::string advertise;
  int64_t lease_ttl_seconds = 3;
  // false: a mirror that applies the log and serves catch-ups but never campaigns (a standby in
  // a far zone, or a test's way of choosing who wins).
  bool campaign = true;
  Nanos fence_margin = 500 * kMillisecond;
  // How often the election loop runs: the leader's fence check, and a standby's look at the
  // leader key while its etcd watch on it is down (with a live watch a standby wakes on the
  // key's deletion, or at its next keepalive).
  Nanos poll_interval = 200 * kMillisecond;
  Nanos etcd_timeout = 1 * kSecond;          // one etcd request
  // Standbys that must have applied a write before the leader acknowledges it, and how long
  // the leader waits for them.
  int sync_standbys = 1;
  Nanos sync_timeout = 2 * kSecond;
  Nanos pull_wait = 500 * kMillisecond;  // a standby's long poll
  size_t pull_max_bytes = size_t{4} << 20;
  ReplicationLogOptions log;
};

enum class HaRole : int { kStandby = 0, kLeader = 1 };

struct HaStatus {
  HaRole role = HaRole::kStandby;
  std::string leader;     // the leader's URL as last seen; empty when unknown
  uint64_t term = 0;      // of the last batch applied or written
  uint64_t next_seq = 1;  // the next batch this master expects or writes
  uint64_t snapshots = 0;        // snapshots installed
  uint64_t batches_rejected = 0; // corrupt or non-applying batches pulled
  uint64_t elections_won = 0;
  uint64_t step_downs = 0;
  std::string last_error;
  std::string last_step_down;  // why this master last stopped leading
};

class HaServer {
 public:
  explicit HaServer(HaOptions options);
  ~HaServer();
  HaServer(const HaServer&) = delete;
  HaServer& operator=(const HaServer&) = delete;

  // Listens, then campaigns (or leads alone without etcd).
  absl::Status Start();
  // Resigns (revokes the lease, so a standby takes over at once) and stops. Idempotent.
  void Stop();
  // A crash as far as the others can tell: stops serving and renewing without revoking, so the
  // lease expires by itself (tests and the failover experiment).
  void Kill();

  uint16_t port() const { return http_.port(); }
  const std::string& url() const { return advertise_; }
  bool is_leader() const;  // leader and inside its fence
  HaStatus status() const;
  uint64_t CanonicalHash() const;

  // One request answered in full; a write waits here for its standbys (tests, benchmarks).
  net::HttpResponse Handle(const net::HttpRequest& request);

 private:
  // The HTTP server's entry: a write waits for its standbys' acknowledgement off the io
  // threads (its responder parked, answered by the acker thread), so writers waiting can never
  // hold every io thread while the standbys' log pulls, which bring the acks, queue behind
  // them; everything else is answered at once.
  void HandleAsync(net::HttpRequest request, std::shared_ptr<net::HttpResponder> r);
  bool IsWrite(const net::HttpRequest& request) const;
  // Runs a write on the leader and appends its log batch; returns the batch (0: nothing to
  // replicate, *response is final).
  uint64_t ApplyWrite(const net::HttpRequest& request, net::HttpResponse* response);
  // The answer to a write once its batch was acknowledged (or not) by the standbys.
  net::HttpResponse Confirmed(uint64_t seq, bool acked, net::HttpResponse response);
  // Answers the parked writes the standbys have now confirmed (called where acks arrive: a
  // standby's log pull), in batch order.
  void AnswerAcked();
  // Answers parked writes past their deadline (503) and, when stopping, all of them.
  void AckLoop();
  struct PendingWrite {
    uint64_t seq = 0;
    Nanos deadline = 0;  // steady clock
    net::HttpResponse response;
    std::shared_ptr<net::HttpResponder> r;
  };
  std::shared_ptr<MasterServer> master() const;
  net::HttpResponse NotLeader() const;
  net::HttpResponse Write(const net::HttpRequest& request);
  net::HttpResponse Log(const net::HttpRequest& request);
  net::HttpResponse Snapshot();
  net::HttpResponse State() const;
  std::string Metrics() const;  // the HA families appended to the master's /metrics
  void TickLoop(Nanos started);  // as MasterServer::TickLoop

  // ha_election.cc
  void PullLoop();
  // Pulls once from `url` into this master (a standby following its leader, or a new leader
  // catching up from a peer). Returns batches applied; an error when the pull failed.
  absl::StatusOr<uint64_t> PullOnce(const std::string& url, Nanos wait, bool ack);
  // `catching_up`: for a new leader's catch-up, which the puller must not race.
  absl::Status InstallSnapshot(const std::string& url, bool catching_up = false);
  void BecomeLeader(uint64_t term, const std::vector<std::string>& peers);
  void StepDown(std::string why);
  void SetError(std::string error);
  void Shutdown(bool resign);

  HaOptions options_;
  std::shared_ptr<Clock> clock_;
  std::string advertise_;
  net::HttpServer http_;
  ReplicationLog log_;

  // Serializes everything that changes the metadata and the log together: the leader's writes
  // and ticks, a standby's applies and snapshot installs, promotion.
  mutable std::mutex state_mu_;
  mutable std::mutex ptr_mu_;  // guards master_ (swapped by a snapshot install)
  std::shared_ptr<MasterServer> master_;

  std::atomic<int> role_{static_cast<int>(HaRole::kStandby)};
  // Until when this master may acknowledge writes (clock_'s time): the election's fence.
  Nanos FenceUntil() const;
  std::atomic<uint64_t> term_{0};
  std::atomic<bool> need_snapshot_{false};
  std::atomic<bool> promoting_{false};  // between winning an election and leading
  std::atomic<uint64_t> unconfirmed_{0};
  mutable std::mutex info_mu_;
  std::string leader_;
  HaStatus counters_;

  std::unique_ptr<Sleeper> tick_sleeper_;

  std::atomic<bool> started_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> resign_{true};
  std::unique_ptr<net::EtcdElection> election_;  // null: no etcd, this master leads alone
  std::thread puller_, ticker_;

  std::mutex pending_mu_;
  std::condition_variable pending_cv_;
  std::deque<PendingWrite> pending_;  // in batch order
  bool acker_stop_ = false;
  std::thread acker_;
};

}  // namespace myriad::kvstore
