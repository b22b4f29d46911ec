// Reconciliation: which of the objects a storage node holds the master still places there
// (KvMaster::HeldBy), its HTTP endpoint's errors, and a node that outlives its master.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kv_cluster.h"
#include "kv_scenario.h"
#include "kvstore_core/master.h"
#include "kvstore/master_server.h"
#include "kvstore/store_client.h"

namespace myriad::kvstore {
namespace {

using testing::Chain;
using testing::Req;
using testing::WaitFor;

TEST(HeldByTest, PendingCompleteRepairingKeptRemovedAndDroppedFreed) {
  KvMasterOptions o;
  o.ramp = 0;
  KvMaster m(o);
  for (NodeId n = 1; n <= 3; ++n) ASSERT_TRUE(m.AddNode(n, fmt::format("d{}", n), 1 << 30, 0).ok());
  const NamespaceId ns = *m.CreateNamespace("a");
  const NamespaceId other = *m.CreateNamespace("b");
  const auto done = Chain(1, 2), pending = Chain(2, 1), removed = Chain(3, 1), dropped = Chain(4, 1);
  auto placed = m.PutStart(ns, Req(done, 100, 2), 0);
  ASSERT_TRUE(placed.ok());
  ASSERT_TRUE(m.PutEnd(ns, done.back()).ok());
  ASSERT_TRUE(m.PutStart(ns, Req(pending, 100, 3), 0).ok());
  ASSERT_TRUE(m.PutStart(ns, Req(removed, 100, 3), 0).ok());
  ASSERT_TRUE(m.PutEnd(ns, removed.back()).ok());
  ASSERT_TRUE(m.Remove(ns, removed.back(), 0).ok());
  ASSERT_TRUE(m.PutStart(other, Req(dropped, 100, 3), 0).ok());
  ASSERT_TRUE(m.PutEnd(other, dropped.back()).ok());
  const NodeId holder = placed->nodes[0];
  NodeId stranger = 1;
  while (stranger == placed->nodes[0] || stranger == placed->nodes[1]) ++stranger;

  const std::vector<HeldObject> held = {{ns, done.back()},   {ns, done[0]},  // a block, not a name
                                        {ns, pending.back()}, {ns, removed.back()},
                                        {other, dropped.back()}, {99, 1}};
  std::vector<uint8_t> keep;
  m.HeldBy(holder, held, &keep);
  EXPECT_EQ(keep, (std::vector<uint8_t>{1, 0, 1, 0, 1, 0}));
  m.HeldBy(stranger, held, &keep);
  EXPECT_EQ(keep[0], 0) << "not placed on this node";
  EXPECT_EQ(keep[2], 1) << "pending, three replicas: on every node";
  // A dropped namespace keeps its bytes until its leases have passed and Tick reclaims it.
  ASSERT_TRUE(m.DropNamespace(other).ok());
  m.HeldBy(holder, held, &keep);
  EXPECT_EQ(keep[4], 1);
  m.Tick(100 * kSecond);
  m.HeldBy(holder, held, &keep);
  EXPECT_EQ(keep[4], 0);
}

TEST(ReconcileEndpointTest, BadRequestsNameTheFieldAndUnknownNodesAre404) {
  MasterServer server({});
  auto post = [&](std::string target, std::string body) {
    net::HttpRequest r;
    r.method = "POST";
    r.target = std::move(target);
    r.body = std::move(body);
    return server.Handle(r);
  };
  ASSERT_EQ(post("/v1/nodes", R"({"id":1,"fault_domain":"a","capacity_bytes":1000})").status, 201);
  struct Case {
    std::string target, body, param;
    int status;
  };
  const Case cases[] = {
      {"/v1/nodes/x/reconcile", "{}", "id", 400},
      {"/v1/nodes/1/reconcile", "[1]", "", 400},
      {"/v1/nodes/1/reconcile", R"({"objects":[]})", "namespaces", 400},
      {"/v1/nodes/1/reconcile", R"({"namespaces":[0],"objects":[]})", "objects", 400},
      {"/v1/nodes/1/reconcile", R"({"namespaces":[-1],"objects":["0x1"]})", "namespaces", 400},
      {"/v1/nodes/1/reconcile", R"({"namespaces":[0],"objects":["zz"]})", "objects", 400},
      {"/v1/nodes/7/reconcile", R"({"namespaces":[],"objects":[]})", "", 404},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} {}", c.target, c.body));
    const net::HttpResponse r = post(c.target, c.body);
    EXPECT_EQ(r.status, c.status) << r.body;
    if (!c.param.empty()) {
      EXPECT_NE(r.body.find(fmt::format("\"param\":\"{}\"", c.param)), std::string::npos) << r.body;
    }
  }
  const net::HttpResponse ok = post("/v1/nodes/1/reconcile", R"({"namespaces":[0],"objects":["0x5"]})");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, R"({"drop":[0]})");
}

TEST(ReconcileTest, NodeOutlivesItsMasterRegistersAgainAndFreesWhatTheNewOneDoesNotPlace) {
  auto master = std::make_unique<MasterServer>(MasterServerOptions{});
  ASSERT_TRUE(master->Start().ok());
  const uint16_t port = master->port();
  const std::string url = fmt::format("http://127.0.0.1:{}", port);
  StorageNodeOptions o;
  o.master_url = url;
  o.id = 1;
  o.fault_domain = "a";
  o.capacity_bytes = 8 << 20;
  o.segment_bytes = 8 << 20;
  o.heartbeat_interval = 50 * kMillisecond;
  o.reconcile_interval = 100 * kMillisecond;
  StorageNode node(o);
  ASSERT_TRUE(node.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return node.registered(); }));
  {
    auto client = StoreClient::Connect(url);
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE((*client)->master().CreateNamespace("ns").ok());
    ASSERT_TRUE((*client)->Put("ns", Chain(1, 1), std::string(5000, 'x')).ok());
  }
  EXPECT_EQ(node.store().stats().objects, 1u);
  // A new master, empty, on the same address (no log shipping here): the node's heartbeat is
  // answered 404, it registers again, and its next sweep frees the object nobody places there.
  master->Stop();
  MasterServerOptions again;
  again.http.port = port;
  master = std::make_unique<MasterServer>(again);
  ASSERT_TRUE(master->Start().ok());
  EXPECT_TRUE(WaitFor([&] { return node.stats().registrations >= 2; }));
  EXPECT_TRUE(WaitFor([&] { return node.store().stats().objects == 0; }));
  EXPECT_EQ(node.store().stats().used_bytes, 0u);
  node.Stop();
  master->Stop();
}

}  // namespace
}  // namespace myriad::kvstore
