#pragma once
// RepairAgent: carries out the master's repair tasks (KvMaster::PlanRepairs): for each copy task
// it tells the source node to push the object to the destination node (data path COPY_TO),
// then reports RepairDone or RepairFailed. The byte-rate cap is the master's: it hands out
// tasks only within its repair budget, so the agent copies as fast as it is given tasks.
//
// It runs as its own process (`myriad kvstore repair`) or inside any other (tests, the
// benchmark), not inside each storage node: one agent (or a few, the master hands each task out
// once) polls the master instead of every node, a task's source dying does not take the agent
// with it, and the data still flows node to node, never through the agent.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "core/clock.h"
#include "core/time.h"

namespace myriad::kvstore {

struct RepairAgentOptions {
  std::string master_url;
  int workers = 4;          // tasks copied at once
  size_t tasks_per_plan = 8;  // tasks a worker takes per request
  Nanos poll_interval = 200 * kMillisecond;  // when there is nothing to repair
  // The idle poll's clock (core/clock.h); the real one when null. Copies and calls to the
  // master keep their real-time timeouts.
  Nanos copy_timeout = 60 * kSecond;
  Nanos master_timeout = 5 * kSecond;
  // The cluster's shared secret (kvstore/auth.h), for the master and the source nodes.
  std::string auth_token = {};
  std::shared_ptr<Clock> clock = nullptr;
};

struct RepairAgentStats {
  uint64_t done = 0;
  uint64_t failed = 0;
  uint64_t bytes = 0;  // bytes of the tasks done
  uint64_t master_errors = 0;
};

class RepairAgent {
 public:
  explicit RepairAgent(RepairAgentOptions options);
  ~RepairAgent();
  RepairAgent(const RepairAgent&) = delete;
  RepairAgent& operator=(const RepairAgent&) = delete;

  absl::Status Start();
  void Stop();  // idempotent
  RepairAgentStats stats() const;

 private:
  void Worker(Sleeper* idle);

  RepairAgentOptions options_;
  std::shared_ptr<Clock> clock_;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Sleeper>> sleepers_;  // one per worker; Stop wakes them
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> done_{0}, failed_{0}, bytes_{0}, master_errors_{0};
};

}  // namespace myriad::kvstore
