#include "kvstore/repair_agent.h"

#include <fmt/format.h>

#include <memory>

#include "absl/container/flat_hash_map.h"
#include "kvstore/data_client.h"
#include "kvstore/master_client.h"

namespace myriad::kvstore {

RepairAgent::RepairAgent(RepairAgentOptions options)
    : options_(std::move(options)), clock_(OrDefaultClock(options_.clock)) {}
RepairAgent::~RepairAgent() { Stop(); }

absl::Status RepairAgent::Start() {
  // Fail early on a bad URL; the workers connect on their own.
  auto probe = MasterClient::Connect(options_.master_url, options_.master_timeout, options_.auth_token);
  if (!probe.ok()) return probe.status();
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    sleepers_.push_back(clock_->NewSleeper());
    workers_.emplace_back([this, idle = sleepers_.back().get()] { Worker(idle); });
  }
  return absl::OkStatus();
}

void RepairAgent::Stop() {
  stop_ = true;
  for (auto& s : sleepers_) s->Wake();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  sleepers_.clear();
}

RepairAgentStats RepairAgent::stats() const {
  return {done_.load(), failed_.load(), bytes_.load(), master_errors_.load()};
}

void RepairAgent::Worker(Sleeper* idle_sleeper) {
  std::unique_ptr<MasterClient> master;
  // One kept-alive data connection per source node.
  absl::flat_hash_map<std::string, std::unique_ptr<DataClient>> sources;
  for (;;) {
    bool idle = true;
    if (!master) {
      auto c = MasterClient::Connect(options_.master_url, options_.master_timeout, options_.auth_token);
      if (c.ok()) master = std::move(*c);
    }
    if (master) {
      absl::StatusOr<std::vector<RepairOrder>> orders =
          master->PlanRepairOrders(options_.tasks_per_plan);
      if (!orders.ok()) {
        ++master_errors_;
      } else {
        idle = orders->empty();
        for (const RepairOrder& o : *orders) {
          absl::Status st;
          if (o.source_address.empty() || o.destination_address.empty()) {
            st = absl::FailedPreconditionError("a node of the task registered no address");
          } else {
            auto& client = sources[o.source_address];
            if (!client) {
              client = std::make_unique<DataClient>(
                  o.source_address, DataClientOptions{.timeout = options_.copy_timeout, .auth_token = options_.auth_token});
            }
            st = client->CopyTo({o.task.ns, o.task.object}, o.destination_address,
                                o.task.checksum);
          }
          const absl::Status report = st.ok() ? master->RepairDone(o.task) : master->RepairFailed(o.task);
          if (!report.ok()) ++master_errors_;
          if (st.ok()) {
            ++done_;
            bytes_ += o.task.bytes;
          } else {
            ++failed_;
          }
        }
      }
    }
    if (stop_.load()) return;
    if (idle) {
      idle_sleeper->SleepFor(options_.poll_interval);
      if (stop_.load()) return;
    }
  }
}

}  // namespace myriad::kvstore
