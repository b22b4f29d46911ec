#pragma once
// EtcdElection: one member of a group that elects a leader through etcd, shared by the KV store
// masters (kvstore/ha_server.h) and the controllers (control/controller.h). Each member holds a
// lease (TTL lease_ttl_seconds, renewed every TTL/3) and campaigns by creating `key` = its
// `value`, bound to the lease, only while the key is absent; the winner's term is the key's
// create_revision, unique and increasing across elections. Followers watch the key and campaign
// again as soon as it is deleted (the leader resigned, or its lease expired: a dead leader is
// replaced within about one TTL); while the watch is down they read it every poll_interval.
// Every member also registers key + "/members/" + value under its lease, so that a new leader
// knows its peers.
//
// Fencing: after each keepalive sent at t the lease lives at least until t + TTL on etcd's
// clock, so a leader trusts its leadership only until t + TTL - fence_margin on its own clock
// (fence_until). A leader whose fence passed, whose lease etcd reports expired, or whose key is
// gone or someone else's steps down and campaigns again.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/time.h"

namespace myriad::net {

struct EtcdElectionOptions {
  std::string etcd;   // etcd's client URL, http://host:port
  std::string key;    // the leader key
  std::string value;  // this member's identity (its URL): the key's value while it leads
  int64_t lease_ttl_seconds = 3;
  // false: follow whoever leads, never campaign.
  bool campaign = true;
  Nanos fence_margin = 500 * kMillisecond;
  // How often the loop runs: the leader's fence check, and a follower's look at the key while
  // its watch is down.
  Nanos poll_interval = 200 * kMillisecond;
  Nanos etcd_timeout = kSecond;  // one etcd request
};

// Called on the election's thread.
struct EtcdElectionHooks {
  // Won: the term and the other members' values. Leading begins when it returns (a member
  // that must catch up first does it here).
  std::function<void(uint64_t term, const std::vector<std::string>& peers)> on_elected;
  std::function<void(const std::string& why)> on_step_down;
  // Another member leads (its value).
  std::function<void(const std::string& leader)> on_follow;
  std::function<void(const std::string& error)> on_error;
};

class EtcdElection {
 public:
  // The fence and the loop's schedule run on `clock` (null: the real one).
  EtcdElection(EtcdElectionOptions options, std::shared_ptr<Clock> clock, EtcdElectionHooks hooks);
  ~EtcdElection();  // Stop(true)
  EtcdElection(const EtcdElection&) = delete;
  EtcdElection& operator=(const EtcdElection&) = delete;

  void Start();
  // resign: revokes the lease, so that a follower takes over at once; otherwise the lease
  // expires by itself, as after a crash. Idempotent.
  void Stop(bool resign);
  // Won, and inside the fence.
  bool leading() const;
  // Until when this member may act as the leader (clock's time); 0 when it does not lead.
  Nanos fence_until() const { return fence_until_.load(); }
  uint64_t term() const { return term_.load(); }

 private:
  void Loop();
  void StepDown(const std::string& why);
  void Error(const std::string& error);
  void NapUntil(Nanos deadline);

  EtcdElectionOptions o_;
  std::shared_ptr<Clock> clock_;
  EtcdElectionHooks hooks_;
  std::unique_ptr<Sleeper> sleeper_;
  std::atomic<bool> leading_{false};
  std::atomic<Nanos> fence_until_{0};
  std::atomic<uint64_t> term_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> resign_{true};
  std::mutex stop_mu_;  // serializes Stop
  std::thread thread_;
};

}  // namespace myriad::net
