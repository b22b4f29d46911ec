// The replication log's frames and bookkeeping, and snapshots as log records: no servers.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "kv_scenario.h"
#include "kvstore_core/master.h"
#include "kvstore/repl_log.h"

namespace myriad::kvstore {
namespace {

using testing::Chain;
using testing::Req;

std::string Frames(uint64_t first_seq, int n, uint64_t term = 7) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    AppendFrame(LogBatch{.term = term, .seq = first_seq + i, .records = std::string(10 + i, 'a' + i)},
                &out);
  }
  return out;
}

TEST(ReplicationFrames, RoundTrip) {
  auto b = DecodeFrames(Frames(5, 3), 5);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->size(), 3u);
  EXPECT_EQ((*b)[2].seq, 7u);
  EXPECT_EQ((*b)[2].term, 7u);
  EXPECT_EQ((*b)[2].records, std::string(12, 'c'));
  EXPECT_TRUE(DecodeFrames("", 1).ok());  // an empty long-poll answer
}

TEST(ReplicationFrames, CorruptOrTruncatedBatchesAreRejectedWithAClearError) {
  const std::string good = Frames(1, 3);
  // A flipped byte in the second batch's records: its checksum fails.
  std::string flipped = good;
  flipped[kFrameHeaderBytes + 10 + kFrameHeaderBytes + 3] ^= 0x20;
  auto f = DecodeFrames(flipped, 1);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(f.status().message().find("batch 2 fails its checksum"), std::string::npos)
      << f.status();
  // A flipped byte in a header (the seq) fails the checksum too.
  std::string header = good;
  header[12] ^= 1;
  EXPECT_FALSE(DecodeFrames(header, 0).ok());
  // Truncated anywhere: inside a header or inside the records.
  for (size_t cut = 1; cut < good.size(); ++cut) {
    const bool boundary = cut == kFrameHeaderBytes + 10 || cut == 2 * kFrameHeaderBytes + 21;
    auto t = DecodeFrames(good.substr(0, cut), 1);
    EXPECT_EQ(t.ok(), boundary) << "cut at " << cut;
    if (!t.ok()) {
      EXPECT_NE(t.status().message().find("truncated"), std::string::npos) << t.status();
    }
  }
  // Bad magic, and a gap in the numbering.
  std::string magic = good;
  magic[0] = 'X';
  auto m = DecodeFrames(magic, 1);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("bad magic"), std::string::npos);
  auto gap = DecodeFrames(Frames(1, 1) + Frames(3, 1), 1);
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.status().message().find("batch 3 where batch 2 was expected"), std::string::npos)
      << gap.status();
  auto wrong_start = DecodeFrames(Frames(4, 1), 5);
  EXPECT_FALSE(wrong_start.ok());
}

TEST(ReplicationLogTest, ReadsMatchTermsAndTrimmedLogsNeedASnapshot) {
  ReplicationLog log(ReplicationLogOptions{.max_bytes = 10 * (kFrameHeaderBytes + 8)});
  for (int i = 0; i < 5; ++i) log.Append(3, std::string(8, 'x'));
  EXPECT_EQ(log.next_seq(), 6u);
  std::string out;
  EXPECT_EQ(log.Read(1, 0, 1 << 20, 0, nullptr, &out), ReplicationLog::ReadResult::kOk);
  EXPECT_EQ(DecodeFrames(out, 1)->size(), 5u);
  out.clear();
  EXPECT_EQ(log.Read(4, 3, 1 << 20, 0, nullptr, &out), ReplicationLog::ReadResult::kOk);
  EXPECT_EQ(DecodeFrames(out, 4)->size(), 2u);
  // The standby's batch 3 came from another term: its log diverged.
  EXPECT_EQ(log.Read(4, 2, 1 << 20, 0, nullptr, &out), ReplicationLog::ReadResult::kNeedSnapshot);
  // Ahead of this log.
  EXPECT_EQ(log.Read(8, 3, 1 << 20, 0, nullptr, &out), ReplicationLog::ReadResult::kNeedSnapshot);
  // Up to date: an empty answer after the wait.
  out.clear();
  EXPECT_EQ(log.Read(6, 3, 1 << 20, kMillisecond, nullptr, &out), ReplicationLog::ReadResult::kOk);
  EXPECT_TRUE(out.empty());
  // Trimming: 20 more batches, only the last 10 kept.
  for (int i = 0; i < 20; ++i) log.Append(4, std::string(8, 'y'));
  EXPECT_EQ(log.first_seq(), 16u);
  EXPECT_EQ(log.Read(2, 3, 1 << 20, 0, nullptr, &out), ReplicationLog::ReadResult::kNeedSnapshot);
  out.clear();
  EXPECT_EQ(log.Read(16, 4, 1 << 20, 0, nullptr, &out), ReplicationLog::ReadResult::kOk);
  EXPECT_EQ(DecodeFrames(out, 16)->size(), 10u);
}

TEST(ReplicationLogTest, AcksCountStandbysThatAppliedTheBatch) {
  ReplicationLog log;
  const uint64_t seq = log.Append(1, "r");
  EXPECT_TRUE(log.WaitAcks(seq, 0, 0));
  EXPECT_FALSE(log.WaitAcks(seq, 1, 0));  // nobody has it
  const std::string a = "http://a", b = "http://b";
  std::string out;
  // A pull from `seq` says the standby has everything before it, not `seq` itself.
  log.Read(seq, 0, 1 << 20, 0, &a, &out);
  EXPECT_FALSE(log.WaitAcks(seq, 1, 0));
  std::thread later([&] {
    std::string o;
    log.Read(seq + 1, 1, 1 << 20, 0, &b, &o);
  });
  const auto far = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch()).count() + 5 * kSecond;
  EXPECT_TRUE(log.WaitAcks(seq, 1, far));
  later.join();
  EXPECT_FALSE(log.WaitAcks(seq, 2, 0));
  EXPECT_EQ(log.standbys().at(b), seq + 1);
}

TEST(KvSnapshot, SnapshotLogRebuildsTheLeaderExactly) {
  KvMasterOptions o;
  o.repair_bytes_per_second = 5000;
  KvMaster leader(o);
  for (NodeId id = 1; id <= 6; ++id) {
    ASSERT_TRUE(leader.AddNode(id, "rack-" + std::to_string(id % 3), 20'000, id * kMillisecond).ok());
  }
  const NamespaceId a = leader.CreateNamespace("a").value();
  const NamespaceId b = leader.CreateNamespace("b").value();
  const NamespaceId c = leader.CreateNamespace("c").value();
  for (uint64_t i = 0; i < 300; ++i) {
    const auto keys = Chain(i, 1 + i % 5);
    const NamespaceId ns = i % 4 == 0 ? b : (i % 9 == 0 ? c : a);
    if (!leader.PutStart(ns, Req(keys, 100 + i, 1 + i % 3, i % 13 == 0), 0).ok()) continue;
    if (i % 7 != 0) {  // some left pending
      ASSERT_TRUE(leader.PutEnd(ns, keys.back()).ok());
    }
  }
  // A node dies; some repairs finish, some are left in flight.
  for (NodeId id = 1; id <= 6; ++id) {
    if (id != 3) {
      ASSERT_TRUE(leader.Heartbeat(id, 11 * kSecond).ok());
    }
  }
  ASSERT_EQ(leader.Tick(11 * kSecond).nodes_declared_dead, 1);
  int in_flight = 0;
  for (const RepairTask& task : leader.PlanRepairs(12 * kSecond, 1000)) {
    if (task.bytes % 3 == 0) {
      ASSERT_TRUE(leader.RepairDone(task).ok());
    } else {
      ++in_flight;
    }
  }
  ASSERT_TRUE(leader.DropNamespace(b).ok());  // dropped, its bytes still held
  ASSERT_TRUE(leader.DropNamespace(c).ok());
  for (NodeId id = 1; id <= 6; ++id) leader.Heartbeat(id, 30 * kSecond).IgnoreError();
  leader.Tick(30 * kSecond);  // c's and b's leases have passed: both reclaimed...
  const NamespaceId d = leader.CreateNamespace("d").value();
  ASSERT_TRUE(leader.PutStart(d, Req(Chain(9999, 3), 64, 2), 30 * kSecond).ok());
  ASSERT_TRUE(leader.DropNamespace(d).ok());  // ...and d dropped with a pending put in it
  (void)a;

  KvMaster standby(o);
  const std::string snapshot = leader.SnapshotLog();
  ASSERT_TRUE(standby.Apply(snapshot).ok());
  EXPECT_GT(in_flight, 0);
  EXPECT_EQ(standby.CanonicalDump(), leader.CanonicalDump());
  EXPECT_EQ(standby.CanonicalHash(), leader.CanonicalHash());
  // The log goes on from the snapshot: later records apply on top of it.
  leader.TakeLog();
  ASSERT_TRUE(leader.PutStart(a, Req(Chain(77777, 2), 10, 1), 31 * kSecond).ok());
  ASSERT_TRUE(leader.PutEnd(a, Chain(77777, 2).back()).ok());
  ASSERT_TRUE(standby.Apply(leader.TakeLog()).ok());
  EXPECT_EQ(standby.CanonicalHash(), leader.CanonicalHash());
  // A truncated snapshot is an error, never a crash.
  KvMaster broken(o);
  EXPECT_FALSE(broken.Apply(snapshot.substr(0, snapshot.size() / 2)).ok() &&
               broken.CanonicalHash() == leader.CanonicalHash());
}

}  // namespace
}  // namespace myriad::kvstore
