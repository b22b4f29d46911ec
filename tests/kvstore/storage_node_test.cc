// Scenarios over a whole KV store in one process: a master, storage nodes on loopback, the
// store client and the repair agent. Given nodes in fault domains, when puts, reads, removals
// and node failures, expect bytes where the master says they are.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kv_cluster.h"
#include "kv_scenario.h"
#include "kvstore/data_client.h"
#include "kvstore/data_server.h"
#include "kvstore/repair_agent.h"
#include "kvstore/store_client.h"
#include <chrono>
#include <thread>

namespace myriad::kvstore {
namespace {

using testing::Bytes;
using testing::Chain;
using testing::KvCluster;
using testing::ReplicatedWithout;
using testing::WaitFor;

std::unique_ptr<StoreClient> Client(KvCluster& c) {
  auto client = StoreClient::Connect(c.url(), {.master_timeout = 2 * kSecond, .node_timeout = 2 * kSecond});
  EXPECT_TRUE(client.ok());
  return std::move(*client);
}

TEST(StorageNodeTest, PutGetTwoReplicasOnDistinctFaultDomains) {
  KvCluster c;
  c.AddNode(1, "rack-a");
  c.AddNode(2, "rack-b");
  c.AddNode(3, "rack-a");
  auto client = Client(c);
  ASSERT_TRUE(client->master().CreateNamespace("m/fp8").ok());
  const std::vector<BlockKey> run = Chain(1, 4);
  const std::string value = Bytes(1, 300'000);
  ASSERT_TRUE(client->Put("m/fp8", run, value, 2).ok());
  // Any block of the run finds the whole run's bytes.
  auto got = client->Get("m/fp8", run[1]);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, value);
  auto lookup = client->master().Get("m/fp8", std::vector<BlockKey>{run.back()});
  ASSERT_TRUE(lookup.ok());
  ASSERT_EQ((*lookup)[0].replicas.size(), 2u);
  EXPECT_NE((*lookup)[0].replicas[0].fault_domain, (*lookup)[0].replicas[1].fault_domain);
  uint64_t held = 0;
  for (NodeId n = 1; n <= 3; ++n) held += c.node(n).store().stats().used_bytes;
  EXPECT_EQ(held, 2 * value.size());
  // Batched reads, with a miss.
  std::vector<std::string> values;
  std::vector<absl::Status> statuses;
  const std::vector<BlockKey> asked = {run[0], 0x1234, run[3]};
  ASSERT_TRUE(client->BatchGet("m/fp8", asked, &values, &statuses).ok());
  EXPECT_TRUE(statuses[0].ok());
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(values[2], value);
  // The node's metrics.
  EXPECT_NE(c.node(1).MetricsText().find("myriad_kvnode_used_bytes"), std::string::npos);
}

TEST(StorageNodeTest, GetFallsBackWhenAReplicaNodeIsDown) {
  KvCluster c;
  c.AddNode(1, "a");
  c.AddNode(2, "b");
  auto client = Client(c);
  ASSERT_TRUE(client->master().CreateNamespace("ns").ok());
  std::vector<std::vector<BlockKey>> runs;
  for (uint64_t i = 0; i < 6; ++i) {
    runs.push_back(Chain(10 + i, 1));
    ASSERT_TRUE(client->Put("ns", runs.back(), Bytes(i, 5000), 2).ok());
  }
  c.node(1).Stop();  // before the master notices: it still lists node 1 first for some
  for (uint64_t i = 0; i < 6; ++i) {
    auto got = client->Get("ns", runs[i][0]);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, Bytes(i, 5000));
  }
  EXPECT_GE(client->stats().fallbacks, 1u);
  // With both down, the error names every replica tried.
  c.node(2).Stop();
  auto none = client->Get("ns", runs[0][0]);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(none.status().message().find("every replica failed"), std::string::npos);
}

TEST(StorageNodeTest, FailedReplicaWriteRevokesThePut) {
  KvCluster c;
  c.AddNode(1, "a");
  c.AddNode(2, "b", uint64_t{64} << 20, uint64_t{1} << 20);  // objects above 1 MiB never fit
  auto client = Client(c);
  ASSERT_TRUE(client->master().CreateNamespace("ns").ok());
  const std::vector<BlockKey> run = Chain(5, 1);
  absl::Status st = client->Put("ns", run, Bytes(5, 2 << 20), 2);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(client->stats().revoked, 1u);
  auto exists = client->master().Exists("ns", run);
  ASSERT_TRUE(exists.ok());
  EXPECT_FALSE((*exists)[0]);
  EXPECT_TRUE(WaitFor([&] { return c.node(1).store().stats().used_bytes == 0; }));
}

// During the seconds before a dead node is declared, half the puts failed with no retry; now a
// put whose replica write fails is placed again without that node.
TEST(StorageNodeTest, FailedReplicaWriteIsRetriedOnAnotherNode) {
  KvMasterOptions o = KvCluster::Defaults();
  o.dead_after = kHour;  // node 2 stays placed on while it is down
  KvCluster c(o);
  c.AddNode(1, "a");
  c.AddNode(2, "b");
  c.AddNode(3, "c");
  c.node(2).Stop();
  auto client = Client(c);
  ASSERT_TRUE(client->master().CreateNamespace("ns").ok());
  for (uint64_t i = 0; i < 12; ++i) {
    const std::vector<BlockKey> run = Chain(300 + i, 1);
    absl::Status st = client->Put("ns", run, Bytes(i, 5000), 2);
    ASSERT_TRUE(st.ok()) << "put " << i << ": " << st;
    auto got = client->Get("ns", run.back());
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, Bytes(i, 5000));
  }
  EXPECT_GT(client->stats().put_retries, 0u);
  EXPECT_EQ(client->stats().put_retries, client->stats().revoked);
}

TEST(StorageNodeTest, RemovalDropAndEvictionFreeTheNodesBytes) {
  KvMasterOptions o = KvCluster::Defaults();
  o.lease_ttl = 50 * kMillisecond;
  KvCluster c(o);
  StorageNode& node = c.AddNode(1, "a", 1 << 20, 1 << 20);
  auto client = Client(c);
  ASSERT_TRUE(client->master().CreateNamespace("keep").ok());
  ASSERT_TRUE(client->master().CreateNamespace("drop").ok());
  // Removal.
  const std::vector<BlockKey> removed = Chain(1, 1);
  ASSERT_TRUE(client->Put("keep", removed, Bytes(1, 10'000)).ok());
  EXPECT_EQ(node.store().stats().objects, 1u);
  auto rm = client->master().Remove("keep", removed);
  ASSERT_TRUE(rm.ok());
  ASSERT_TRUE((*rm)[0].ok()) << (*rm)[0];
  EXPECT_TRUE(WaitFor([&] { return node.store().stats().objects == 0; }));
  // A dropped namespace.
  ASSERT_TRUE(client->Put("drop", Chain(2, 1), Bytes(2, 10'000)).ok());
  ASSERT_TRUE(client->master().DropNamespace("drop").ok());
  EXPECT_TRUE(WaitFor([&] { return node.store().stats().objects == 0; }));
  // Eviction: 200 KiB objects into 1 MiB; five take it above 90%, the master evicts down to
  // 80%, and the node frees what was evicted.
  int stored = 0;
  for (uint64_t i = 0; i < 12; ++i) {
    absl::Status st = client->Put("keep", Chain(100 + i, 1), Bytes(i, 200 << 10));
    if (st.ok()) {
      ++stored;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(150));  // a tick to evict
    }
  }
  EXPECT_GE(stored, 7);
  auto master_used = [&] {
    auto s = client->master().Stats();
    return s.ok() ? (*s)["nodes"][0]["used_bytes"].get<uint64_t>() : 0;
  };
  EXPECT_TRUE(WaitFor([&] {
    return node.store().stats().used_bytes == master_used() &&
           node.store().stats().used_bytes <= (900u << 10);
  })) << node.store().stats().used_bytes << " held, the master counts " << master_used();
  EXPECT_GE(node.stats().objects_freed, 4u);  // removed, dropped, two evicted or more
}

// COPY_TO made a node connect to any host:port and push an object there; now only to a node
// registered with the master (one registered after the node last asked included).
TEST(StorageNodeTest, CopyToGoesOnlyToRegisteredNodes) {
  KvCluster c;
  c.AddNode(1, "a");
  auto client = Client(c);
  ASSERT_TRUE(client->master().CreateNamespace("ns").ok());
  const std::vector<BlockKey> run = Chain(5, 1);
  ASSERT_TRUE(client->Put("ns", run, "replica bytes", 1).ok());  // on node 1, the only one
  const ObjectName name{(*client->master().Get("ns", run))[0].namespace_id, run.back()};
  c.AddNode(2, "b");
  NodeStore outside_store(8 << 20, 8 << 20);
  DataServer outside(&outside_store, {});
  ASSERT_TRUE(outside.Start().ok());
  DataClient source(c.node(1).address());
  absl::Status st = source.CopyTo(name, "127.0.0.1:" + std::to_string(outside.port()));
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << st;
  EXPECT_NE(st.message().find("not the address of a storage node registered"), std::string::npos) << st;
  EXPECT_EQ(outside_store.stats().objects, 0u);
  EXPECT_TRUE(WaitFor([&] { return source.CopyTo(name, c.node(2).address()).ok(); }))
      << source.CopyTo(name, c.node(2).address());
  c.AddNode(3, "c");
  EXPECT_TRUE(WaitFor([&] { return source.CopyTo(name, c.node(3).address()).ok(); }))
      << source.CopyTo(name, c.node(3).address());
  EXPECT_EQ(outside_store.stats().objects, 0u);
  outside.Stop();
}

TEST(StorageNodeTest, NodeLossIsRepairedBackToTheReplicaTarget) {
  KvCluster c;
  for (NodeId n = 1; n <= 4; ++n) c.AddNode(n, "rack-" + std::to_string(n));
  auto client = Client(c);
  ASSERT_TRUE(client->master().CreateNamespace("ns").ok());
  std::vector<BlockKey> objects;
  for (uint64_t i = 0; i < 24; ++i) {
    const std::vector<BlockKey> run = Chain(1000 + i, 2);
    ASSERT_TRUE(client->Put("ns", run, Bytes(i, 20'000), 2).ok());
    objects.push_back(run.back());
  }
  const uint64_t on_lost = c.node(2).store().stats().objects;
  ASSERT_GT(on_lost, 0u);
  c.node(2).Stop();
  RepairAgentOptions ao;
  ao.master_url = c.url();
  ao.workers = 2;
  ao.poll_interval = 50 * kMillisecond;
  RepairAgent agent(ao);
  ASSERT_TRUE(agent.Start().ok());
  auto at_target = [&] { return ReplicatedWithout(client->master(), "ns", objects, 2, 2); };
  ASSERT_TRUE(WaitFor(at_target, 8 * kSecond));
  agent.Stop();
  EXPECT_EQ(agent.stats().done, on_lost);
  // Each object is readable from each of its replicas, the new ones included.
  auto got = client->master().Get("ns", objects);
  ASSERT_TRUE(got.ok());
  for (size_t i = 0; i < objects.size(); ++i) {
    for (const ReplicaInfo& r : (*got)[i].replicas) {
      DataClient node(r.address);
      std::vector<std::string> values;
      std::vector<absl::StatusCode> codes;
      ASSERT_TRUE(node.Get(std::vector<ObjectName>{{(*got)[i].namespace_id, objects[i]}}, &values, &codes).ok());
      ASSERT_EQ(codes[0], absl::StatusCode::kOk) << "object " << i << " on node " << r.node;
      EXPECT_EQ(values[0], Bytes(i, 20'000));
    }
  }
}

}  // namespace
}  // namespace myriad::kvstore
