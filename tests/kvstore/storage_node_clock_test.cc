// The storage node's control loop runs on its clock: stepped in virtual time, it heartbeats
// once per heartbeat_interval and sweeps once per reconcile_interval, with no sleeping in the
// test; a put that finds no room still wakes it at once.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/clock.h"
#include "kvstore/master_server.h"
#include "kvstore/storage_node.h"

namespace myriad::kvstore {
namespace {

struct NodeOnManualClock {
  NodeOnManualClock() {
    MasterServerOptions mo;
    mo.http.address = "127.0.0.1";
    mo.http.port = 0;
    master = std::make_unique<MasterServer>(mo);
    EXPECT_TRUE(master->Start().ok());
    StorageNodeOptions no;
    no.master_url = "http://127.0.0.1:" + std::to_string(master->port());
    no.id = 1;
    no.fault_domain = "rack-a";
    no.capacity_bytes = 1 << 20;
    no.segment_bytes = 1 << 20;
    no.data.address = "127.0.0.1";
    no.data.port = 0;
    no.heartbeat_interval = kSecond;
    no.reconcile_interval = 5 * kSecond;
    no.clock = clock;
    node = std::make_unique<StorageNode>(no);
    EXPECT_TRUE(node->Start().ok());
  }
  ~NodeOnManualClock() {
    node->Stop();
    master->Stop();
  }
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::unique_ptr<MasterServer> master;
  std::unique_ptr<StorageNode> node;
};

TEST(StorageNodeClockTest, HeartbeatsAndSweepsFollowTheNodesClock) {
  NodeOnManualClock n;
  // Registered, swept once (what was placed here before is gone), then asleep.
  ASSERT_TRUE(n.clock->AwaitSleepers(1));
  ASSERT_TRUE(n.node->registered());
  EXPECT_EQ(n.node->stats().heartbeats, 0u);
  EXPECT_EQ(n.node->stats().reconcile_sweeps, 1u);
  n.clock->Advance(kSecond - 1);
  ASSERT_TRUE(n.clock->AwaitSleepers(1));
  EXPECT_EQ(n.node->stats().heartbeats, 0u);
  for (uint64_t beat = 1; beat <= 5; ++beat) {
    n.clock->Advance(beat == 1 ? 1 : kSecond);
    ASSERT_TRUE(n.clock->AwaitSleepers(1));
    EXPECT_EQ(n.node->stats().heartbeats, beat);
  }
  // Five seconds after the first sweep: the second.
  EXPECT_EQ(n.node->stats().reconcile_sweeps, 2u);
  EXPECT_EQ(n.node->stats().master_errors, 0u);
}

TEST(StorageNodeClockTest, ARequestedSweepRunsWithoutWaitingForTheInterval) {
  NodeOnManualClock n;
  ASSERT_TRUE(n.clock->AwaitSleepers(1));
  EXPECT_EQ(n.node->stats().reconcile_sweeps, 1u);
  // Forced sweeps are spaced 200 ms apart: within that gap the request waits for it.
  n.clock->Advance(200 * kMillisecond);
  ASSERT_TRUE(n.clock->AwaitSleepers(1));
  n.node->RequestReconcile();
  ASSERT_TRUE(n.clock->AwaitSleepers(1));
  EXPECT_EQ(n.node->stats().reconcile_sweeps, 2u);
}

}  // namespace
}  // namespace myriad::kvstore
