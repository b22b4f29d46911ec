// Scenarios of the master's housekeeping: eviction between the watermarks, node death and
// repair under the byte-rate cap, the ramp of a new node, and log replay on a standby.
#include <gtest/gtest.h>

#include "kv_scenario.h"
#include "kvstore_core/master.h"

namespace myriad::kvstore::testing {
namespace {

using absl::StatusCode;

// One node of 1,000 bytes filled with ten 95-byte objects: 950 bytes, above the 0.90 mark.
class EvictionTest : public KvScenario {
 protected:
  void SetUp() override {
    GivenNodes(1, 1, 1000);
    for (uint64_t i = 0; i < 10; ++i) {
      keys_.push_back(Chain(100 + i, 2));
      Put(keys_.back(), 95, 1, 0);
    }
  }
  std::vector<std::vector<BlockKey>> keys_;
};

TEST_F(EvictionTest, EvictsFromTheHighDownToTheLowWatermark) {
  ASSERT_EQ(master_.nodes().total_used(), 950u);
  HeartbeatAll(kSecond);
  const TickReport t = master_.Tick(kSecond);
  // 950 -> below 800 takes two 95-byte objects (760), not more.
  EXPECT_EQ(t.objects_evicted, 2u);
  EXPECT_EQ(master_.nodes().total_used(), 760u);
  EXPECT_EQ(master_.stats().objects_evicted, 2u);
  HeartbeatAll(2 * kSecond);
  EXPECT_EQ(master_.Tick(2 * kSecond).objects_evicted, 0u);  // between the watermarks: nothing
}

TEST_F(EvictionTest, NeverEvictsLeasedOrPinnedObjects) {
  // Lease seven objects and pin two: only the tenth can go, and it does.
  for (int i = 0; i < 7; ++i) {
    ASSERT_EQ(master_.Get(ns_, keys_[i][0], kSecond).code, StatusCode::kOk);
  }
  ASSERT_TRUE(master_.Pin(ns_, keys_[7].back(), true).ok());
  ASSERT_TRUE(master_.Pin(ns_, keys_[8].back(), true).ok());
  HeartbeatAll(2 * kSecond);
  EXPECT_EQ(master_.Tick(2 * kSecond).objects_evicted, 1u);
  EXPECT_FALSE(master_.Exists(ns_, keys_[9][0]));
  for (int i = 0; i < 9; ++i) {
    EXPECT_TRUE(master_.Exists(ns_, keys_[i][0])) << i;
  }
  // Once the leases pass and the node fills up again, the leased ones are fair game; the
  // pinned ones never are.
  Put(Chain(900, 1), 95, 1, 20 * kSecond);
  HeartbeatAll(20 * kSecond);
  EXPECT_GT(master_.Tick(20 * kSecond).objects_evicted, 0u);
  EXPECT_LT(master_.nodes().total_used(), 800u);
  EXPECT_TRUE(master_.Exists(ns_, keys_[7][0]));
  EXPECT_TRUE(master_.Exists(ns_, keys_[8][0]));
}

TEST_F(EvictionTest, RecentlyReadObjectsSurviveAClockRound) {
  HeartbeatAll(20 * kSecond);
  master_.Tick(20 * kSecond);  // clears the bits PutEnd set, evicts two
  // Read three objects after their leases would have passed; they get the referenced bit.
  std::vector<int> alive;
  for (int i = 0; i < 10; ++i) {
    if (master_.Exists(ns_, keys_[i][0])) alive.push_back(i);
  }
  ASSERT_EQ(alive.size(), 8u);
  for (int j = 0; j < 3; ++j) master_.Get(ns_, keys_[alive[j]][0], 20 * kSecond);
  // Fill back above the high watermark, then evict well after every lease.
  Put(Chain(900, 1), 190, 1, 20 * kSecond);
  HeartbeatAll(40 * kSecond);
  ASSERT_GT(master_.Tick(40 * kSecond).objects_evicted, 0u);
  for (int j = 0; j < 3; ++j) {
    EXPECT_TRUE(master_.Exists(ns_, keys_[alive[j]][0])) << j;
  }
}

class NodeLossTest : public KvScenario {
 protected:
  static KvMasterOptions Options() {
    KvMasterOptions o;
    o.repair_bytes_per_second = 1000;
    o.repair_burst_bytes = 1000;
    return o;
  }
  NodeLossTest() : KvScenario(Options()) {}
};

TEST_F(NodeLossTest, SilentNodeIsDeclaredDeadAfterTheTimeout) {
  GivenNodes(3, 1, 1 << 20);
  HeartbeatAll(5 * kSecond, /*except=*/2);
  EXPECT_EQ(master_.Tick(10 * kSecond).nodes_declared_dead, 0);
  HeartbeatAll(10 * kSecond + 1, 2);
  const TickReport t = master_.Tick(10 * kSecond + 1);
  EXPECT_EQ(t.nodes_declared_dead, 1);
  EXPECT_EQ(master_.nodes().Find(2), nullptr);
  EXPECT_EQ(master_.Heartbeat(2, 11 * kSecond).code(), StatusCode::kNotFound);
  // It may come back, empty, as a new node.
  EXPECT_TRUE(master_.AddNode(2, "rack-1", 1 << 20, 12 * kSecond).ok());
}

TEST_F(NodeLossTest, LostReplicasAreRepairedOnADistinctDomainAtTheCappedRate) {
  GivenNodes(4, 1, 1 << 20);  // nodes 1..4 in rack-0..rack-3
  std::vector<std::vector<BlockKey>> objects;
  for (uint64_t i = 0; i < 200; ++i) {
    objects.push_back(Chain(i, 3));
    Put(objects.back(), 100, 2, 0);
  }
  int on_node_1 = 0;
  for (const auto& k : objects) {
    const GetResult g = master_.Get(ns_, k.back(), 0);
    for (int r = 0; r < g.replicas.count; ++r) on_node_1 += g.replicas.nodes[r] == 1;
  }
  ASSERT_GT(on_node_1, 60);
  HeartbeatAll(11 * kSecond, /*except=*/1);
  ASSERT_EQ(master_.Tick(11 * kSecond).nodes_declared_dead, 1);
  EXPECT_EQ(master_.stats().objects, 200u);  // every object kept one replica
  EXPECT_EQ(master_.stats().repair_queue, static_cast<uint64_t>(on_node_1));

  // Plan every 100 ms for 3 s: at most burst + rate x elapsed (+ one object of overshoot).
  uint64_t bytes = 0;
  std::vector<RepairTask> done;
  for (Nanos t = 11 * kSecond; t <= 14 * kSecond; t += 100 * kMillisecond) {
    for (const RepairTask& task : master_.PlanRepairs(t, 1000)) {
      bytes += task.bytes;
      EXPECT_NE(task.source, task.destination);
      EXPECT_NE(master_.nodes().DomainOf(task.source), master_.nodes().DomainOf(task.destination));
      // The new replica is not readable before RepairDone.
      const GetResult g = master_.Get(ns_, task.object, t);
      EXPECT_EQ(g.replicas.count, 1);
      done.push_back(task);
    }
    const double allowed = 1000 + 1000 * NanosToSeconds(t - 11 * kSecond) + 100;
    EXPECT_LE(static_cast<double>(bytes), allowed) << "at " << FormatDuration(t);
  }
  EXPECT_GE(bytes, 3500u);  // and the budget is used, not sat on
  for (const RepairTask& task : done) {
    ASSERT_TRUE(master_.RepairDone(task).ok());
  }
  // Let the rest through.
  for (Nanos t = 15 * kSecond; t <= 60 * kSecond; t += kSecond) {
    for (const RepairTask& task : master_.PlanRepairs(t, 1000)) {
      ASSERT_TRUE(master_.RepairDone(task).ok());
    }
  }
  for (const auto& k : objects) {
    const GetResult g = master_.Get(ns_, k[0], 60 * kSecond);
    ASSERT_EQ(g.replicas.count, 2);
    EXPECT_EQ(Domains(g.replicas).size(), 2u);
  }
  EXPECT_EQ(master_.stats().repairs_in_flight, 0u);
}

TEST_F(NodeLossTest, ObjectsWithNoReplicaLeftAreRemovedAndCounted) {
  GivenNodes(2, 1, 1 << 20);
  for (uint64_t i = 0; i < 20; ++i) Put(Chain(i, 1), 10, 1, 0);
  const uint64_t on_1 = master_.nodes().Find(1)->used / 10;
  ASSERT_GT(on_1, 0u);
  ASSERT_TRUE(master_.RemoveNode(1).ok());
  EXPECT_EQ(master_.stats().objects_lost, on_1);
  EXPECT_EQ(master_.stats().objects, 20 - on_1);
  EXPECT_EQ(master_.nodes().total_used(), (20 - on_1) * 10);
}

TEST_F(NodeLossTest, FailedRepairIsRetriedAndADeadWriterTargetRevokesThePut) {
  GivenNodes(3, 1, 1 << 20);
  const auto a = Chain(1, 2);
  const ReplicaList r = Put(a, 100, 2, 0);
  ASSERT_TRUE(master_.RemoveNode(r.nodes[0]).ok());
  std::vector<RepairTask> tasks = master_.PlanRepairs(kSecond, 10);
  ASSERT_EQ(tasks.size(), 1u);
  ASSERT_TRUE(master_.RepairFailed(tasks[0]).ok());
  EXPECT_EQ(master_.RepairDone(tasks[0]).code(), StatusCode::kFailedPrecondition);
  tasks = master_.PlanRepairs(2 * kSecond, 10);
  ASSERT_EQ(tasks.size(), 1u);
  ASSERT_TRUE(master_.RepairDone(tasks[0]).ok());
  EXPECT_EQ(master_.Get(ns_, a[0], 2 * kSecond).replicas.count, 2);

  const auto b = Chain(2, 1);
  absl::StatusOr<ReplicaList> pending = master_.PutStart(ns_, Req(b, 50, 1), 3 * kSecond);
  ASSERT_TRUE(pending.ok());
  ASSERT_TRUE(master_.RemoveNode(pending->nodes[0]).ok());
  EXPECT_EQ(master_.PutEnd(ns_, b.back()).code(), StatusCode::kNotFound);
}

TEST(KvRamp, ANewNodeRampsUpInsteadOfTakingEveryWrite) {
  KvMasterOptions o;
  o.ramp = 100 * kSecond;
  KvMaster m(o);
  const NamespaceId ns = m.CreateNamespace("m").value();
  for (NodeId id = 1; id <= 4; ++id) {
    ASSERT_TRUE(m.AddNode(id, "rack-a", 1 << 30, 0).ok());
  }
  // Half-fill the old nodes, then a fresh empty node joins at 200 s.
  for (uint64_t i = 0; i < 16000; ++i) {
    ASSERT_TRUE(m.PutStart(ns, Req(Chain(i, 1), 1 << 17), 200 * kSecond).ok());
  }
  ASSERT_TRUE(m.AddNode(5, "rack-a", 1 << 30, 200 * kSecond).ok());
  auto share_of_new = [&](uint64_t seed, Nanos now) {
    int n = 0;
    for (uint64_t i = 0; i < 1000; ++i) {
      absl::StatusOr<ReplicaList> r = m.PutStart(ns, Req(Chain(seed + i, 1), 1024), now);
      n += r.ok() && r->nodes[0] == 5;
    }
    return n / 1000.0;
  };
  // Free bytes alone would give it 1/3 of the writes; just after joining it gets ~1/40.
  const double early = share_of_new(100'000, 201 * kSecond);
  const double mid = share_of_new(200'000, 250 * kSecond);
  const double late = share_of_new(300'000, 400 * kSecond);
  EXPECT_LT(early, 0.06);
  EXPECT_GT(mid, early);
  EXPECT_GT(late, 0.25);
}

// Every mutation the leader makes, replayed on a fresh standby, gives identical metadata.
TEST(KvReplication, StandbyReplayingTheLogEqualsTheLeader) {
  KvMasterOptions o;
  o.repair_bytes_per_second = 5000;
  KvMaster leader(o), standby(o);
  std::string log;
  auto ship = [&] { log += leader.TakeLog(); };
  for (NodeId id = 1; id <= 6; ++id) {
    ASSERT_TRUE(leader.AddNode(id, "rack-" + std::to_string(id % 3), 20'000, 0).ok());
  }
  const NamespaceId a = leader.CreateNamespace("a").value();
  const NamespaceId b = leader.CreateNamespace("b").value();
  std::vector<std::vector<BlockKey>> objs;
  for (uint64_t i = 0; i < 300; ++i) {
    objs.push_back(Chain(i, 1 + i % 5));
    const NamespaceId ns = i % 4 == 0 ? b : a;
    absl::StatusOr<ReplicaList> r = leader.PutStart(ns, Req(objs.back(), 100 + i, 1 + i % 3), 0);
    if (!r.ok()) continue;
    if (i % 7 == 0) continue;  // left pending, to expire
    if (i % 11 == 0) {
      ASSERT_TRUE(leader.PutRevoke(ns, objs.back().back()).ok());
      continue;
    }
    ASSERT_TRUE(leader.PutEnd(ns, objs.back().back()).ok());
    if (i % 13 == 0) {
      ASSERT_TRUE(leader.Pin(ns, objs.back().back(), true).ok());
    }
    if (i % 17 == 0) {
      ASSERT_TRUE(leader.Remove(ns, objs.back().back(), 0).ok());
    }
  }
  ship();
  ASSERT_TRUE(standby.Apply(log).ok());  // a first chunk, applied mid-stream
  log.clear();
  // Node 3 dies, repairs run, the cluster crosses its high watermark, b is dropped.
  for (NodeId id = 1; id <= 6; ++id) {
    if (id != 3) {
      ASSERT_TRUE(leader.Heartbeat(id, 11 * kSecond).ok());
    }
  }
  const TickReport t = leader.Tick(11 * kSecond);
  EXPECT_EQ(t.nodes_declared_dead, 1);
  for (const RepairTask& task : leader.PlanRepairs(12 * kSecond, 1000)) {
    if (task.bytes % 2 == 0) {
      ASSERT_TRUE(leader.RepairDone(task).ok());
    } else {
      ASSERT_TRUE(leader.RepairFailed(task).ok());
    }
  }
  for (uint64_t i = 1000; i < 3000; ++i) {
    absl::StatusOr<ReplicaList> r = leader.PutStart(a, Req(Chain(i, 2), 150, 2), 12 * kSecond);
    if (r.ok()) {
      ASSERT_TRUE(leader.PutEnd(a, Chain(i, 2).back()).ok());
    }
  }
  for (NodeId id = 1; id <= 6; ++id) leader.Heartbeat(id, 13 * kSecond).IgnoreError();
  EXPECT_GT(leader.Tick(13 * kSecond).objects_evicted, 0u);
  for (NodeId id = 1; id <= 6; ++id) leader.Heartbeat(id, 65 * kSecond).IgnoreError();
  EXPECT_GT(leader.Tick(65 * kSecond).puts_expired, 0u);
  ASSERT_TRUE(leader.DropNamespace(b).ok());
  for (NodeId id = 1; id <= 6; ++id) leader.Heartbeat(id, 70 * kSecond).IgnoreError();
  EXPECT_EQ(leader.Tick(70 * kSecond).namespaces_reclaimed, 1u);
  ship();
  ASSERT_TRUE(standby.Apply(log).ok());
  EXPECT_GT(leader.stats().objects_lost + leader.stats().objects_evicted, 0u);
  EXPECT_EQ(standby.CanonicalDump(), leader.CanonicalDump());
  EXPECT_EQ(standby.CanonicalHash(), leader.CanonicalHash());
  EXPECT_EQ(standby.stats().objects, leader.stats().objects);

  // After promotion every object is leased for one lease period: nothing is removed from
  // under a reader that was served by the old leader.
  standby.Promote(80 * kSecond);
  const NamespaceId sa = standby.FindNamespace("a").value();
  BlockKey some = 0;
  for (const auto& k : objs) {
    if (standby.Exists(sa, k[0])) some = k.back();
  }
  ASSERT_NE(some, 0u);
  EXPECT_EQ(standby.Remove(sa, some, 85 * kSecond).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(standby.Remove(sa, some, 91 * kSecond).ok());
}

TEST(KvReplication, CorruptLogIsAnErrorNotACrash) {
  KvMaster leader, standby;
  ASSERT_TRUE(leader.AddNode(1, "r", 1000, 0).ok());
  const NamespaceId ns = leader.CreateNamespace("n").value();
  const auto keys = Chain(1, 3);
  ASSERT_TRUE(leader.PutStart(ns, Req(keys, 10), 0).ok());
  const std::string log = leader.TakeLog();
  for (size_t cut = 1; cut < log.size(); ++cut) {
    KvMaster s;
    EXPECT_FALSE(s.Apply(log.substr(0, cut)).ok() && s.CanonicalHash() == leader.CanonicalHash())
        << "cut at " << cut;
  }
  std::string bad = log;
  bad[0] = 99;
  absl::Status st = standby.Apply(bad);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("byte 0"), std::string::npos);
  // A record the state cannot take (a second PutStart of the same object) is refused.
  KvMaster twice;
  EXPECT_FALSE(twice.Apply(log + log).ok());
}

}  // namespace
}  // namespace myriad::kvstore::testing
