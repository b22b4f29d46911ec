// The KV store master's and a storage node's /metrics, scraped over loopback after traffic, as
// a Prometheus operator would check them: `promtool check metrics` has nothing to say.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../test_util/promtool.h"
#include "../test_util/temp_dir.h"
#include "kv_cluster.h"
#include "kv_scenario.h"
#include "kvstore/store_client.h"
#include "net/http_client.h"

namespace myriad::kvstore {
namespace {

using testing::Bytes;
using testing::Chain;
using testing::KvCluster;
using testing::WaitFor;

std::string Get(uint16_t port, std::string_view path) {
  net::HttpClient c(net::HostPort{"127.0.0.1", port});
  auto r = c.Get(path);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return "";
  EXPECT_EQ(r->status, 200) << r->body;
  return r->body;
}

TEST(KvStoreMetricsTest, MasterAndNodeExpositionsPassPromtool) {
  KvCluster cluster;
  // A node with its metrics port and the same-host shared-memory path, so every family it has
  // is in its exposition.
  StorageNodeOptions o;
  o.master_url = cluster.url();
  o.id = 0;
  o.fault_domain = "rack-a";
  o.capacity_bytes = uint64_t{32} << 20;
  o.segment_bytes = uint64_t{16} << 20;
  o.heartbeat_interval = 100 * kMillisecond;
  o.reconcile_interval = 100 * kMillisecond;
  o.data.threads = 1;
  o.http_port = 0;
  o.shm_socket = (myriad::testing::TestTempDir() / "node0.sock").string();
  StorageNode node(std::move(o));
  ASSERT_TRUE(node.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return node.registered(); }));

  // Traffic: puts and gets by both paths, a miss, and an API error answer.
  for (bool shm : {true, false}) {
    auto client = StoreClient::Connect(cluster.url(), {.master_timeout = 2 * kSecond,
                                                       .node_timeout = 2 * kSecond,
                                                       .shared_memory = shm});
    ASSERT_TRUE(client.ok()) << client.status();
    if (shm) {
      ASSERT_TRUE((*client)->master().CreateNamespace("ns").ok());
    }
    const std::vector<BlockKey> run = Chain(shm ? 3 : 4, 2);
    const absl::Status put = (*client)->Put("ns", run, Bytes(1, 4096));
    ASSERT_TRUE(put.ok()) << put;
    auto got = (*client)->Get("ns", run[0]);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_FALSE((*client)->Get("ns", Chain(99, 1)[0]).ok());
  }
  net::HttpClient api(net::HostPort{"127.0.0.1", cluster.master().port()});
  auto bad = api.Post("/v1/get", "{not json");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);

  const std::string master = Get(cluster.master().port(), "/metrics");
  EXPECT_NE(master.find("myriad_kvstore_errors_total{op=\"get\""), std::string::npos) << master;
  std::vector<std::string> complaints = myriad::testing::PromtoolComplaints(master);
  EXPECT_TRUE(complaints.empty()) << ::testing::PrintToString(complaints) << "\n" << master;

  const std::string text = Get(node.http_port(), "/metrics");
  EXPECT_NE(text.find("myriad_kvnode_shm_ops_total{op=\"put\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("myriad_kvnode_ops_total{op=\"put\"} 1"), std::string::npos) << text;
  complaints = myriad::testing::PromtoolComplaints(text);
  EXPECT_TRUE(complaints.empty()) << ::testing::PrintToString(complaints) << "\n" << text;
  node.Stop();
}

}  // namespace
}  // namespace myriad::kvstore
