#include "kvstore_core/master.h"

#include <gtest/gtest.h>

#include "kvstore_core/routing.h"
#include "kv_scenario.h"

namespace myriad::kvstore::testing {
namespace {

using absl::StatusCode;

class KvMasterTest : public KvScenario {};

TEST_F(KvMasterTest, ReplicasLandOnDistinctFaultDomains) {
  GivenNodes(/*domains=*/3, /*per_domain=*/3, /*capacity=*/1 << 30);
  for (uint64_t i = 0; i < 200; ++i) {
    const ReplicaList r = Put(Chain(i, 4), 4096, 3, 0);
    ASSERT_EQ(r.count, 3);
    EXPECT_EQ(Domains(r).size(), 3u) << "put " << i;
  }
}

TEST_F(KvMasterTest, MoreReplicasThanFaultDomainsIsAnErrorNamingTheDomains) {
  GivenNodes(2, 4, 1 << 30);
  absl::StatusOr<ReplicaList> r = master_.PutStart(ns_, Req(Chain(1, 2), 100, 3), 0);
  ASSERT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  const std::string msg(r.status().message());
  EXPECT_NE(msg.find("3 replica(s)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rack-0, rack-1"), std::string::npos) << msg;
  EXPECT_EQ(master_.stats().objects, 0u);
}

TEST_F(KvMasterTest, FullNodesAreNotPlacedOn) {
  GivenNodes(2, 1, 1000);
  Put(Chain(1, 1), 900, 2, 0);
  absl::StatusOr<ReplicaList> r = master_.PutStart(ns_, Req(Chain(2, 1), 200, 1), 0);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(master_.PutStart(ns_, Req(Chain(3, 1), 100, 2), 0).ok());
}

TEST_F(KvMasterTest, TwoPhasePutIsInvisibleUntilPutEnd) {
  GivenNodes(3, 1, 1 << 20);
  const auto keys = Chain(7, 4);
  absl::StatusOr<ReplicaList> placed = master_.PutStart(ns_, Req(keys, 1000, 2), 0);
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(master_.Get(ns_, keys.back(), 0).code, StatusCode::kUnavailable);
  EXPECT_FALSE(master_.Exists(ns_, keys.back()));
  for (int i = 0; i < placed->count; ++i) {
    EXPECT_EQ(Used(placed->nodes[i]), 1000u);
  }

  ASSERT_TRUE(master_.PutEnd(ns_, keys.back()).ok());
  const GetResult g = master_.Get(ns_, keys.back(), 0);
  ASSERT_EQ(g.code, StatusCode::kOk);
  EXPECT_EQ(g.replicas.count, 2);
  EXPECT_EQ(g.replicas.nodes, placed->nodes);
  EXPECT_TRUE(master_.Exists(ns_, keys[0]));
  EXPECT_EQ(master_.PutEnd(ns_, keys.back()).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(master_.PutRevoke(ns_, keys.back()).code(), StatusCode::kFailedPrecondition);
}

TEST_F(KvMasterTest, PutRevokeFreesTheReservedBytes) {
  GivenNodes(2, 1, 1 << 20);
  const auto keys = Chain(3, 2);
  ASSERT_TRUE(master_.PutStart(ns_, Req(keys, 5000, 2), 0).ok());
  EXPECT_EQ(master_.nodes().total_used(), 10000u);
  ASSERT_TRUE(master_.PutRevoke(ns_, keys.back()).ok());
  EXPECT_EQ(master_.nodes().total_used(), 0u);
  EXPECT_EQ(master_.Get(ns_, keys[0], 0).code, StatusCode::kNotFound);
  // The keys are free again.
  EXPECT_TRUE(master_.PutStart(ns_, Req(keys, 5000, 2), 0).ok());
}

TEST_F(KvMasterTest, ARunIsFoundByAnyOfItsBlocks) {
  GivenNodes(1, 1, 1 << 20);
  const auto chain = Chain(11, 12);
  const std::vector<BlockKey> first(chain.begin(), chain.begin() + 8);
  const std::vector<BlockKey> rest(chain.begin() + 8, chain.end());
  Put(first, 800, 1, 0);
  Put(rest, 400, 1, 0);
  const GetResult g = master_.Get(ns_, chain[3], 0);
  ASSERT_EQ(g.code, StatusCode::kOk);
  EXPECT_EQ(g.object, chain[7]);
  EXPECT_EQ(g.block, 3u);
  EXPECT_EQ(g.blocks, 8u);
  EXPECT_EQ(g.size, 800u);
  const GetResult h = master_.Get(ns_, chain[9], 0);
  EXPECT_EQ(h.object, chain[11]);
  EXPECT_EQ(h.block, 1u);
  EXPECT_EQ(master_.stats().objects, 2u);
  EXPECT_EQ(master_.stats().blocks, 12u);
  // A diverging request shares blocks 0..4 only, and still finds them.
  EXPECT_TRUE(master_.Exists(ns_, chain[4]));
}

TEST_F(KvMasterTest, OverlappingAndDuplicatePutsAreRejected) {
  GivenNodes(1, 1, 1 << 20);
  const auto chain = Chain(5, 6);
  Put(chain, 600, 1, 0);
  absl::Status dup = master_.PutStart(ns_, Req(chain, 600), 0).status();
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists);
  const std::vector<BlockKey> overlap = {chain[4], chain[5] ^ 1};
  absl::Status st = master_.PutStart(ns_, Req(overlap, 100), 0).status();
  ASSERT_EQ(st.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(std::string(st.message()).find("put only the missing blocks"), std::string::npos);
  const std::vector<BlockKey> twice = {42, 43, 42};
  EXPECT_EQ(master_.PutStart(ns_, Req(twice, 100), 0).status().code(),
            StatusCode::kInvalidArgument);
  // Objects are named by their last key.
  EXPECT_EQ(master_.Remove(ns_, chain[2], 0).code(), StatusCode::kInvalidArgument);
}

TEST_F(KvMasterTest, BadInputsReturnErrorsNeverCrash) {
  GivenNodes(2, 1, 1 << 20);
  const auto keys = Chain(9, 3);
  EXPECT_EQ(master_.PutStart(ns_, Req(keys, 0), 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(master_.PutStart(ns_, PutRequest{}, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(master_.PutStart(ns_, Req(keys, 10, 0), 0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(master_.PutStart(ns_, Req(keys, 10, 5), 0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(master_.PutStart(99, Req(keys, 10), 0).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(master_.PutEnd(ns_, 12345).code(), StatusCode::kNotFound);
  EXPECT_EQ(master_.PutRevoke(ns_, 12345).code(), StatusCode::kNotFound);
  EXPECT_EQ(master_.Remove(ns_, 12345, 0).code(), StatusCode::kNotFound);
  EXPECT_EQ(master_.Pin(ns_, 12345, true).code(), StatusCode::kNotFound);
  EXPECT_EQ(master_.Get(ns_, 12345, 0).code, StatusCode::kNotFound);
  EXPECT_EQ(master_.Get(77, 12345, 0).code, StatusCode::kNotFound);
  EXPECT_FALSE(master_.Exists(77, 12345));
  EXPECT_EQ(master_.Heartbeat(777, 0).code(), StatusCode::kNotFound);
  EXPECT_EQ(master_.RemoveNode(777).code(), StatusCode::kNotFound);
  EXPECT_EQ(master_.AddNode(1, "rack-9", 100, 0).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(master_.AddNode(50, "rack-9", 0, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(master_.AddNode(51, "", 10, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(master_.AddNode(kNoNode, "rack-9", 10, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(master_.CreateNamespace("llama3-70b/fp8").status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(master_.CreateNamespace("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(master_.DropNamespace(1234).code(), StatusCode::kNotFound);
  EXPECT_EQ(master_.RepairDone(RepairTask{ns_, 12345, 1, 1, 2}).code(), StatusCode::kNotFound);
  std::vector<GetResult> out;
  EXPECT_EQ(master_.BatchGet(77, keys, 0, &out).code(), StatusCode::kNotFound);
  EXPECT_EQ(master_.stats().objects, 0u);
  EXPECT_EQ(master_.nodes().total_used(), 0u);
}

// Sizes from the network are bounded, so no sum the master keeps can wrap: before the bounds a
// node of capacity 2^64-1 wrapped the cluster's capacity and a put of 2^64-1 bytes was placed.
TEST_F(KvMasterTest, SizesAboveTheirBoundsAreRefused) {
  GivenNodes(2, 1, 1 << 20);
  const auto keys = Chain(9, 3);
  EXPECT_EQ(master_.PutStart(ns_, Req(keys, UINT64_MAX), 0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(master_.PutStart(ns_, Req(keys, kMaxObjectBytes + 1), 0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(master_.AddNode(60, "rack-9", UINT64_MAX, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(master_.AddNode(61, "rack-9", kMaxNodeCapacityBytes + 1, 0).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(master_.stats().objects, 0u);
  EXPECT_EQ(master_.nodes().total_capacity(), 2u << 20);
}

// A PutEnd resent after a failover (the new leader had applied the first) reported "already
// complete" as a failure; with the writer's size it is the success it was.
TEST_F(KvMasterTest, PutEndSentAgainWithItsSizeSucceeds) {
  GivenNodes(2, 1, 1 << 20);
  const auto keys = Chain(21, 2);
  ASSERT_TRUE(master_.PutStart(ns_, Req(keys, 100), 0).ok());
  ASSERT_TRUE(master_.PutEnd(ns_, keys.back(), 100).ok());
  EXPECT_TRUE(master_.PutEnd(ns_, keys.back(), 100).ok());
  EXPECT_EQ(master_.PutEnd(ns_, keys.back(), 99).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(master_.PutEnd(ns_, keys.back()).code(), StatusCode::kFailedPrecondition);
}

TEST_F(KvMasterTest, PlacementAvoidsTheNodesAskedTo) {
  GivenNodes(3, 2, 1 << 20);
  const std::vector<NodeId> all = {master_.nodes().nodes()[0].id, master_.nodes().nodes()[1].id,
                                   master_.nodes().nodes()[2].id};
  for (int i = 0; i < 20; ++i) {
    const auto run = Chain(500 + i, 1);
    PutRequest q = Req(run, 10, 2);
    q.avoid = all;
    absl::StatusOr<ReplicaList> placed = master_.PutStart(ns_, q, 0);
    ASSERT_TRUE(placed.ok()) << placed.status();
    for (int r = 0; r < placed->count; ++r) {
      EXPECT_EQ(std::find(all.begin(), all.end(), placed->nodes[r]), all.end());
    }
  }
}

TEST(NodeRegistryTest, TheClusterCapacitySumNeverWraps) {
  NodeRegistry nodes;
  // 2^14 nodes of the largest capacity would make 2^64: the last one is refused.
  const NodeId last = (NodeId{1} << 14) - 1;
  for (NodeId id = 0; id < last; ++id) {
    ASSERT_TRUE(nodes.Add(id, "rack", kMaxNodeCapacityBytes, 0).ok()) << id;
  }
  const absl::Status st = nodes.Add(last, "rack", kMaxNodeCapacityBytes, 0);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st;
  EXPECT_EQ(nodes.total_capacity(), UINT64_MAX - kMaxNodeCapacityBytes + 1);
  EXPECT_EQ(nodes.nodes().size(), last);
}

TEST_F(KvMasterTest, BatchFormsAnswerPerItemInOrder) {
  GivenNodes(2, 2, 1 << 20);
  const auto a = Chain(1, 2), b = Chain(2, 2), c = Chain(3, 2);
  const std::vector<PutRequest> puts = {Req(a, 100, 2), Req(b, 0, 2), Req(c, 100, 2)};
  std::vector<absl::StatusOr<ReplicaList>> started;
  ASSERT_TRUE(master_.BatchPutStart(ns_, puts, 0, &started).ok());
  ASSERT_EQ(started.size(), 3u);
  EXPECT_TRUE(started[0].ok());
  EXPECT_EQ(started[1].status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(started[2].ok());
  std::vector<absl::Status> ended;
  const std::vector<BlockKey> objects = {a.back(), b.back(), c.back()};
  ASSERT_TRUE(master_.BatchPutEnd(ns_, objects, &ended).ok());
  EXPECT_TRUE(ended[0].ok());
  EXPECT_EQ(ended[1].code(), StatusCode::kNotFound);
  std::vector<BlockKey> query = {a[0], b[0], c[1], 999};
  std::vector<GetResult> got;
  ASSERT_TRUE(master_.BatchGet(ns_, query, 0, &got).ok());
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].code, StatusCode::kOk);
  EXPECT_EQ(got[1].code, StatusCode::kNotFound);
  EXPECT_EQ(got[2].code, StatusCode::kOk);
  EXPECT_EQ(got[3].code, StatusCode::kNotFound);
  std::vector<uint8_t> exists;
  ASSERT_TRUE(master_.BatchExists(ns_, query, &exists).ok());
  EXPECT_EQ(exists, (std::vector<uint8_t>{1, 0, 1, 0}));
  std::vector<absl::Status> removed;
  // a and c were just leased by the BatchGet.
  ASSERT_TRUE(master_.BatchRemove(ns_, objects, 20 * kSecond, &removed).ok());
  EXPECT_TRUE(removed[0].ok());
  EXPECT_EQ(removed[1].code(), StatusCode::kNotFound);
  EXPECT_TRUE(removed[2].ok());
  EXPECT_EQ(master_.stats().objects, 0u);
}

TEST_F(KvMasterTest, ALeaseBlocksRemovalUntilItExpires) {
  GivenNodes(1, 1, 1 << 20);
  const auto keys = Chain(4, 2);
  Put(keys, 100, 1, 0);
  ASSERT_EQ(master_.Get(ns_, keys[0], 1 * kSecond).lease_until, 11 * kSecond);
  absl::Status st = master_.Remove(ns_, keys.back(), 5 * kSecond);
  ASSERT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(st.message()).find("leased"), std::string::npos);
  EXPECT_TRUE(master_.Remove(ns_, keys.back(), 11 * kSecond).ok());
}

TEST_F(KvMasterTest, PendingPutsCannotBeRemovedOnlyRevoked) {
  GivenNodes(1, 1, 1 << 20);
  const auto keys = Chain(4, 1);
  ASSERT_TRUE(master_.PutStart(ns_, Req(keys, 100), 0).ok());
  EXPECT_EQ(master_.Remove(ns_, keys.back(), 0).code(), StatusCode::kFailedPrecondition);
}

TEST_F(KvMasterTest, AbandonedPutsExpire) {
  GivenNodes(1, 1, 1 << 20);
  const auto keys = Chain(4, 3);
  ASSERT_TRUE(master_.PutStart(ns_, Req(keys, 100), 0).ok());
  HeartbeatAll(30 * kSecond);
  EXPECT_EQ(master_.Tick(30 * kSecond).puts_expired, 0u);
  HeartbeatAll(61 * kSecond);
  EXPECT_EQ(master_.Tick(61 * kSecond).puts_expired, 1u);
  EXPECT_EQ(master_.stats().objects, 0u);
  EXPECT_EQ(master_.nodes().total_used(), 0u);
  EXPECT_EQ(master_.PutEnd(ns_, keys.back()).code(), StatusCode::kNotFound);
}

TEST_F(KvMasterTest, NamespacesIsolateAndDropAtOnce) {
  GivenNodes(1, 1, 1 << 20);
  const NamespaceId other = master_.CreateNamespace("qwen3/bf16").value();
  const auto keys = Chain(8, 4);
  Put(keys, 1000, 1, 0);
  EXPECT_FALSE(master_.Exists(other, keys[0]));
  EXPECT_EQ(master_.Get(other, keys.back(), 0).code, StatusCode::kNotFound);
  // The same chain may be stored in both, independently.
  ASSERT_TRUE(master_.PutStart(other, Req(keys, 500), 0).ok());
  ASSERT_TRUE(master_.PutEnd(other, keys.back()).ok());
  EXPECT_EQ(master_.Get(other, keys[1], 0).size, 500u);
  EXPECT_EQ(master_.Get(ns_, keys[1], 0).size, 1000u);  // leased until 10 s
  EXPECT_EQ(master_.nodes().total_used(), 1500u);

  ASSERT_TRUE(master_.DropNamespace(ns_).ok());
  EXPECT_FALSE(master_.Exists(ns_, keys[0]));
  EXPECT_EQ(master_.PutEnd(ns_, keys.back()).code(), StatusCode::kNotFound);
  EXPECT_TRUE(master_.Exists(other, keys[0]));
  // Bytes come back once the reader's lease has passed, not before.
  HeartbeatAll(5 * kSecond);
  EXPECT_EQ(master_.Tick(5 * kSecond).namespaces_reclaimed, 0u);
  EXPECT_EQ(master_.nodes().total_used(), 1500u);
  HeartbeatAll(10 * kSecond);
  EXPECT_EQ(master_.Tick(10 * kSecond).namespaces_reclaimed, 1u);
  EXPECT_EQ(master_.nodes().total_used(), 500u);
  EXPECT_EQ(master_.stats().objects, 1u);
  // The name can be reused; the new namespace starts empty.
  const NamespaceId again = master_.CreateNamespace("llama3-70b/fp8").value();
  EXPECT_NE(again, ns_);
  EXPECT_FALSE(master_.Exists(again, keys[0]));
  EXPECT_EQ(master_.FindNamespace("llama3-70b/fp8").value(), again);
}

TEST(KvRouting, JumpHashIsStableAndMovesFewKeys) {
  const auto keys = Chain(1, 10000);
  int moved = 0;
  for (BlockKey k : keys) {
    const uint32_t a = MasterForKey(k, 4), b = MasterForKey(k, 5);
    ASSERT_LT(a, 4u);
    ASSERT_LT(b, 5u);
    if (a != b) {
      ++moved;
      EXPECT_EQ(b, 4u);  // a key only ever moves to the new master
    }
  }
  EXPECT_GT(moved, 1500);
  EXPECT_LT(moved, 2500);
  const auto split = SplitByMaster(keys, 4);
  size_t total = 0;
  for (uint32_t m = 0; m < 4; ++m) {
    total += split[m].size();
    for (uint32_t i : split[m]) {
      EXPECT_EQ(MasterForKey(keys[i], 4), m);
    }
  }
  EXPECT_EQ(total, keys.size());
  EXPECT_EQ(MasterForKey(keys[0], 1), 0u);
}

}  // namespace
}  // namespace myriad::kvstore::testing
