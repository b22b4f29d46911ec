// The KV store master's high availability against a REAL etcd (Debian's etcd-server) started on
// loopback by the tests: election, log shipping, snapshots, failover with clients following the
// leader, and fencing of a leader that loses etcd. Without an etcd binary the tests are
// skipped, or fail when CI is set.
#include "kvstore/ha_server.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../cli/run_myriad.h"
#include "../test_util/etcd_process.h"
#include "../test_util/promtool.h"
#include "kv_scenario.h"
#include "kvstore/master_client.h"
#include "kvstore/storage_node.h"
#include "kvstore/store_client.h"
#include "net/http_client.h"

namespace myriad::kvstore {
namespace {

using test::EtcdProcess;
using test::WaitUntil;
using testing::Chain;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

HaOptions Options(const std::string& etcd, const std::string& key) {
  HaOptions o;
  o.master.http.address = "127.0.0.1";
  o.master.http.port = 0;
  o.etcd = etcd;
  o.election_key = key;
  o.lease_ttl_seconds = 1;
  o.fence_margin = 300 * kMillisecond;
  o.poll_interval = 50 * kMillisecond;
  o.sync_standbys = 1;
  o.sync_timeout = 2 * kSecond;
  o.pull_wait = 200 * kMillisecond;
  return o;
}

class HaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string bin = EtcdProcess::Binary();
    if (bin.empty()) return;
    etcd_ = new EtcdProcess(bin);
    if (absl::Status st = etcd_->Start(); !st.ok()) {
      ADD_FAILURE() << st;
      delete etcd_;
      etcd_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }
  void SetUp() override {
    if (etcd_ == nullptr) {
      if (std::getenv("CI") != nullptr) FAIL() << "etcd not found (install etcd-server)";
      GTEST_SKIP() << "etcd not found (install etcd-server; scripts/setup.sh does)";
    }
    key_ = fmt::format("/myriad/test/{}/leader",
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    for (auto& s : group_) s->Stop();
  }

  HaServer* Add(HaOptions o) {
    group_.push_back(std::make_unique<HaServer>(std::move(o)));
    EXPECT_TRUE(group_.back()->Start().ok());
    return group_.back().get();
  }
  void StartGroup(int n) {
    for (int i = 0; i < n; ++i) Add(Options(etcd_->endpoint(), key_));
  }
  // The one leader, once every live member agrees on it; nullptr on timeout.
  HaServer* WaitLeader(std::chrono::milliseconds limit = 5000ms) {
    HaServer* leader = nullptr;
    WaitUntil(
        [&] {
          leader = nullptr;
          int leaders = 0;
          for (auto& s : group_) {
            if (s->is_leader()) {
              leader = s.get();
              ++leaders;
            }
          }
          if (leaders != 1) return false;
          for (auto& s : group_) {
            if (s.get() != leader && !dead_.contains(s.get()) && s->status().leader != leader->url()) {
              return false;
            }
          }
          return true;
        },
        limit);
    return leader;
  }
  std::vector<std::string> Urls() const {
    std::vector<std::string> out;
    for (auto& s : group_) out.push_back(s->url());
    return out;
  }
  // Nodes and a namespace, through a client that follows the leader.
  static void Populate(MasterClient& c) {
    for (NodeId n = 1; n <= 3; ++n) {
      ASSERT_TRUE(c.RegisterNode(n, fmt::format("rack-{}", n), uint64_t{1} << 40,
                                 fmt::format("10.0.0.{}:7600", n))
                      .ok());
    }
    ASSERT_TRUE(c.CreateNamespace("ns").ok());
  }
  // Every live member applied the same log and holds the same metadata.
  bool Mirrored() {
    uint64_t seq = 0, hash = 0;
    bool first = true;
    for (auto& s : group_) {
      if (dead_.contains(s.get())) continue;
      const uint64_t q = s->status().next_seq, h = s->CanonicalHash();
      if (!first && (q != seq || h != hash)) return false;
      seq = q;
      hash = h;
      first = false;
    }
    return true;
  }

  static EtcdProcess* etcd_;
  std::string key_;
  std::vector<std::unique_ptr<HaServer>> group_;
  std::set<HaServer*> dead_;
};

EtcdProcess* HaTest::etcd_ = nullptr;

TEST_F(HaTest, ElectionPicksOneLeaderAndStandbysNameIt) {
  StartGroup(3);
  HaServer* leader = WaitLeader();
  ASSERT_NE(leader, nullptr);
  for (auto& s : group_) {
    if (s.get() == leader) continue;
    EXPECT_EQ(s->status().role, HaRole::kStandby);
    auto http = net::HttpClient::FromUrl(s->url());
    ASSERT_TRUE(http.ok());
    for (auto [method, target] : {std::pair{"POST", "/v1/namespaces"}, {"GET", "/v1/stats"}}) {
      auto r = (*http)->Request(method, target, R"({"name":"x"})", "application/json");
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->status, 421) << target;
      const std::string* named = net::FindHeader(r->headers, "X-Myriad-Leader");
      ASSERT_NE(named, nullptr);
      EXPECT_EQ(*named, leader->url());
      EXPECT_NE(r->body.find("not_leader"), std::string::npos);
    }
  }
  auto lh = net::HttpClient::FromUrl(leader->url());
  ASSERT_TRUE(lh.ok());
  auto metrics = (*lh)->Get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("myriad_kvstore_ha_leader 1"), std::string::npos);
  EXPECT_NE(metrics->body.find("myriad_kvstore_objects"), std::string::npos);
  // The leader's exposition (the master's and the HA families together) passes promtool.
  const std::vector<std::string> complaints = myriad::testing::PromtoolComplaints(metrics->body);
  EXPECT_TRUE(complaints.empty()) << ::testing::PrintToString(complaints) << "\n" << metrics->body;
  // Still one leader a few lease periods later (keepalives hold it).
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(WaitLeader(), leader);
}

TEST_F(HaTest, StandbysMirrorTheLeaderAfterABurstOfWrites) {
  StartGroup(3);
  HaServer* leader = WaitLeader();
  ASSERT_NE(leader, nullptr);
  // Start the client at a standby: it must find the leader by itself.
  std::vector<std::string> urls = Urls();
  std::rotate(urls.begin(), std::find(urls.begin(), urls.end(), leader->url()) + 1, urls.end());
  auto c = MasterClient::ConnectAny(urls);
  ASSERT_TRUE(c.ok());
  Populate(**c);
  EXPECT_EQ((*c)->current_url(), leader->url());
  for (uint64_t i = 0; i < 400; ++i) {
    const auto keys = Chain(i, 1 + i % 4);
    ASSERT_TRUE((*c)->PutStart("ns", keys, 1000, 1 + i % 3).ok());
    if (i % 5 != 0) {
      ASSERT_TRUE((*c)->PutEnd("ns", keys.back()).ok());
    } else if (i % 2 == 0) {
      ASSERT_TRUE((*c)->PutRevoke("ns", keys.back()).ok());
    }
  }
  ASSERT_TRUE(WaitUntil([&] { return Mirrored(); }, 5000ms));
  EXPECT_GT(leader->status().next_seq, 400u);

  // A client that knows only etcd finds the group, leader first.
  auto via = MasterClient::ConnectViaEtcd(etcd_->endpoint(), key_);
  ASSERT_TRUE(via.ok()) << via.status();
  EXPECT_EQ((*via)->current_url(), leader->url());
  EXPECT_TRUE((*via)->Stats().ok());
  EXPECT_EQ(MasterClient::ConnectViaEtcd(etcd_->endpoint(), "/nothing/here").status().code(),
            absl::StatusCode::kNotFound);

  // The CLI given only standbys finds the leader through their 421s.
  std::string standbys;
  for (auto& s : group_) {
    if (s.get() != leader) standbys += (standbys.empty() ? "" : ",") + s->url();
  }
  auto put = myriad::testing::RunMyriad("kvstore put --master " + standbys +
                                        " --namespace ns --keys 0x77,0x78 --size 64");
  ASSERT_EQ(put.code, 0) << put.out;
  auto stat = myriad::testing::RunMyriad("kvstore stat --master " + standbys);
  ASSERT_EQ(stat.code, 0) << stat.out;
  EXPECT_NE(stat.out.find("\"objects\""), std::string::npos) << stat.out;
}

// A group with the cluster's token: the standbys' log pulls and a new leader's catch-up carry
// it (a write is acknowledged only once a standby pulled it), a client without it gets 401,
// and the log is not served to anyone without it.
TEST_F(HaTest, GroupWithATokenReplicatesAndRefusesOthers) {
  for (int i = 0; i < 3; ++i) {
    HaOptions o = Options(etcd_->endpoint(), key_);
    o.master.auth_token = "group-secret";
    Add(std::move(o));
  }
  HaServer* leader = WaitLeader();
  ASSERT_NE(leader, nullptr);
  MasterClientOptions with;
  with.auth_token = "group-secret";
  auto admin = MasterClient::ConnectAny(Urls(), with);
  ASSERT_TRUE(admin.ok());
  Populate(**admin);
  const BlockKey key = HashContentBlock(kRootBlockKey, 4242);
  ASSERT_TRUE((*admin)->PutStart("ns", std::span(&key, 1), 100, 1).ok());
  ASSERT_TRUE((*admin)->PutEnd("ns", key).ok());
  auto stranger = MasterClient::ConnectAny(Urls());
  ASSERT_TRUE(stranger.ok());
  EXPECT_EQ((*stranger)->Exists("ns", std::span(&key, 1)).status().code(),
            absl::StatusCode::kUnauthenticated);
  auto http = net::HttpClient::FromUrl(leader->url());
  ASSERT_TRUE(http.ok());
  EXPECT_EQ((*http)->Get("/v1/log?from=1&term=0")->status, 401);
  EXPECT_EQ((*http)->Get("/v1/snapshot")->status, 401);
  EXPECT_EQ((*http)->Get("/health")->status, 200);

  leader->Kill();
  dead_.insert(leader);
  HaServer* next = WaitLeader(8000ms);
  ASSERT_NE(next, nullptr);
  auto exists = (*admin)->Exists("ns", std::span(&key, 1));
  ASSERT_TRUE(exists.ok()) << exists.status();
  EXPECT_TRUE((*exists)[0]);
}

TEST_F(HaTest, KilledLeaderIsReplacedAndNoAcknowledgedWriteIsLost) {
  StartGroup(3);
  HaServer* leader = WaitLeader();
  ASSERT_NE(leader, nullptr);
  auto admin = MasterClient::ConnectAny(Urls());
  ASSERT_TRUE(admin.ok());
  Populate(**admin);

  std::mutex mu;
  std::vector<BlockKey> acked;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> after_kill{0};
  std::atomic<bool> killed{false};
  std::thread writer([&] {
    auto c = MasterClient::ConnectAny(Urls());
    ASSERT_TRUE(c.ok());
    for (uint64_t i = 1; !stop.load(); ++i) {
      const BlockKey key = HashContentBlock(kRootBlockKey, 1'000'000 + i);
      absl::Status st = (*c)->PutStart("ns", std::span(&key, 1), 100, 1).status();
      if (st.ok()) st = (*c)->PutEnd("ns", key);
      if (!st.ok()) continue;
      std::lock_guard lock(mu);
      acked.push_back(key);
      if (killed.load()) after_kill++;
    }
  });
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard lock(mu);
    return acked.size() >= 300;
  }));
  const auto kill_at = Clock::now();
  leader->Kill();  // no resignation: the others wait for its lease to expire
  dead_.insert(leader);
  killed = true;
  HaServer* next = WaitLeader(8000ms);
  const auto takeover = Clock::now() - kill_at;
  ASSERT_NE(next, nullptr);
  EXPECT_NE(next, leader);
  // TTL 1 s: etcd expires the lease within about a second (it checks every 500 ms), a standby
  // notices within a poll.
  EXPECT_LT(takeover, 4s);
  // The writer carries on against the new leader without being told.
  ASSERT_TRUE(WaitUntil([&] { return after_kill.load() >= 100; }, 8000ms));
  stop = true;
  writer.join();
  std::vector<BlockKey> keys;
  {
    std::lock_guard lock(mu);
    keys = acked;
  }
  auto found = (*admin)->Exists("ns", keys);
  ASSERT_TRUE(found.ok()) << found.status();
  size_t lost = 0;
  for (bool f : *found) lost += f ? 0 : 1;
  EXPECT_EQ(lost, 0u) << "of " << keys.size() << " acknowledged";
  // The storage nodes' addresses came along: readers can still reach the bytes.
  auto got = (*admin)->Get("ns", std::span(keys.data(), 1));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE((*got)[0].found);
  ASSERT_FALSE((*got)[0].replicas.empty());
  EXPECT_EQ((*got)[0].replicas[0].address, fmt::format("10.0.0.{}:7600", (*got)[0].replicas[0].node));
  EXPECT_EQ((*admin)->current_url(), next->url());
  ASSERT_TRUE(WaitUntil([&] { return Mirrored(); }, 5000ms));
}

// Storage nodes and store clients given the group's URLs follow the leader: after a failover
// the nodes' heartbeats reach the new leader (which would otherwise declare them dead after
// dead_after) and the bytes written before it stay readable, and writable on both nodes.
TEST_F(HaTest, StorageNodesAndStoreClientsFollowTheLeader) {
  for (int i = 0; i < 3; ++i) {
    HaOptions o = Options(etcd_->endpoint(), key_);
    o.master.master.dead_after = 2 * kSecond;
    Add(std::move(o));
  }
  HaServer* leader = WaitLeader();
  ASSERT_NE(leader, nullptr);
  std::string urls;
  for (const std::string& u : Urls()) urls += (urls.empty() ? "" : ",") + u;
  auto admin = MasterClient::Connect(urls);
  ASSERT_TRUE(admin.ok()) << admin.status();
  ASSERT_TRUE((*admin)->CreateNamespace("ns").ok());
  std::vector<std::unique_ptr<StorageNode>> nodes;
  for (NodeId id = 1; id <= 2; ++id) {
    StorageNodeOptions o;
    o.master_url = urls;
    o.id = id;
    o.fault_domain = fmt::format("rack-{}", id);
    o.capacity_bytes = 16 << 20;
    o.segment_bytes = 16 << 20;
    o.heartbeat_interval = 100 * kMillisecond;
    o.data.threads = 1;
    nodes.push_back(std::make_unique<StorageNode>(std::move(o)));
    ASSERT_TRUE(nodes.back()->Start().ok());
  }
  ASSERT_TRUE(WaitUntil([&] { return nodes[0]->registered() && nodes[1]->registered(); }));
  auto store = StoreClient::Connect(urls);
  ASSERT_TRUE(store.ok()) << store.status();
  const BlockKey key = HashContentBlock(kRootBlockKey, 7), later = HashContentBlock(kRootBlockKey, 8);
  const std::string bytes(100'000, 'k');
  ASSERT_TRUE((*store)->Put("ns", std::span(&key, 1), bytes, 2).ok());
  leader->Kill();
  dead_.insert(leader);
  ASSERT_NE(WaitLeader(8000ms), nullptr);
  // Past dead_after: nodes still beating only at the dead leader would be dead to the new one.
  std::this_thread::sleep_for(3s);
  auto got = (*store)->Get("ns", key);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, bytes);
  EXPECT_TRUE((*store)->Put("ns", std::span(&later, 1), bytes, 2).ok()) << "two live nodes in two domains";
  for (auto& n : nodes) n->Stop();
}

// More writers than the leader has io threads: each write waits for a standby's ack, and the
// acks come with the standbys' log pulls, which need an io thread too. Writes waiting off the
// io threads keep every writer moving (waiting on them, 16 writers stalled the group: a few
// puts per second, most failing after the 2 s ack timeout).
TEST_F(HaTest, ManyConcurrentWritersAllProgress) {
  StartGroup(2);
  ASSERT_NE(WaitLeader(), nullptr);
  auto admin = MasterClient::ConnectAny(Urls());
  ASSERT_TRUE(admin.ok());
  Populate(**admin);
  constexpr int kWriters = 16;
  std::atomic<uint64_t> acked{0}, failed{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      auto c = MasterClient::ConnectAny(Urls());
      ASSERT_TRUE(c.ok());
      for (uint64_t i = 0; i < 40; ++i) {
        const BlockKey key = HashContentBlock(kRootBlockKey, 5'000'000 + static_cast<uint64_t>(w) * 1000 + i);
        absl::Status st = (*c)->PutStart("ns", std::span(&key, 1), 100, 1).status();
        if (st.ok()) st = (*c)->PutEnd("ns", key);
        (st.ok() ? acked : failed)++;
      }
    });
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(failed.load(), 0u);
  EXPECT_EQ(acked.load(), uint64_t{kWriters} * 40);
}

TEST_F(HaTest, ResignedLeaderIsReplacedAsSoonAsItsKeyIsDeleted) {
  // A 3 s lease: standbys renew every second, so a takeover well under that comes from their
  // etcd watch on the leader key, not from their periodic look at it.
  for (int i = 0; i < 3; ++i) {
    HaOptions o = Options(etcd_->endpoint(), key_);
    o.lease_ttl_seconds = 3;
    o.poll_interval = 1 * kSecond;
    Add(o);
  }
  HaServer* leader = WaitLeader();
  ASSERT_NE(leader, nullptr);
  std::this_thread::sleep_for(300ms);  // the standbys' watches are up
  const auto resign_at = Clock::now();
  leader->Stop();  // revokes its lease: the key goes at once
  dead_.insert(leader);
  HaServer* next = WaitLeader(5000ms);
  ASSERT_NE(next, nullptr);
  EXPECT_NE(next, leader);
  const auto took = Clock::now() - resign_at;
  RecordProperty("takeover_ms", static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  EXPECT_LT(took, 800ms);
}

TEST_F(HaTest, StandbyTooFarBehindInstallsASnapshot) {
  HaOptions o = Options(etcd_->endpoint(), key_);
  o.sync_standbys = 0;
  o.log.max_bytes = 4096;  // the leader keeps only the last few batches
  HaServer* leader = Add(o);
  ASSERT_EQ(WaitLeader(), leader);
  auto c = MasterClient::ConnectAny({leader->url()});
  ASSERT_TRUE(c.ok());
  Populate(**c);
  for (uint64_t i = 0; i < 300; ++i) {
    const auto keys = Chain(i, 2);
    ASSERT_TRUE((*c)->PutStart("ns", keys, 1000, 2).ok());
    ASSERT_TRUE((*c)->PutEnd("ns", keys.back()).ok());
  }
  ASSERT_GT(leader->status().next_seq, 500u);
  HaServer* late = Add(o);
  ASSERT_TRUE(WaitUntil([&] { return Mirrored(); }, 5000ms));
  EXPECT_GE(late->status().snapshots, 1u);
  // And it follows the log from there.
  for (uint64_t i = 300; i < 320; ++i) {
    const auto keys = Chain(i, 2);
    ASSERT_TRUE((*c)->PutStart("ns", keys, 1000, 2).ok());
    ASSERT_TRUE((*c)->PutEnd("ns", keys.back()).ok());
  }
  ASSERT_TRUE(WaitUntil([&] { return Mirrored(); }, 5000ms));
  EXPECT_EQ(late->status().snapshots, 1u);
  // Promoted, it serves what the snapshot brought, node addresses included.
  const std::string old_url = leader->url();
  leader->Stop();
  dead_.insert(leader);
  ASSERT_EQ(WaitLeader(), late);
  auto c2 = MasterClient::ConnectAny({old_url, late->url()});
  ASSERT_TRUE(c2.ok());
  const auto keys = Chain(7, 2);
  auto got = (*c2)->Get("ns", keys);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE((*got)[1].found);
  ASSERT_EQ((*got)[1].replicas.size(), 2u);
  EXPECT_EQ((*got)[1].replicas[0].address, fmt::format("10.0.0.{}:7600", (*got)[1].replicas[0].node));
}

TEST_F(HaTest, MasterThatRestartsEmptyAndWinsTakesTheGroupsStateFirst) {
  HaOptions o = Options(etcd_->endpoint(), key_);
  o.log.max_bytes = 4096;  // batches trimmed: catching up takes a snapshot
  HaServer* leader = Add(o);
  ASSERT_EQ(WaitLeader(), leader);
  HaOptions mirror_options = o;
  mirror_options.campaign = false;  // so that the empty master is the one that wins
  HaServer* mirror = Add(mirror_options);
  auto c = MasterClient::ConnectAny({leader->url()});
  ASSERT_TRUE(c.ok());
  Populate(**c);
  std::vector<BlockKey> acked;
  for (uint64_t i = 0; i < 200; ++i) {
    const auto keys = Chain(i, 2);
    ASSERT_TRUE((*c)->PutStart("ns", keys, 1000, 1).ok());
    ASSERT_TRUE((*c)->PutEnd("ns", keys.back()).ok());
    acked.push_back(keys.back());
  }
  const uint64_t hash = leader->CanonicalHash();
  leader->Kill();
  dead_.insert(leader);
  HaServer* fresh = Add(o);  // empty, and the only one campaigning
  ASSERT_EQ(WaitLeader(8000ms), fresh);
  EXPECT_EQ(fresh->CanonicalHash(), hash);
  EXPECT_EQ(mirror->CanonicalHash(), hash);  // not wiped by the newcomer
  EXPECT_EQ(fresh->status().snapshots, 1u);
  auto c2 = MasterClient::ConnectAny({mirror->url(), fresh->url()});
  ASSERT_TRUE(c2.ok());
  auto found = (*c2)->Exists("ns", acked);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(std::count(found->begin(), found->end(), true), 200);
}

// The fence and the election loop run on the master's clock: stepped in virtual time, the
// leader accepts writes up to the last nanosecond of its fence (lease granted at t0: t0 + TTL -
// fence_margin) and none from then on, and steps down at its loop's next round.
TEST_F(HaTest, LeaderThatLosesEtcdFencesItselfAtTheLeaseEndInVirtualTime) {
  EtcdProcess own(EtcdProcess::Binary());
  ASSERT_TRUE(own.Start().ok());
  auto clock = std::make_shared<ManualClock>();
  HaOptions o = Options(own.endpoint(), key_);
  o.sync_standbys = 0;
  o.master.clock = clock;
  const Nanos t0 = clock->Now();  // no virtual time passes before the lease is granted
  HaServer* leader = Add(o);
  ASSERT_EQ(WaitLeader(), leader);  // the first round needs no time to pass
  auto http = net::HttpClient::FromUrl(leader->url());
  ASSERT_TRUE(http.ok());
  auto ok = (*http)->Post("/v1/namespaces", R"({"name":"before"})");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 201);
  own.Kill();
  const Nanos fence = t0 + o.lease_ttl_seconds * kSecond - o.fence_margin;
  // Its keepalives now fail (virtual time passes their due times): the fence does not move.
  clock->Advance(fence - 1 - clock->Now());
  EXPECT_TRUE(leader->is_leader());
  auto last = (*http)->Post("/v1/namespaces", R"({"name":"last"})");
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->status, 201) << last->body;
  clock->Advance(1);
  EXPECT_FALSE(leader->is_leader());
  auto refused = (*http)->Post("/v1/namespaces", R"({"name":"after"})");
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 421) << refused->body;
  // And it steps down at its election loop's next round (its tick loop sleeps on the clock
  // too: two sleepers).
  clock->Advance(o.poll_interval);
  ASSERT_TRUE(clock->AwaitSleepers(2));
  EXPECT_EQ(leader->status().role, HaRole::kStandby);
  EXPECT_NE(leader->status().last_step_down.find("lease may have expired"), std::string::npos)
      << leader->status().last_step_down;
}

}  // namespace
}  // namespace myriad::kvstore
