// Backend discovery against a REAL etcd (Debian's etcd-server) started on loopback by the tests
// themselves, and the gateway end to end with an emulated engine registered through etcd.
// Without an etcd binary the tests are skipped, or fail when CI is set.
#include "gateway/etcd_discovery.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "core/strings.h"
#include "emu/emu_server.h"
#include "gateway/etcd_codec.h"
#include "gateway/etcd_register.h"
#include "gateway/gateway.h"
#include "net/http_client.h"
#include "../test_util/etcd_process.h"

namespace myriad::gateway {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

using test::EtcdProcess;
using test::FindEtcd;
using test::FreePort;
using test::WaitUntil;

// Everything the callbacks delivered.
struct Recorder {
  std::mutex mu;
  std::map<std::string, BackendConfig> live;  // what a gateway would now have
  std::vector<std::string> puts, deletes, errors;

  EtcdDiscoveryCallbacks Callbacks() {
    EtcdDiscoveryCallbacks cb;
    cb.on_put = [this](BackendConfig b) {
      std::lock_guard l(mu);
      puts.push_back(b.name);
      live[b.name] = std::move(b);
    };
    cb.on_delete = [this](const std::string& name) {
      std::lock_guard l(mu);
      deletes.push_back(name);
      live.erase(name);
    };
    cb.on_error = [this](absl::Status st) {
      std::lock_guard l(mu);
      errors.push_back(std::string(st.message()));
    };
    return cb;
  }
  bool Has(const std::string& name, const std::string& url = "") {
    std::lock_guard l(mu);
    auto it = live.find(name);
    return it != live.end() && (url.empty() || it->second.url == url);
  }
  size_t Size() {
    std::lock_guard l(mu);
    return live.size();
  }
  size_t Errors() {
    std::lock_guard l(mu);
    return errors.size();
  }
  bool ErrorMentions(const std::string& text) {
    std::lock_guard l(mu);
    for (const auto& e : errors) {
      if (e.find(text) != std::string::npos) return true;
    }
    return false;
  }
};

BackendConfig Reg(std::string name, uint16_t port, std::string model = "m") {
  BackendConfig b;
  b.name = std::move(name);
  b.url = fmt::format("http://127.0.0.1:{}", port);
  b.model = std::move(model);
  return b;
}

absl::Status PutRaw(const std::string& endpoint, const std::string& key, const std::string& value) {
  auto c = net::HttpClient::FromUrl(endpoint);
  if (!c.ok()) return c.status();
  auto r = (*c)->Post("/v3/kv/put", json({{"key", absl::Base64Escape(key)},
                                          {"value", absl::Base64Escape(value)}})
                                        .dump());
  if (!r.ok()) return r.status();
  return r->status == 200 ? absl::OkStatus() : absl::UnavailableError(r->body);
}

// An emulated engine serving "emu-model", started; null (and a test failure) if it cannot start.
std::unique_ptr<emu::EmuServer> StartEmu() {
  emu::EmuOptions eo;
  eo.engine.speed = 50;
  eo.served_model_name = "emu-model";
  auto emu = emu::EmuServer::Create(eo);
  EXPECT_TRUE(emu.ok()) << emu.status();
  if (!emu.ok() || !(*emu)->Start().ok()) return nullptr;
  return *std::move(emu);
}

EtcdDiscoveryOptions Options(const std::string& endpoint, const std::string& prefix) {
  EtcdDiscoveryOptions o;
  o.endpoint = endpoint;
  o.prefix = prefix;
  o.connect_timeout = 500 * kMillisecond;
  o.request_timeout = 1 * kSecond;
  o.initial_backoff = 20 * kMillisecond;
  o.max_backoff = 200 * kMillisecond;
  return o;
}

// One etcd for the suite; each test uses its own prefix.
class EtcdDiscoveryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string bin = EtcdProcess::Binary();
    if (bin.empty()) return;
    etcd_ = new EtcdProcess(bin);
    start_status_ = new absl::Status(etcd_->Start());
  }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
    delete start_status_;
    start_status_ = nullptr;
  }
  void SetUp() override {
    if (etcd_ == nullptr) {
      if (std::getenv("CI") != nullptr) FAIL() << "etcd not found (install etcd-server)";
      GTEST_SKIP() << "etcd not found (install etcd-server; scripts/setup.sh does)";
    }
    ASSERT_TRUE(start_status_->ok()) << *start_status_;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    prefix_ = fmt::format("/myriad/test/{}/", info->name());
  }
  std::string endpoint() const { return etcd_->endpoint(); }

  static EtcdProcess* etcd_;
  static absl::Status* start_status_;
  std::string prefix_;
};
EtcdProcess* EtcdDiscoveryTest::etcd_ = nullptr;
absl::Status* EtcdDiscoveryTest::start_status_ = nullptr;

TEST(EtcdCodecTest, RangeEndIsThePrefixWithItsLastByteIncremented) {
  EXPECT_EQ(EtcdPrefixRangeEnd("/a/"), "/a0");
  EXPECT_EQ(EtcdPrefixRangeEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(EtcdPrefixRangeEnd(std::string("\xff\xff", 2)), std::string(1, '\0'));
}

TEST(EtcdCodecTest, RegistrationsRoundTripAndErrorsNameTheKeyAndField) {
  BackendConfig b = Reg("x", 9);
  b.role = BackendRole::kDecode;
  b.dp_ranks = 4;
  b.kv_events = "tcp://127.0.0.1:5557";
  auto d = DecodeRegistration("/p/x", EncodeRegistration(b));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->role, BackendRole::kDecode);
  EXPECT_EQ(d->dp_ranks, 4);
  EXPECT_EQ(d->kv_events, "tcp://127.0.0.1:5557");
  auto named = DecodeRegistration("/p/from-key", R"({"url":"http://h:1","model":"m"})");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->name, "from-key");
  auto bad = DecodeRegistration("/p/y", R"({"url":"http://h:1","model":"m","dp_ranks":"2"})");
  EXPECT_NE(bad.status().message().find("'/p/y': dp_ranks"), std::string::npos) << bad.status();
  auto many = DecodeRegistration("/p/w", R"({"url":"http://h:1","model":"m","dp_ranks":5000})");
  EXPECT_NE(many.status().message().find("dp_ranks: must be in [1, 4096]"), std::string::npos) << many.status();
  auto role = DecodeRegistration("/p/z", R"({"url":"http://h:1","model":"m","role":"both"})");
  EXPECT_NE(role.status().message().find("role"), std::string::npos);
}

// A rollout splits by version, so a registered engine says which version it serves.
TEST(EtcdCodecTest, RegistrationsCarryTheModelVersionAndRefuseABadOne) {
  BackendConfig b = Reg("x", 9);
  b.version = "v2";
  auto d = DecodeRegistration("/p/x", EncodeRegistration(b));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->version, "v2");
  EXPECT_EQ(DecodeRegistration("/p/x", EncodeRegistration(Reg("x", 9)))->version, "");
  auto bad = DecodeRegistration("/p/v", R"({"url":"http://h:1","model":"m","version":"v 2"})");
  EXPECT_NE(bad.status().message().find("'/p/v': version"), std::string::npos) << bad.status();
}

// Any bytes can sit under the discovery prefix; a name that is not printable UTF-8 would
// reach JSON logs and answers (nlohmann throws on it) and Prometheus labels.
TEST(EtcdCodecTest, KeyThatIsNotUtf8IsRefusedWithAnEscapedName) {
  auto bad = DecodeRegistration(std::string("/p/a\xff\xfe", 6), R"({"url":"http://h:1","model":"m"})");
  ASSERT_FALSE(bad.ok());
  const std::string msg(bad.status().message());
  EXPECT_TRUE(IsValidUtf8(msg)) << msg;
  EXPECT_NE(msg.find("not printable UTF-8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a\\xff\\xfe"), std::string::npos) << msg;
  auto ctl = DecodeRegistration("/p/x", R"({"name":"a\u0007b","url":"http://h:1","model":"m"})");
  EXPECT_FALSE(ctl.ok());
  EXPECT_TRUE(DecodeRegistration("/p/\xc3\xa9t\xc3\xa9", R"({"url":"http://h:1","model":"m"})").ok());
}

TEST(StringsTest, IsValidUtf8FollowsRfc3629) {
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));  // e-acute, euro, emoji
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf"));      // overlong, three bytes
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // truncated
  EXPECT_FALSE(IsValidUtf8("a\x80"));              // a lone continuation byte
}

TEST(EtcdCodecTest, LineSplitterJoinsAndSplitsChunks) {
  LineSplitter s;
  auto a = s.Feed("{\"a\":1}\n{\"b\"");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, std::vector<std::string>{"{\"a\":1}"});
  auto b = s.Feed(":2}\r\n\n{\"c\":3}\n");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<std::string>{"{\"b\":2}", "{\"c\":3}"}));
}

TEST(EtcdCodecTest, WatchLinesDecodeEventsCancellationsAndErrors) {
  const std::string key = absl::Base64Escape("/p/a");
  const std::string value = absl::Base64Escape(R"({"url":"http://h:1","model":"m"})");
  auto m = DecodeWatchLine(fmt::format(
      R"({{"result":{{"header":{{"revision":"7"}},"events":[{{"kv":{{"key":"{}","value":"{}","mod_revision":"6"}}}},{{"type":"DELETE","kv":{{"key":"{}","mod_revision":"7"}}}}]}}}})",
      key, value, key));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->revision, 7);
  ASSERT_EQ(m->events.size(), 2u);
  EXPECT_FALSE(m->events[0].is_delete);
  EXPECT_EQ(m->events[0].kv.key, "/p/a");
  EXPECT_EQ(m->events[0].kv.mod_revision, 6);
  EXPECT_TRUE(m->events[1].is_delete);
  auto compacted = DecodeWatchLine(R"({"result":{"header":{"revision":"9"},"compact_revision":"5"}})");
  ASSERT_TRUE(compacted.ok());
  EXPECT_TRUE(compacted->canceled);
  EXPECT_FALSE(DecodeWatchLine(R"({"error":{"grpc_code":14,"message":"unavailable"}})").ok());
  EXPECT_FALSE(DecodeWatchLine("{not json").ok());
  EXPECT_FALSE(DecodeWatchLine(R"({"result":{"events":[{"kv":{"key":"%%%"}}]}})").ok());
  auto range = DecodeRange(R"({"header":{"revision":"3"},"kvs":[{"key":")" + key + R"(","value":")" +
                           value + R"("}],"count":"1"})");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->revision, 3);
  ASSERT_EQ(range->kvs.size(), 1u);
  EXPECT_EQ(range->kvs[0].value, R"({"url":"http://h:1","model":"m"})");
}

TEST_F(EtcdDiscoveryTest, InitialListDeliversExistingRegistrations) {
  BackendConfig a = Reg("a", 1001);
  a.role = BackendRole::kPrefill;
  a.dp_ranks = 8;
  a.kv_events = "tcp://127.0.0.1:5557";
  ASSERT_TRUE(EtcdRegister(endpoint(), prefix_, a, 0).ok());
  ASSERT_TRUE(EtcdRegister(endpoint(), prefix_, Reg("b", 1002), 0).ok());
  // The name defaults to the key's last element; a neighbouring prefix is not ours.
  ASSERT_TRUE(PutRaw(endpoint(), prefix_ + "c", R"({"url":"http://127.0.0.1:1003","model":"m"})").ok());
  ASSERT_TRUE(EtcdRegister(endpoint(), prefix_.substr(0, prefix_.size() - 1) + "x/", Reg("other", 1), 0).ok());

  Recorder rec;
  EtcdDiscovery d;
  ASSERT_TRUE(d.Start(Options(endpoint(), prefix_), rec.Callbacks()).ok());
  ASSERT_TRUE(d.WaitSynced(5 * kSecond));
  EXPECT_EQ(rec.Size(), 3u);
  std::lock_guard l(rec.mu);
  ASSERT_TRUE(rec.live.contains("a") && rec.live.contains("b") && rec.live.contains("c"));
  EXPECT_EQ(rec.live["a"].role, BackendRole::kPrefill);
  EXPECT_EQ(rec.live["a"].dp_ranks, 8);
  EXPECT_EQ(rec.live["a"].kv_events, "tcp://127.0.0.1:5557");
  EXPECT_EQ(rec.live["c"].url, "http://127.0.0.1:1003");
  EXPECT_TRUE(rec.errors.empty());
}

TEST_F(EtcdDiscoveryTest, PutsUpdatesAndDeletesAfterStartArrive) {
  Recorder rec;
  EtcdDiscovery d;
  ASSERT_TRUE(d.Start(Options(endpoint(), prefix_), rec.Callbacks()).ok());
  ASSERT_TRUE(d.WaitSynced(5 * kSecond));
  EXPECT_EQ(rec.Size(), 0u);
  ASSERT_TRUE(EtcdRegister(endpoint(), prefix_, Reg("n", 2001), 0).ok());
  ASSERT_TRUE(WaitUntil([&] { return rec.Has("n", "http://127.0.0.1:2001"); }));
  ASSERT_TRUE(EtcdRegister(endpoint(), prefix_, Reg("n", 2002), 0).ok());
  ASSERT_TRUE(WaitUntil([&] { return rec.Has("n", "http://127.0.0.1:2002"); }));
  ASSERT_TRUE(EtcdDeregister(endpoint(), prefix_, "n").ok());
  ASSERT_TRUE(WaitUntil([&] { return !rec.Has("n"); }));
  std::lock_guard l(rec.mu);
  EXPECT_EQ(rec.puts.size(), 2u);
  EXPECT_EQ(rec.deletes, std::vector<std::string>{"n"});
}

TEST_F(EtcdDiscoveryTest, InvalidValuesAreReportedNamingTheKeyAndSkipped) {
  ASSERT_TRUE(PutRaw(endpoint(), prefix_ + "junk", "not json").ok());
  Recorder rec;
  EtcdDiscovery d;
  ASSERT_TRUE(d.Start(Options(endpoint(), prefix_), rec.Callbacks()).ok());
  ASSERT_TRUE(d.WaitSynced(5 * kSecond));
  EXPECT_TRUE(rec.ErrorMentions(prefix_ + "junk")) << "listed invalid value not reported";
  ASSERT_TRUE(PutRaw(endpoint(), prefix_ + "badurl", R"({"url":"ftp://x","model":"m"})").ok());
  ASSERT_TRUE(WaitUntil([&] { return rec.ErrorMentions(prefix_ + "badurl' : url") ||
                                     rec.ErrorMentions(prefix_ + "badurl': url"); }));
  // The stream goes on: a valid registration after them still arrives, and nothing else did.
  ASSERT_TRUE(EtcdRegister(endpoint(), prefix_, Reg("good", 3001), 0).ok());
  ASSERT_TRUE(WaitUntil([&] { return rec.Has("good"); }));
  EXPECT_EQ(rec.Size(), 1u);
}

TEST_F(EtcdDiscoveryTest, LeasedRegistrationGoesWithItsLease) {
  Recorder rec;
  EtcdDiscovery d;
  ASSERT_TRUE(d.Start(Options(endpoint(), prefix_), rec.Callbacks()).ok());
  auto lease = EtcdRegister(endpoint(), prefix_, Reg("leased", 4001), 30);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_NE(*lease, 0);
  ASSERT_TRUE(WaitUntil([&] { return rec.Has("leased"); }));
  EXPECT_TRUE(EtcdKeepAlive(endpoint(), *lease).ok());
  // Revoking the lease (what its expiry does) deletes the key.
  auto c = net::HttpClient::FromUrl(endpoint());
  ASSERT_TRUE(c.ok());
  auto r = (*c)->Post("/v3/lease/revoke", json({{"ID", std::to_string(*lease)}}).dump());
  ASSERT_TRUE(r.ok() && r->status == 200);
  ASSERT_TRUE(WaitUntil([&] { return !rec.Has("leased"); }));
  EXPECT_EQ(EtcdKeepAlive(endpoint(), *lease).code(), absl::StatusCode::kNotFound);
}

TEST_F(EtcdDiscoveryTest, StopIsPrompt) {
  Recorder rec;
  {
    EtcdDiscovery d;  // watching
    ASSERT_TRUE(d.Start(Options(endpoint(), prefix_), rec.Callbacks()).ok());
    ASSERT_TRUE(d.WaitSynced(5 * kSecond));
    const auto t0 = Clock::now();
    d.Stop();
    EXPECT_LT(Clock::now() - t0, 500ms);
  }
  {
    // etcd unreachable: between attempts, with a long backoff.
    EtcdDiscoveryOptions o = Options(fmt::format("http://127.0.0.1:{}", FreePort()), prefix_);
    o.initial_backoff = o.max_backoff = 60 * kSecond;
    EtcdDiscovery d;
    ASSERT_TRUE(d.Start(o, rec.Callbacks()).ok());
    ASSERT_TRUE(WaitUntil([&] { return rec.Errors() > 0; }));
    const auto t0 = Clock::now();
    d.Stop();
    EXPECT_LT(Clock::now() - t0, 500ms);
  }
  {
    // A range request in flight to a server that never answers (a socket that listens but
    // never accepts: the kernel completes the handshake), with a long request timeout.
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(listen(fd, 8), 0);
    ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
    EtcdDiscoveryOptions o = Options(fmt::format("http://127.0.0.1:{}", ntohs(a.sin_port)), prefix_);
    o.request_timeout = 60 * kSecond;
    EtcdDiscovery d;
    ASSERT_TRUE(d.Start(o, rec.Callbacks()).ok());
    EXPECT_FALSE(d.WaitSynced(50 * kMillisecond));
    const auto t0 = Clock::now();
    d.Stop();
    EXPECT_LT(Clock::now() - t0, 500ms);
    close(fd);
  }
}

TEST_F(EtcdDiscoveryTest, StartChecksItsOptions) {
  EtcdDiscovery d;
  EXPECT_NE(d.Start(Options("localhost", prefix_), {}).message().find("etcd_endpoint"), std::string::npos);
  EXPECT_NE(d.Start(Options(endpoint(), ""), {}).message().find("etcd_prefix"), std::string::npos);
}

// Its own etcd: it is killed. While the watcher cannot reach it, a registration is removed and
// another added (through a second client port the watcher does not know); once etcd is back on
// the watcher's port, the re-list must apply both, and the new watch must work.
TEST(EtcdDiscoveryRestartTest, RecoversAfterEtcdRestartAndSeesChangesMadeMeanwhile) {
  const std::string bin = EtcdProcess::Binary();
  if (bin.empty()) {
    if (std::getenv("CI") != nullptr) FAIL() << "etcd not found (install etcd-server)";
    GTEST_SKIP() << "etcd not found";
  }
  EtcdProcess etcd(bin);
  ASSERT_TRUE(etcd.Start().ok());
  const std::string prefix = "/myriad/backends/";
  ASSERT_TRUE(EtcdRegister(etcd.endpoint(), prefix, Reg("old", 5001), 0).ok());
  Recorder rec;
  EtcdDiscovery d;
  ASSERT_TRUE(d.Start(Options(etcd.endpoint(), prefix), rec.Callbacks()).ok());
  ASSERT_TRUE(d.WaitSynced(5 * kSecond));
  ASSERT_TRUE(rec.Has("old"));

  etcd.Kill();
  ASSERT_TRUE(WaitUntil([&] { return rec.Errors() > 0; }));  // the watch dropped
  const uint16_t side_port = FreePort();
  ASSERT_TRUE(etcd.Start(side_port).ok());
  const std::string side = fmt::format("http://127.0.0.1:{}", side_port);
  ASSERT_TRUE(EtcdDeregister(side, prefix, "old").ok());
  ASSERT_TRUE(EtcdRegister(side, prefix, Reg("new", 5002), 0).ok());
  etcd.Kill();
  EXPECT_TRUE(rec.Has("old"));  // it could not have known

  ASSERT_TRUE(etcd.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return !rec.Has("old") && rec.Has("new"); }));
  ASSERT_TRUE(EtcdRegister(etcd.endpoint(), prefix, Reg("after", 5003), 0).ok());
  ASSERT_TRUE(WaitUntil([&] { return rec.Has("after"); }));
  EXPECT_GE(d.stats().lists, 2u);
  d.Stop();
}

// The gateway with no static backends, fed by discovery: an engine registered in etcd serves
// completions; deregistered, it no longer does.
TEST_F(EtcdDiscoveryTest, GatewayServesBackendsRegisteredInEtcd) {
  auto emu = StartEmu();
  ASSERT_NE(emu, nullptr);

  GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.health_interval = 50 * kMillisecond;
  c.scrape_interval = 50 * kMillisecond;
  c.health_timeout = 200 * kMillisecond;
  c.access_log = "";
  auto gw = Gateway::Create(c);
  ASSERT_TRUE(gw.ok()) << gw.status();
  ASSERT_TRUE((*gw)->Start().ok());
  Gateway* g = gw->get();

  EtcdDiscoveryCallbacks cb;
  std::mutex mu;
  std::vector<std::string> errors;
  cb.on_put = [&](BackendConfig b) {
    if (absl::Status st = g->AddBackend(std::move(b), /*from_etcd=*/true); !st.ok()) {
      std::lock_guard l(mu);
      errors.push_back(std::string(st.message()));
    }
  };
  cb.on_delete = [&](const std::string& name) { g->RemoveBackend(name); };
  EtcdDiscovery d;
  ASSERT_TRUE(d.Start(Options(endpoint(), prefix_), cb).ok());
  ASSERT_TRUE(d.WaitSynced(5 * kSecond));

  BackendConfig b = Reg("emu0", emu->port(), "emu-model");
  auto lease = EtcdRegister(endpoint(), prefix_, b, 30);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(WaitUntil([&] { return g->BackendNames() == std::vector<std::string>{"emu0"}; }));

  net::HttpClient client(net::HostPort{"127.0.0.1", g->port()});
  const std::string req =
      json({{"model", "emu-model"}, {"prompt", "hello etcd"}, {"max_tokens", 3}}).dump();
  auto r = client.Post("/v1/completions", req);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["usage"]["completion_tokens"], 3);
  const std::string* served_by = net::FindHeader(r->headers, "X-Myriad-Backend");
  ASSERT_NE(served_by, nullptr);
  EXPECT_EQ(*served_by, "emu0");

  ASSERT_TRUE(EtcdDeregister(endpoint(), prefix_, "emu0", *lease).ok());
  ASSERT_TRUE(WaitUntil([&] { return g->BackendNames().empty(); }));
  auto gone = client.Post("/v1/completions", req);
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_TRUE(gone->status == 404 || gone->status == 503) << gone->status << " " << gone->body;
  d.Stop();
  g->Stop();
  emu->Stop();
  std::lock_guard l(mu);
  EXPECT_TRUE(errors.empty()) << errors.front();
}

// One bad key under the prefix used to abort every gateway watching it (and again on each
// restart): the registration is refused and logged, the gateway serves the good ones.
TEST_F(EtcdDiscoveryTest, GatewaySurvivesAKeyThatIsNotUtf8) {
  auto emu = StartEmu();
  ASSERT_NE(emu, nullptr);
  const std::string url = fmt::format("http://127.0.0.1:{}", emu->port());
  ASSERT_TRUE(PutRaw(endpoint(), prefix_ + std::string("bad\xff\xfe", 5),
                     json({{"url", url}, {"model", "emu-model"}}).dump())
                  .ok());

  GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.health_interval = 50 * kMillisecond;
  c.scrape_interval = 50 * kMillisecond;
  c.health_timeout = 200 * kMillisecond;
  c.etcd_endpoint = endpoint();
  c.etcd_prefix = prefix_;
  auto clock = std::make_shared<ManualClock>();
  auto gw = Gateway::Create(c, clock);
  ASSERT_TRUE(gw.ok()) << gw.status();
  std::mutex mu;
  std::vector<std::string> log;
  (*gw)->set_access_log([&](const std::string& line) {
    std::lock_guard l(mu);
    log.push_back(line);
  });
  ASSERT_TRUE((*gw)->Start().ok());
  Gateway* g = gw->get();
  ASSERT_TRUE(PutRaw(endpoint(), prefix_ + "good", json({{"url", url}, {"model", "emu-model"}}).dump()).ok());
  ASSERT_TRUE(WaitUntil([&] { return g->BackendNames() == std::vector<std::string>{"good"}; }));
  // Past a health round and a scrape (one round, in virtual time): the name reaches no JSON writer.
  clock->Advance(c.health_interval);
  ASSERT_TRUE(clock->AwaitSleepers(1));
  net::HttpClient client(net::HostPort{"127.0.0.1", g->port()});
  auto r = client.Post("/v1/completions",
                       json({{"model", "emu-model"}, {"prompt", "hi"}, {"max_tokens", 2}}).dump());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200) << r->body;
  auto list = client.Get("/admin/backends");
  ASSERT_TRUE(list.ok()) << list.status();
  {
    std::lock_guard l(mu);
    bool refused = false;
    for (const auto& line : log) refused |= line.find("not printable UTF-8") != std::string::npos;
    EXPECT_TRUE(refused);
  }
  g->Stop();
  emu->Stop();
}

}  // namespace
}  // namespace myriad::gateway
