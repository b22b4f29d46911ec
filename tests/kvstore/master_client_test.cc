// The typed client against a real master over loopback: what an engine's connector would do.
#include "kvstore/master_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <vector>

#include "kvstore/master_server.h"

namespace myriad::kvstore {
namespace {

class MasterClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MasterServerOptions options;
    options.clock = clock_;
    server_ = std::make_unique<MasterServer>(std::move(options));
    ASSERT_TRUE(server_->Start().ok());
    auto c = MasterClient::Connect("http://127.0.0.1:" + std::to_string(server_->port()));
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }
  void TearDown() override { server_->Stop(); }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(kSecond);
  std::unique_ptr<MasterServer> server_;
  std::unique_ptr<MasterClient> client_;
};

TEST_F(MasterClientTest, PutGetExistsRemoveAcrossFaultDomains) {
  for (NodeId n = 1; n <= 3; ++n) {
    ASSERT_TRUE(client_->RegisterNode(n, "rack-" + std::to_string(n), uint64_t{1} << 30, "10.0.0.1:7800").ok());
  }
  ASSERT_TRUE(client_->CreateNamespace("dsv3/fp8").ok());
  const std::vector<BlockKey> run = {0x11, 0x22, 0x33};
  auto placed = client_->PutStart("dsv3/fp8", run, 4096, 3);
  ASSERT_TRUE(placed.ok()) << placed.status();
  ASSERT_EQ(placed->size(), 3u);
  EXPECT_NE((*placed)[0].fault_domain, (*placed)[1].fault_domain);
  EXPECT_EQ((*placed)[0].address, "10.0.0.1:7800");
  // Pending: not readable until the put ends.
  auto before = client_->Exists("dsv3/fp8", std::vector<BlockKey>{0x22});
  ASSERT_TRUE(before.ok());
  EXPECT_FALSE((*before)[0]);
  ASSERT_TRUE(client_->PutEnd("dsv3/fp8", 0x33).ok());

  const std::vector<BlockKey> asked = {0x22, 0x99};
  auto got = client_->Get("dsv3/fp8", asked);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_TRUE((*got)[0].found);
  EXPECT_EQ((*got)[0].object, 0x33u);
  EXPECT_EQ((*got)[0].block, 1u);
  EXPECT_EQ((*got)[0].blocks, 3u);
  EXPECT_EQ((*got)[0].replicas.size(), 3u);
  EXPECT_GT((*got)[0].lease_until, clock_->Now());
  EXPECT_FALSE((*got)[1].found);

  // Leased by the read: removal refused, then allowed once the lease is over.
  auto refused = client_->Remove("dsv3/fp8", std::vector<BlockKey>{0x33});
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ((*refused)[0].code(), absl::StatusCode::kFailedPrecondition) << (*refused)[0];
  // 11 s: past the lease. The nodes keep beating meanwhile, as live ones do: the housekeeping
  // tick each step wakes must not declare them dead (dead_after: 10 s).
  clock_->Advance(6 * kSecond);
  for (NodeId n = 1; n <= 3; ++n) ASSERT_TRUE(client_->Heartbeat(n).ok());
  clock_->Advance(5 * kSecond);
  ASSERT_TRUE(clock_->AwaitSleepers(1));
  auto removed = client_->Remove("dsv3/fp8", std::vector<BlockKey>{0x33});
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE((*removed)[0].ok()) << (*removed)[0];
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)["namespaces"], 1);
  EXPECT_TRUE(client_->DropNamespace("dsv3/fp8").ok());
}

TEST_F(MasterClientTest, ErrorsComeBackAsStatusesWithTheMastersMessage) {
  ASSERT_TRUE(client_->RegisterNode(1, "rack-a", 1 << 20).ok());
  ASSERT_TRUE(client_->CreateNamespace("m").ok());
  auto unknown = client_->Get("nope", std::vector<BlockKey>{1});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  auto too_many = client_->PutStart("m", std::vector<BlockKey>{1}, 100, 2);  // one fault domain
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(too_many.status().message().find("fault domain"), std::string::npos) << too_many.status();
  EXPECT_EQ(client_->CreateNamespace("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->PutEnd("m", 12345).code(), absl::StatusCode::kNotFound);
}

TEST_F(MasterClientTest, ALostNodesReplicasAreRepairedOnAnotherFaultDomain) {
  for (NodeId n = 1; n <= 3; ++n) {
    ASSERT_TRUE(client_->RegisterNode(n, "rack-" + std::to_string(n), uint64_t{1} << 30).ok());
  }
  ASSERT_TRUE(client_->CreateNamespace("m").ok());
  auto placed = client_->PutStart("m", std::vector<BlockKey>{7}, 1 << 20, 2);
  ASSERT_TRUE(placed.ok()) << placed.status();
  ASSERT_TRUE(client_->PutEnd("m", 7).ok());
  const NodeId lost = (*placed)[0].node;
  // Every node but `lost` keeps beating; 11 s later the master declares it dead.
  for (int s = 1; s <= 11; ++s) {
    clock_->Advance(kSecond);
    for (NodeId n = 1; n <= 3; ++n) {
      if (n != lost) {
        ASSERT_TRUE(client_->Heartbeat(n).ok());
      }
    }
  }
  ASSERT_TRUE(clock_->AwaitSleepers(1));  // the housekeeping tick the last step woke has run
  auto tasks = client_->PlanRepairs();
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 1u);
  const RepairTask& t = (*tasks)[0];
  EXPECT_EQ(t.object, 7u);
  EXPECT_NE(t.destination, lost);
  EXPECT_NE(t.destination, (*placed)[1].node);  // a fault domain the object does not use yet
  EXPECT_EQ(t.source, (*placed)[1].node);
  ASSERT_TRUE(client_->RepairDone(t).ok());
  auto got = client_->Get("m", std::vector<BlockKey>{7});
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE((*got)[0].found);
  EXPECT_EQ((*got)[0].replicas.size(), 2u);
  EXPECT_EQ(client_->RepairDone(t).code(), absl::StatusCode::kFailedPrecondition);  // reported twice
}

TEST(MasterClient, AnUnreachableMasterIsUnavailableNotAHang) {
  auto c = MasterClient::Connect("http://127.0.0.1:1", 2 * kSecond);
  ASSERT_TRUE(c.ok());
  const absl::Status st = (*c)->Heartbeat(1);
  EXPECT_TRUE(st.code() == absl::StatusCode::kUnavailable || st.code() == absl::StatusCode::kDeadlineExceeded) << st;
}

}  // namespace
}  // namespace myriad::kvstore
