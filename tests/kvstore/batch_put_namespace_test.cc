// Through the store's public API and the CLI: a batched put is one placement call to the master
// and one end call, whatever the batch's size; and namespaces per model version: a new version
// writes its own, a canary reads its own, dropping one frees its bytes on the nodes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../cli/run_myriad.h"
#include "kv_cluster.h"
#include "kv_scenario.h"
#include "kvstore/store_client.h"

namespace myriad::kvstore {
namespace {

using testing::Bytes;
using testing::Chain;
using testing::KvCluster;
using testing::WaitFor;

std::unique_ptr<StoreClient> Client(KvCluster& c) {
  auto client = StoreClient::Connect(c.url(), {.master_timeout = 2 * kSecond, .node_timeout = 2 * kSecond});
  EXPECT_TRUE(client.ok());
  return std::move(*client);
}

// The master's count of requests of `op` (its /metrics).
uint64_t Requests(KvCluster& c, std::string_view op) {
  net::HttpRequest get;
  get.method = "GET";
  get.target = "/metrics";
  const std::string body = c.master().Handle(get).body;
  const std::string sample = fmt::format("\nmyriad_kvstore_requests_total{{op=\"{}\"}} ", op);
  const size_t at = body.find(sample);
  return at == std::string::npos ? 0 : std::stoull(body.substr(at + sample.size()));
}

uint64_t NodesUsed(KvCluster& c, NodeId nodes) {
  uint64_t used = 0;
  for (NodeId n = 1; n <= nodes; ++n) used += c.node(n).store().stats().used_bytes;
  return used;
}

TEST(BatchPutTest, OnePlacementCallForTheWholeBatchAndEveryByteLands) {
  KvCluster c;
  c.AddNode(1, "rack-a");
  c.AddNode(2, "rack-b");
  c.AddNode(3, "rack-c");
  auto client = Client(c);
  ASSERT_TRUE(client->master().CreateNamespace("m/v1").ok());
  constexpr size_t kObjects = 40;
  std::vector<std::vector<BlockKey>> keys;
  std::vector<std::string> bytes;
  std::vector<PutItem> items;
  for (size_t i = 0; i < kObjects; ++i) {
    keys.push_back(Chain(i + 1, 1 + i % 3));
    bytes.push_back(Bytes(i, i % 4 == 0 ? 300'000 : 5'000 + i));  // some above the parallel size
  }
  for (size_t i = 0; i < kObjects; ++i) items.push_back({keys[i], bytes[i]});
  const std::vector<absl::Status> put = client->BatchPut("m/v1", items, 2);
  ASSERT_EQ(put.size(), kObjects);
  for (size_t i = 0; i < kObjects; ++i) EXPECT_TRUE(put[i].ok()) << i << ": " << put[i];
  EXPECT_EQ(Requests(c, "put_batch_start"), 1u);
  EXPECT_EQ(Requests(c, "put_batch_end"), 1u);
  EXPECT_EQ(Requests(c, "put_start"), 0u);
  EXPECT_EQ(Requests(c, "put_end"), 0u);
  uint64_t total = 0;
  for (const std::string& b : bytes) total += b.size();
  EXPECT_EQ(NodesUsed(c, 3), 2 * total);
  // Every object is complete, with two replicas, and reads back from any of its blocks.
  std::vector<BlockKey> first_blocks;
  for (const auto& k : keys) first_blocks.push_back(k.front());
  std::vector<std::string> values;
  std::vector<absl::Status> statuses;
  ASSERT_TRUE(client->BatchGet("m/v1", first_blocks, &values, &statuses).ok());
  for (size_t i = 0; i < kObjects; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << i << ": " << statuses[i];
    EXPECT_EQ(values[i], bytes[i]) << i;
  }
  // A put that overlaps a stored run is refused on its own; the rest of its batch is stored.
  const std::vector<BlockKey> fresh = Chain(1000, 2);
  const std::vector<PutItem> mixed = {{keys[0], bytes[0]}, {fresh, "fresh"}};
  const std::vector<absl::Status> again = client->BatchPut("m/v1", mixed, 2);
  EXPECT_EQ(again[0].code(), absl::StatusCode::kFailedPrecondition) << again[0];
  EXPECT_TRUE(again[1].ok()) << again[1];
  EXPECT_EQ(Requests(c, "put_batch_start"), 2u);
  auto got = client->Get("m/v1", fresh.back());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "fresh");
}

// The batch call names the field that is wrong, as the single calls do.
TEST(BatchPutTest, ABadBatchNamesItsField) {
  KvCluster c;
  auto client = Client(c);
  ASSERT_TRUE(client->master().CreateNamespace("m").ok());
  auto post = [&](std::string body) {
    net::HttpRequest r;
    r.method = "POST";
    r.target = "/v1/put/batch_start";
    r.body = std::move(body);
    return c.master().Handle(r);
  };
  net::HttpResponse r = post(R"({"namespace":"m","keys":["0x1","0x2"],"blocks":[1,1],"sizes":[5]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("'sizes' has 1 entries for 2 puts"), std::string::npos) << r.body;
  r = post(R"({"namespace":"m","keys":["0x1","0x2"],"blocks":[1,2],"sizes":[5,5]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("adds up to 3 keys but 'keys' has 2"), std::string::npos) << r.body;
  r = post(R"({"namespace":"m","keys":["0x1"],"sizes":[5]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("'blocks'"), std::string::npos) << r.body;
}

// Two model versions side by side: each writes and reads its own namespace (the same block keys
// in both hold different bytes); dropping v1 with the CLI makes its objects vanish at once, the
// nodes free v1's bytes, and v2 is untouched.
TEST(NamespaceVersionTest, DroppingAVersionFreesItsBytesAndLeavesTheOtherAlone) {
  KvMasterOptions o = KvCluster::Defaults();
  o.lease_ttl = 50 * kMillisecond;
  KvCluster c(o);
  c.AddNode(1, "rack-a");
  c.AddNode(2, "rack-b");
  auto client = Client(c);
  auto cli = [&](std::string args) {
    return myriad::testing::RunMyriad(fmt::format("kvstore namespace --master {} {}", c.url(), args), "", 30);
  };
  for (const char* version : {"llama3-70b/v1", "llama3-70b/v2"}) {
    auto created = cli(fmt::format("--create {}", version));
    ASSERT_EQ(created.code, 0) << created.out;
  }
  const std::vector<BlockKey> run = Chain(7, 2);  // the same prompt's blocks in both versions
  const std::string v1 = Bytes(1, 200'000), v2 = Bytes(2, 150'000);
  ASSERT_TRUE(client->Put("llama3-70b/v1", run, v1, 2).ok());
  ASSERT_TRUE(client->Put("llama3-70b/v2", run, v2, 2).ok());
  auto canary = client->Get("llama3-70b/v2", run.front());
  ASSERT_TRUE(canary.ok()) << canary.status();
  EXPECT_EQ(*canary, v2);
  auto old = client->Get("llama3-70b/v1", run.front());
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(*old, v1);
  EXPECT_EQ(NodesUsed(c, 2), 2 * (v1.size() + v2.size()));

  auto dropped = cli("--drop llama3-70b/v1");
  ASSERT_EQ(dropped.code, 0) << dropped.out;
  EXPECT_NE(dropped.out.find("\"dropped\": true"), std::string::npos) << dropped.out;
  EXPECT_EQ(client->Get("llama3-70b/v1", run.front()).status().code(), absl::StatusCode::kNotFound);
  // The nodes free v1's bytes once its last lease has expired (reconciliation).
  EXPECT_TRUE(WaitFor([&] { return NodesUsed(c, 2) == 2 * v2.size(); })) << NodesUsed(c, 2);
  auto after = client->Get("llama3-70b/v2", run.back());
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*after, v2);
  // Dropping it again, or a name never created: the master's 404, exit 1.
  auto twice = cli("--drop llama3-70b/v1");
  EXPECT_EQ(twice.code, 1) << twice.out;
  EXPECT_NE(twice.out.find("no namespace 'llama3-70b/v1'"), std::string::npos) << twice.out;
}

TEST(NamespaceVersionTest, BadNamesAreRefusedNamingTheBound) {
  KvCluster c;
  auto client = Client(c);
  const absl::Status long_name = client->master().CreateNamespace(std::string(256, 'x'));
  EXPECT_EQ(long_name.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(long_name.message().find("1 to 255"), std::string::npos) << long_name;
  const absl::Status spaced = client->master().CreateNamespace("llama 3");
  EXPECT_EQ(spaced.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(spaced.message().find("0x20 at offset 5"), std::string::npos) << spaced;
  EXPECT_TRUE(client->master().CreateNamespace(std::string(255, 'x')).ok());
  // The CLI refuses them before asking the master: bad input, exit 2, naming the flag.
  auto r = myriad::testing::RunMyriad(
      fmt::format("kvstore namespace --master {} --create 'llama 3'", c.url()), "", 30);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--create: namespace name has byte 0x20"), std::string::npos) << r.out;
  r = myriad::testing::RunMyriad(
      fmt::format("kvstore namespace --master {} --drop {}", c.url(), std::string(300, 'y')), "", 30);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--drop: namespace name has 300 bytes; it must have 1 to 255"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace myriad::kvstore
