// The cluster's shared secret (kvstore/auth.h): the master's API, the data path, the
// shared-memory hello and the CLI refuse whoever does not present it, and a cluster whose
// every part has it works as an open one does (puts, gets, repairs between nodes).
#include "kvstore/auth.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../cli/run_myriad.h"
#include "kv_cluster.h"
#include "kv_scenario.h"
#include "kvstore/data_client.h"
#include "kvstore/data_server.h"
#include "kvstore/data_wire.h"
#include "kvstore/master_client.h"
#include "kvstore/repair_agent.h"
#include "kvstore/shm_client.h"
#include "kvstore/shm_server.h"
#include "kvstore/store_client.h"
#include "net/http_client.h"

namespace myriad::kvstore {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using testing::Chain;
using testing::KvCluster;
using testing::WaitFor;

constexpr char kSecret[] = "s3cret-token_of-the-cluster";

// A directory of its own under $TMPDIR, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "myriad_auth_XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(AuthTokenTest, LoadsFromAFileOrTheEnvironmentAndRefusesBadTokens) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  auto ok = LoadAuthToken(dir.Write("t", std::string(kSecret) + "\n"));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, kSecret);
  EXPECT_EQ(LoadAuthToken(dir.Write("empty", "\n")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadAuthToken(dir.Write("long", std::string(kMaxAuthTokenBytes + 1, 'x'))).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadAuthToken(dir.Write("space", "two words")).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto missing = LoadAuthToken(dir.path() + "/none");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find(dir.path() + "/none"), std::string::npos);
  EXPECT_EQ(LoadAuthToken(dir.path()).status().code(), absl::StatusCode::kInvalidArgument);
  ::setenv(std::string(kAuthTokenEnv).c_str(), kSecret, 1);
  auto env = LoadAuthToken("");
  ::unsetenv(std::string(kAuthTokenEnv).c_str());
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(*env, kSecret);
  auto none = LoadAuthToken("");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");

  EXPECT_TRUE(TokensEqual("abc", "abc"));
  EXPECT_FALSE(TokensEqual("abc", "abd"));
  EXPECT_FALSE(TokensEqual("abc", "ab"));
  EXPECT_FALSE(TokensEqual("abc", "abcd"));
  EXPECT_FALSE(TokensEqual("abc", ""));
}

TEST(MasterAuthTest, EveryRouteButHealthAndMetricsWantsTheToken) {
  MasterServerOptions o;
  o.auth_token = kSecret;
  MasterServer server(o);
  ASSERT_TRUE(server.Start().ok());
  net::HttpClient http({"127.0.0.1", server.port()});
  const std::string node = R"({"id":1,"fault_domain":"a","capacity_bytes":1048576})";
  for (const net::Headers& h : {net::Headers{}, AuthHeaders("wrong"),
                                net::Headers{{"Authorization", kSecret}}}) {
    auto r = http.Request("POST", "/v1/nodes", node, "application/json", h);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 401) << r->body;
    EXPECT_NE(r->body.find("unauthorized"), std::string::npos) << r->body;
    auto stats = http.Request("GET", "/v1/stats", "", "", h);
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ(stats->status, 401);
  }
  auto registered = http.Request("POST", "/v1/nodes", node, "application/json", AuthHeaders(kSecret));
  ASSERT_TRUE(registered.ok());
  EXPECT_EQ(registered->status, 201) << registered->body;
  EXPECT_EQ(http.Get("/health")->status, 200);
  auto metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->status, 200);
  // Refused before routing: counted under no operation.
  EXPECT_NE(metrics->body.find(R"(op="unknown",type="unauthorized"} 6)"), std::string::npos)
      << metrics->body;

  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  auto without = MasterClient::Connect(url, 2 * kSecond);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ((*without)->CreateNamespace("ns").code(), absl::StatusCode::kUnauthenticated);
  auto with = MasterClient::Connect(url, 2 * kSecond, kSecret);
  ASSERT_TRUE(with.ok());
  EXPECT_TRUE((*with)->CreateNamespace("ns").ok());
  server.Stop();
}

class DataAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DataServerOptions o;
    o.threads = 1;
    o.auth_token = kSecret;
    server_ = std::make_unique<DataServer>(&store_, o);
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override { server_->Stop(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(server_->port()); }

  NodeStore store_{uint64_t{16} << 20, uint64_t{8} << 20};
  std::unique_ptr<DataServer> server_;
};

TEST_F(DataAuthTest, ClientsWithoutTheTokenAreRefused) {
  DataClient open(address(), {.timeout = 2 * kSecond});
  absl::Status st = open.Put({1, 2}, "attacker's bytes");
  EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated) << st;
  DataClient wrong(address(), {.timeout = 2 * kSecond, .auth_token = "guess"});
  st = wrong.Put({1, 2}, "attacker's bytes");
  EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated) << st;
  EXPECT_EQ(wrong.Stats().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(store_.stats().objects, 0u);

  DataClient good(address(), {.timeout = 2 * kSecond, .auth_token = kSecret});
  ASSERT_TRUE(good.Put({1, 2}, "the owner's bytes").ok());
  std::vector<std::string> values;
  std::vector<absl::StatusCode> codes;
  ASSERT_TRUE(good.Get(std::vector<ObjectName>{{1, 2}}, &values, &codes).ok());
  EXPECT_EQ(values[0], "the owner's bytes");
  EXPECT_GE(server_->stats().unauthenticated, 2u);

  // A raw PUT frame without AUTH gets an Unauthenticated reply naming the op, then a close.
  asio::io_context io;
  tcp::socket s(io);
  s.connect({asio::ip::make_address("127.0.0.1"), server_->port()});
  timeval tv{3, 0};
  setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string payload = "overwrite";
  wire::Header h;
  h.op = static_cast<uint8_t>(wire::Op::kPut);
  h.request_id = 5;
  h.body_bytes = sizeof(wire::PutHead) + payload.size();
  const wire::PutHead head{1, 0, 2, payload.size()};
  asio::write(s, asio::buffer(&h, sizeof h));
  asio::write(s, asio::buffer(&head, sizeof head));
  boost::system::error_code ec;
  asio::write(s, asio::buffer(payload), ec);
  wire::Header r;
  asio::read(s, asio::buffer(&r, sizeof r), ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(r.status, static_cast<uint16_t>(absl::StatusCode::kUnauthenticated));
  std::string message(r.body_bytes, '\0');
  asio::read(s, asio::buffer(message), ec);
  EXPECT_NE(message.find("put refused"), std::string::npos) << message;
  char c;
  s.read_some(asio::buffer(&c, 1), ec);
  EXPECT_TRUE(ec == asio::error::eof || ec == asio::error::connection_reset) << ec.message();
  values.clear();
  ASSERT_TRUE(good.Get(std::vector<ObjectName>{{1, 2}}, &values, &codes).ok());
  EXPECT_EQ(values[0], "the owner's bytes");
}

TEST_F(DataAuthTest, CopyToPresentsTheTokenToTheDestination) {
  NodeStore other_store(8 << 20, 8 << 20);
  DataServerOptions o;
  o.auth_token = kSecret;
  DataServer other(&other_store, o);
  ASSERT_TRUE(other.Start().ok());
  DataClient client(address(), {.timeout = 2 * kSecond, .auth_token = kSecret});
  ASSERT_TRUE(client.Put({3, 7}, std::string(10'000, 'z')).ok());
  absl::Status st = client.CopyTo({3, 7}, "127.0.0.1:" + std::to_string(other.port()));
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(other_store.stats().objects, 1u);
  other.Stop();
}

TEST(ShmAuthTest, HelloWithoutTheClusterTokenIsRefused) {
  const std::string path =
      (myriad::testing::TestTempDir() / "auth.sock").string();
  NodeStore store(uint64_t{16} << 20, uint64_t{8} << 20, /*shareable=*/true);
  ShmServerOptions so;
  so.path = path;
  so.token = 42;
  so.auth_token = kSecret;
  ShmServer shm(&store, so);
  ASSERT_TRUE(shm.Start().ok());
  auto none = ShmChannel::Connect(path, 42, 2 * kSecond);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated) << none.status();
  auto wrong = ShmChannel::Connect(path, 42, 2 * kSecond, shm::kDefaultSpin, "guess");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated) << wrong.status();
  auto good = ShmChannel::Connect(path, 42, 2 * kSecond, shm::kDefaultSpin, kSecret);
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_TRUE((*good)->Put({1, 1}, "local").ok());
  good->reset();
  shm.Stop();
}

// A whole cluster with the token: nodes register, clients put and get, and a repair pushes
// an object from node to node; a client without it gets nothing.
TEST(ClusterAuthTest, EveryPartCarriesTheToken) {
  KvCluster c(KvCluster::Defaults(), kSecret);
  for (NodeId n = 1; n <= 3; ++n) c.AddNode(n, "rack-" + std::to_string(n));
  auto client = StoreClient::Connect(
      c.url(), {.master_timeout = 2 * kSecond, .node_timeout = 2 * kSecond, .auth_token = kSecret});
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->master().CreateNamespace("ns").ok());
  const std::vector<BlockKey> run = Chain(77, 2);
  ASSERT_TRUE((*client)->Put("ns", run, std::string(50'000, 'q'), 2).ok());
  auto got = (*client)->Get("ns", run.back());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string(50'000, 'q'));

  auto intruder = StoreClient::Connect(c.url(), {.master_timeout = 2 * kSecond, .node_timeout = 2 * kSecond});
  ASSERT_TRUE(intruder.ok());
  EXPECT_EQ((*intruder)->Get("ns", run.back()).status().code(), absl::StatusCode::kUnauthenticated);

  auto lookup = (*client)->master().Get("ns", run);
  ASSERT_TRUE(lookup.ok());
  const NodeId lost = (*lookup)[0].replicas[0].node;
  c.node(lost).Stop();
  RepairAgentOptions ao;
  ao.master_url = c.url();
  ao.poll_interval = 50 * kMillisecond;
  ao.auth_token = kSecret;
  RepairAgent agent(ao);
  ASSERT_TRUE(agent.Start().ok());
  EXPECT_TRUE(WaitFor([&] { return agent.stats().done == 1; }, 8 * kSecond));
  agent.Stop();
  EXPECT_EQ(agent.stats().failed, 0u);
}

// The CLI: a master started with --auth-token-file refuses a put without it (exit 1, the
// master's 401 named) and takes one with it; a bad token file is bad input (exit 2).
TEST(CliAuthTest, ClientCommandsCarryTheTokenFile) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string token = dir.Write("token", std::string(kSecret) + "\n");
  MasterServerOptions o;
  o.auth_token = kSecret;
  MasterServer server(o);
  ASSERT_TRUE(server.Start().ok());
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  net::HttpClient http({"127.0.0.1", server.port()});
  auto node = http.Request("POST", "/v1/nodes", R"({"id":1,"fault_domain":"a","capacity_bytes":1048576})",
                           "application/json", AuthHeaders(kSecret));
  ASSERT_TRUE(node.ok());
  ASSERT_EQ(node->status, 201) << node->body;
  const std::string put = fmt::format(
      "kvstore put --master {} --namespace n --keys 0x1 --size 10 --create-namespace", url);
  auto refused = myriad::testing::RunMyriad(put);
  EXPECT_EQ(refused.code, 1) << refused.out;
  EXPECT_NE(refused.out.find("answered 401"), std::string::npos) << refused.out;
  auto accepted = myriad::testing::RunMyriad(put + " --auth-token-file " + token);
  EXPECT_EQ(accepted.code, 0) << accepted.out;
  auto from_env = myriad::testing::RunMyriad(fmt::format("kvstore stat --master {}", url),
                                             fmt::format("MYRIAD_KVSTORE_TOKEN={}", kSecret));
  EXPECT_EQ(from_env.code, 0) << from_env.out;
  auto bad = myriad::testing::RunMyriad(
      fmt::format("kvstore stat --master {} --auth-token-file {}", url, dir.Write("e", "")));
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("the token is empty"), std::string::npos) << bad.out;
  server.Stop();
}

}  // namespace
}  // namespace myriad::kvstore
