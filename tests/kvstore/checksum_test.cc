// End-to-end checksums: bytes replaced on a storage node are neither returned by a get nor
// spread by a repair, and logs written before checksums still replay.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../cli/run_myriad.h"
#include "kv_cluster.h"
#include "kv_scenario.h"
#include "kvstore/checksum.h"
#include "kvstore/data_client.h"
#include "kvstore_core/master.h"
#include "kvstore_core/op_log.h"
#include "kvstore/repair_agent.h"
#include "kvstore/store_client.h"

namespace myriad::kvstore {
namespace {

using testing::Bytes;
using testing::Chain;
using testing::KvCluster;
using testing::ReplicatedWithout;
using testing::Req;
using testing::WaitFor;

std::unique_ptr<StoreClient> Client(KvCluster& c) {
  auto client =
      StoreClient::Connect(c.url(), {.master_timeout = 2 * kSecond, .node_timeout = 2 * kSecond});
  EXPECT_TRUE(client.ok());
  return std::move(*client);
}

// Replaces a replica's bytes behind the master's back, as a faulty or hostile node would.
void Overwrite(const std::string& address, ObjectName name, const std::string& bytes) {
  DataClient node(address);
  ASSERT_TRUE(node.Put(name, bytes).ok());
}

std::string Held(const std::string& address, ObjectName name) {
  DataClient node(address);
  std::vector<std::string> values;
  std::vector<absl::StatusCode> codes;
  if (!node.Get(std::vector<ObjectName>{name}, &values, &codes).ok() ||
      codes[0] != absl::StatusCode::kOk) {
    return "(not held)";
  }
  return values[0];
}

TEST(KvChecksumTest, ACorruptedReplicaIsSkippedForTheOther) {
  KvCluster c;
  c.AddNode(1, "a");
  c.AddNode(2, "b");
  auto client = Client(c);
  ASSERT_TRUE(client->master().CreateNamespace("ns").ok());
  const std::vector<BlockKey> run = Chain(7, 2);
  const std::string value = Bytes(7, 50'000);
  ASSERT_TRUE(client->Put("ns", run, value, 2).ok());
  auto lookup = client->master().Get("ns", std::vector<BlockKey>{run.back()});
  ASSERT_TRUE(lookup.ok());
  const Lookup& l = (*lookup)[0];
  EXPECT_EQ(l.checksum, ObjectChecksum(value));
  ASSERT_EQ(l.replicas.size(), 2u);
  // Same size, other bytes, on the replica a reader tries first.
  Overwrite(l.replicas[0].address, {l.namespace_id, l.object}, Bytes(8, value.size()));
  auto got = client->Get("ns", run[0]);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(*got == value) << "the corrupted replica's bytes were returned";
  EXPECT_EQ(client->stats().checksum_mismatches, 1u);
  EXPECT_EQ(client->stats().fallbacks, 1u);
}

TEST(KvChecksumTest, EveryReplicaCorruptedIsDataLossNeverTheWrongBytes) {
  KvCluster c;
  c.AddNode(1, "a");
  c.AddNode(2, "b");
  auto client = Client(c);
  ASSERT_TRUE(client->master().CreateNamespace("ns").ok());
  const std::vector<BlockKey> run = Chain(9, 1);
  const std::string value = Bytes(9, 4096);
  ASSERT_TRUE(client->Put("ns", run, value, 2).ok());
  auto lookup = client->master().Get("ns", run);
  ASSERT_TRUE(lookup.ok());
  const Lookup& l = (*lookup)[0];
  for (const ReplicaInfo& r : l.replicas) {
    Overwrite(r.address, {l.namespace_id, l.object}, Bytes(10 + r.node, value.size()));
  }
  auto got = client->Get("ns", run[0]);
  ASSERT_FALSE(got.ok()) << "returned " << got->size() << " bytes that are not the object's";
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
  EXPECT_NE(got.status().message().find(fmt::format("object {:016x}", l.object)), std::string::npos)
      << got.status();
  EXPECT_NE(got.status().message().find("no replica's bytes match the object's checksum"),
            std::string::npos)
      << got.status();
}

// `kvstore get` of an object whose only replica was overwritten: exit 1 naming the mismatch,
// and no --out file written with the wrong bytes.
TEST(KvChecksumTest, CliGetOfACorruptedObjectExitsOneAndWritesNothing) {
  KvCluster c;
  c.AddNode(1, "a");
  const std::string in = myriad::testing::WriteTempFile("kv_corrupt_in.bin", Bytes(3, 3000));
  const std::string out = (myriad::testing::TestTempDir() / "kv_corrupt_out.bin").string();
  auto put = myriad::testing::RunMyriad(fmt::format(
      "kvstore put --master {} --namespace ns --keys 0x21 --file {} --create-namespace", c.url(),
      in));
  ASSERT_EQ(put.code, 0) << put.out;
  auto client = Client(c);
  const Lookup l = (*client->master().Get("ns", std::vector<BlockKey>{0x21}))[0];
  ASSERT_NE(l.checksum, 0u) << "kvstore put gave no checksum";
  Overwrite(c.node(1).address(), {l.namespace_id, l.object}, Bytes(4, 3000));
  auto get = myriad::testing::RunMyriad(
      fmt::format("kvstore get --master {} --namespace ns --keys 0x21 --out {}", c.url(), out));
  EXPECT_EQ(get.code, 1) << get.out;
  EXPECT_NE(get.out.find("no replica's bytes match the object's checksum"), std::string::npos)
      << get.out;
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(KvChecksumTest, CopyToFromACorruptedSourceIsRefusedAndPushesNothing) {
  KvCluster c;
  c.AddNode(1, "a");
  auto client = Client(c);
  ASSERT_TRUE(client->master().CreateNamespace("ns").ok());
  const std::vector<BlockKey> run = Chain(11, 1);
  const std::string value = Bytes(11, 9000);
  ASSERT_TRUE(client->Put("ns", run, value, 1).ok());
  const Lookup l = (*client->master().Get("ns", run))[0];
  const ObjectName name{l.namespace_id, l.object};
  Overwrite(c.node(1).address(), name, Bytes(12, value.size()));
  c.AddNode(2, "b");
  DataClient source(c.node(1).address());
  absl::Status st;
  // Node 1 learns node 2's address from the master on its next refresh.
  ASSERT_TRUE(WaitFor([&] {
    st = source.CopyTo(name, c.node(2).address(), l.checksum);
    return st.code() != absl::StatusCode::kPermissionDenied;
  }));
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find("do not match its checksum"), std::string::npos) << st;
  EXPECT_EQ(c.node(2).store().stats().objects, 0u);
  // The right bytes pass. (Node 2 may free the copy at its next reconciliation, the master
  // placing no replica there, so its bytes are checked in RepairDoesNotSpreadACorruptedReplica.)
  Overwrite(c.node(1).address(), name, value);
  st = source.CopyTo(name, c.node(2).address(), l.checksum);
  EXPECT_TRUE(st.ok()) << st;
}

// Objects with three replicas lose one node; a second holds corrupted bytes. The repair agent
// copies from the good one only: a copy from the corrupted node is refused and planned again
// from another source, so no repaired replica holds the wrong bytes.
TEST(KvChecksumTest, RepairDoesNotSpreadACorruptedReplica) {
  KvCluster c;
  for (NodeId n = 1; n <= 3; ++n) c.AddNode(n, "rack-" + std::to_string(n));
  auto client = Client(c);
  ASSERT_TRUE(client->master().CreateNamespace("ns").ok());
  std::vector<BlockKey> objects;
  std::vector<ObjectName> names;
  for (uint64_t i = 0; i < 8; ++i) {
    const std::vector<BlockKey> run = Chain(2000 + i, 1);
    ASSERT_TRUE(client->Put("ns", run, Bytes(i, 6000), 3).ok());
    objects.push_back(run.back());
  }
  auto placed = client->master().Get("ns", objects);
  ASSERT_TRUE(placed.ok());
  for (const Lookup& l : *placed) {
    ASSERT_EQ(l.replicas.size(), 3u);
    names.push_back({l.namespace_id, l.object});
    Overwrite(c.node(1).address(), names.back(), Bytes(99, 6000));
  }
  c.AddNode(4, "rack-4");
  c.node(2).Stop();
  RepairAgentOptions ao;
  ao.master_url = c.url();
  ao.workers = 1;
  ao.poll_interval = 20 * kMillisecond;
  RepairAgent agent(ao);
  ASSERT_TRUE(agent.Start().ok());
  auto repaired = [&] { return ReplicatedWithout(client->master(), "ns", objects, 3, 2); };
  ASSERT_TRUE(WaitFor(repaired, 10 * kSecond));
  agent.Stop();
  for (size_t i = 0; i < objects.size(); ++i) {
    EXPECT_TRUE(Held(c.node(4).address(), names[i]) == Bytes(i, 6000))
        << "object " << i << ": the repaired replica does not hold the object's bytes";
  }
}

class KvChecksumRepairPlanTest : public testing::KvScenario {};

// A copy refused by its source (its bytes do not match) is planned again from the other
// readable replica, not from the same source at random.
TEST_F(KvChecksumRepairPlanTest, AFailedCopyIsPlannedAgainFromAnotherSource) {
  GivenNodes(4, 1, 1 << 30);
  for (uint64_t i = 0; i < 12; ++i) Put(Chain(100 + i, 1), 1000, 3, 0);
  HeartbeatAll(20 * kSecond, /*except=*/1);
  ASSERT_EQ(master_.Tick(20 * kSecond).nodes_declared_dead, 1);
  const std::vector<RepairTask> first = master_.PlanRepairs(21 * kSecond, 1000);
  ASSERT_GE(first.size(), 3u);
  for (const RepairTask& t : first) ASSERT_TRUE(master_.RepairFailed(t).ok());
  const std::vector<RepairTask> again = master_.PlanRepairs(22 * kSecond, 1000);
  ASSERT_EQ(again.size(), first.size());
  for (size_t i = 0; i < first.size(); ++i) {
    ASSERT_EQ(again[i].object, first[i].object);
    EXPECT_NE(again[i].source, first[i].source) << "object " << i << " copied again from the source that failed";
  }
}

TEST(KvChecksumTest, ChecksumsSurviveLogAndSnapshotAndOldLogsStillReplay) {
  KvMaster leader(KvMasterOptions{});
  ASSERT_TRUE(leader.AddNode(1, "a", 1 << 20, 0).ok());
  const NamespaceId ns = leader.CreateNamespace("ns").value();
  const auto with = Chain(1, 2);
  PutRequest q = Req(with, 100);
  q.checksum = 0xfeedbeef;
  ASSERT_TRUE(leader.PutStart(ns, q, 0).ok());
  ASSERT_TRUE(leader.PutEnd(ns, with.back()).ok());
  const auto without = Chain(2, 1);
  ASSERT_TRUE(leader.PutStart(ns, Req(without, 50), 0).ok());
  const std::string log = leader.TakeLog();
  for (const std::string& records : {log, leader.SnapshotLog()}) {
    KvMaster standby(KvMasterOptions{});
    ASSERT_TRUE(standby.Apply(records).ok());
    EXPECT_EQ(standby.Get(ns, with[0], 0).checksum, 0xfeedbeefu);
    EXPECT_EQ(standby.CanonicalHash(), leader.CanonicalHash());
  }
  // A log from before checksums: kPutStart records, no checksum field.
  LogWriter w;
  w.Type(LogType::kAddNode);
  w.U64(1);
  w.Str("a");
  w.U64(1 << 20);
  w.I64(0);
  w.Type(LogType::kCreateNamespace);
  w.U64(0);
  w.Str("ns");
  w.Type(LogType::kPutStart);
  w.U64(0);
  w.U64(1);
  w.Key(42);
  w.U64(100);  // size
  w.U64(1);    // target
  w.U64(0);    // pinned
  w.I64(0);    // deadline
  w.U64(1);
  w.U64(1);    // on node 1
  w.Type(LogType::kPutEnd);
  w.U64(0);
  w.Key(42);
  KvMaster old(KvMasterOptions{});
  ASSERT_TRUE(old.Apply(w.Take()).ok());
  const GetResult g = old.Get(0, 42, 0);
  EXPECT_EQ(g.code, absl::StatusCode::kOk);
  EXPECT_EQ(g.checksum, 0u);
}

}  // namespace
}  // namespace myriad::kvstore
