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
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "core/time.h"

namespace myriad::kvstore {

struct RepairAgentOptions {
  std::string master_url;
  int workers = 4;          // tasks copied at once
  size_t tasks_per_plan = 8;  // tasks a worker takes per request
  Nanos poll_interval = 200 * kMillisecond;  // when there is nothing to repair
  Nanos copy_timeout = 60 * kSecond;
  Nanos master_timeout = 5 * kSecond;
  // The cluster's shared secret (kvstore/auth.h), for the master and the source nodes.
  std::string auth_token = {};
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
  void Worker();

  RepairAgentOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> done_{0}, failed_{0}, bytes_{0}, master_errors_{0};
};

}  // namespace myriad::kvstore
