// The repair agent's idle poll runs on its clock: stepped in virtual time, it asks the master
// for work exactly once per poll_interval, with no sleeping in the test.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/clock.h"
#include "kvstore/master_server.h"
#include "kvstore/repair_agent.h"
#include "net/http_client.h"

namespace myriad::kvstore {
namespace {

// The master's count of repair-plan requests, from its /metrics.
int RepairPlans(uint16_t port) {
  net::HttpClient client(net::HostPort{"127.0.0.1", port});
  auto m = client.Get("/metrics");
  if (!m.ok()) return -1;
  const std::string sample = "myriad_kvstore_requests_total{op=\"repair_plan\"} ";
  const size_t at = m->body.find(sample);
  return at == std::string::npos ? 0 : std::stoi(m->body.substr(at + sample.size()));
}

TEST(RepairAgentClockTest, AnIdleAgentPollsOncePerIntervalOfItsClock) {
  MasterServerOptions mo;
  mo.http.address = "127.0.0.1";
  mo.http.port = 0;
  MasterServer master(mo);
  ASSERT_TRUE(master.Start().ok());
  auto clock = std::make_shared<ManualClock>();
  RepairAgent agent(RepairAgentOptions{.master_url = "http://127.0.0.1:" + std::to_string(master.port()),
                                       .workers = 1,
                                       .poll_interval = kSecond,
                                       .clock = clock});
  ASSERT_TRUE(agent.Start().ok());
  ASSERT_TRUE(clock->AwaitSleepers(1));  // nothing to repair: asleep after one look
  EXPECT_EQ(RepairPlans(master.port()), 1);
  clock->Advance(kSecond - 1);
  ASSERT_TRUE(clock->AwaitSleepers(1));
  EXPECT_EQ(RepairPlans(master.port()), 1);
  clock->Advance(1);
  ASSERT_TRUE(clock->AwaitSleepers(1));
  EXPECT_EQ(RepairPlans(master.port()), 2);
  agent.Stop();
  master.Stop();
}

}  // namespace
}  // namespace myriad::kvstore
