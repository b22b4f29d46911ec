// A model rollout through a client's eyes: emulated engines of two versions behind the
// gateway, the canary's share split by policy/rollout.h's hash, conversations kept on one
// version, the share changed through the admin API, and a canary without engines falling back.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "../test_util/promtool.h"
#include "gateway_test_util.h"
#include "net/url_path.h"

namespace myriad::gateway {
namespace {

using namespace gwtest;

// Two stable engines (v1: s0, s1) and one canary engine (v2: c0) of emu-model.
struct RolloutGateway {
  std::vector<std::unique_ptr<emu::EmuServer>> emus;
  std::unique_ptr<Harness> h;
  net::AsyncHttpClient ac;

  explicit RolloutGateway(double share, bool canary_engine = true, std::vector<RolloutConfig> more = {},
                          GatewayConfig c = {}) {
    c.admin_token = "admin";
    int n = 0;
    for (const char* v : {"v1", "v1", "v2"}) {
      if (!canary_engine && std::string(v) == "v2") continue;
      emus.push_back(StartEmu());
      BackendConfig b = EmuBackend(fmt::format("{}{}", std::string(v) == "v1" ? "s" : "c", n++), emus.back()->port());
      b.version = v;
      c.backends.push_back(b);
    }
    c.rollouts.push_back(RolloutConfig{.model = "emu-model", .stable = "v1", .canary = "v2", .share = share});
    for (RolloutConfig& ro : more) c.rollouts.push_back(std::move(ro));
    h = std::make_unique<Harness>(0, c);
  }
  ~RolloutGateway() {
    h.reset();
    for (auto& e : emus) e->Stop();
  }
  // One request with the OpenAI `user` field (empty: none); returns its access-log line.
  json Request(const std::string& user, size_t nth) {
    json body = {{"model", "emu-model"}, {"prompt", "hello rollout"}, {"max_tokens", 1}};
    if (!user.empty()) body["user"] = user;
    const CallResult r = Send(ac, h->gw->port(), "POST", "/v1/completions", body.dump(), "");
    EXPECT_EQ(r.status, 200) << r.body;
    return h->RequestLog(nth);
  }
  CallResult Admin(const std::string& method, const std::string& target, const std::string& body,
                   const std::string& token = "admin") {
    return Send(ac, h->gw->port(), method, target, body, token);
  }
};

TEST(GatewayRollout, TheCanaryShareHoldsAndEachVersionIsServedByItsOwnEngines) {
  RolloutGateway g(0.25);
  constexpr int kRequests = 200;
  std::map<std::string, int> by_version;
  for (int i = 1; i <= kRequests; ++i) {
    const json line = g.Request(fmt::format("user-{}", i), static_cast<size_t>(i));
    const std::string version = line.value("version", "");
    const std::string backend = line.value("backend", "");
    ++by_version[version];
    // The routing policy chooses within the version only.
    EXPECT_EQ(backend[0], version == "v2" ? 'c' : 's') << line.dump();
  }
  // The split is a hash of the user key: deterministic, near the share.
  EXPECT_NEAR(by_version["v2"] / static_cast<double>(kRequests), 0.25, 0.08);
  EXPECT_EQ(by_version["v1"] + by_version["v2"], kRequests);
  // The windows the controller judges from, and the bounded metrics.
  const CallResult list = g.Admin("GET", "/admin/rollouts", "");
  ASSERT_EQ(list.status, 200) << list.body;
  const json ro = json::parse(list.body)["rollouts"][0];
  EXPECT_EQ(ro["versions"]["v2"]["requests"].get<int>(), by_version["v2"]);
  EXPECT_EQ(ro["versions"]["v1"]["requests"].get<int>(), by_version["v1"]);
  auto metrics = g.h->Client().Get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("myriad_gateway_rollout_canary_share{model=\"emu-model\"} 0.25"), std::string::npos);
  EXPECT_NE(metrics->body.find("myriad_gateway_version_requests_total{model=\"emu-model\",version=\"v2\""),
            std::string::npos);
  EXPECT_TRUE(myriad::testing::PromtoolComplaints(metrics->body).empty());
}

// The windows the controller judges count a request within the SLO only if its first token
// came within routing.ttft_slo and its stream's time per output token within routing.tpot_slo
// (policy::MeetsSlo, the simulator's verdict): a canary whose every token is slow fails it while
// its first token is in time.
TEST(GatewayRollout, TheSloVerdictHoldsTheStreamToTheTpotTarget) {
  GatewayConfig c;
  c.ttft_slo = 60 * kSecond;
  c.tpot_slo = 50 * kMillisecond;
  RolloutGateway g(0.5, true, {}, c);
  emu::Fault slow;
  slow.kind = emu::Fault::Kind::kSlow;
  slow.factor = 1000;
  g.emus[2]->SetFault(slow);
  std::map<std::string, int> by_version;
  for (int i = 1; i <= 12; ++i) {
    json body = {{"model", "emu-model"}, {"prompt", "hello rollout"}, {"max_tokens", 4}, {"stream", true},
                 {"user", fmt::format("user-{}", i)}};
    const CallResult r = Send(g.ac, g.h->gw->port(), "POST", "/v1/completions", body.dump(), "");
    ASSERT_EQ(r.status, 200) << r.body;
    ++by_version[g.h->RequestLog(static_cast<size_t>(i)).value("version", "")];
  }
  ASSERT_GT(by_version["v2"], 0);
  ASSERT_GT(by_version["v1"], 0);
  const CallResult list = g.Admin("GET", "/admin/rollouts", "");
  ASSERT_EQ(list.status, 200) << list.body;
  const json versions = json::parse(list.body)["rollouts"][0]["versions"];
  EXPECT_EQ(versions["v1"]["slo_met"].get<int>(), by_version["v1"]) << versions.dump();
  EXPECT_EQ(versions["v2"]["requests"].get<int>(), by_version["v2"]) << versions.dump();
  EXPECT_EQ(versions["v2"]["slo_met"].get<int>(), 0) << versions.dump();
}

TEST(GatewayRollout, AConversationStaysOnOneVersion) {
  RolloutGateway g(0.5);
  std::map<std::string, std::set<std::string>> versions_of;
  size_t n = 0;
  for (int round = 0; round < 5; ++round) {
    for (int u = 0; u < 8; ++u) {
      const std::string user = fmt::format("conversation-{}", u);
      versions_of[user].insert(g.Request(user, ++n).value("version", ""));
    }
  }
  std::set<std::string> all;
  for (const auto& [user, vs] : versions_of) {
    EXPECT_EQ(vs.size(), 1u) << user;
    all.insert(vs.begin(), vs.end());
  }
  EXPECT_EQ(all.size(), 2u);  // eight conversations at half the share: both versions serve
}

TEST(GatewayRollout, TheAdminApiChangesTheShareRollsBackAndPromotes) {
  RolloutGateway g(0);
  size_t n = 0;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(g.Request(fmt::format("u{}", i), ++n).value("version", ""), "v1");
  EXPECT_EQ(g.Admin("POST", "/admin/rollouts/emu-model", R"({"share":1})", "").status, 401);
  const CallResult all = g.Admin("POST", "/admin/rollouts/emu-model", R"({"share":1})");
  ASSERT_EQ(all.status, 200) << all.body;
  EXPECT_EQ(json::parse(all.body)["share"].get<double>(), 1.0);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(g.Request(fmt::format("u{}", i), ++n).value("version", ""), "v2");
  ASSERT_EQ(g.Admin("POST", "/admin/rollouts/emu-model", R"({"action":"rollback"})").status, 200);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(g.Request(fmt::format("u{}", i), ++n).value("version", ""), "v1");
  // Bad changes name what is wrong and change nothing.
  const CallResult over = g.Admin("POST", "/admin/rollouts/emu-model", R"({"share":1.5})");
  EXPECT_EQ(over.status, 400);
  EXPECT_NE(over.body.find("share: 1.5 is not in [0, 1]"), std::string::npos) << over.body;
  EXPECT_EQ(g.Admin("POST", "/admin/rollouts/emu-model", R"({"action":"yes"})").status, 400);
  EXPECT_EQ(g.Admin("POST", "/admin/rollouts/emu-model", "not json").status, 400);
  const CallResult unknown = g.Admin("POST", "/admin/rollouts/other", R"({"share":0.1})");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.find("no rollout of model 'other'"), std::string::npos) << unknown.body;
  const CallResult promoted = g.Admin("POST", "/admin/rollouts/emu-model", R"({"action":"promote"})");
  ASSERT_EQ(promoted.status, 200) << promoted.body;
  EXPECT_EQ(json::parse(promoted.body)["stable"], "v2");
  EXPECT_TRUE(json::parse(promoted.body)["promoted"].get<bool>());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(g.Request(fmt::format("u{}", i), ++n).value("version", ""), "v2");
}

// Model names carry '/' and may carry '?', '#', '%' or spaces: the controller sends the name as
// one encoded path segment (net::PathSegment) and the gateway decodes it; a raw "org/model"
// still works, a bad escape is refused by name.
TEST(GatewayRollout, AModelNameWithReservedCharactersIsAddressedAsOneEncodedSegment) {
  const std::string awkward = "org/Model v1?x=1#2%";
  RolloutGateway g(0, true,
                   {RolloutConfig{.model = awkward, .stable = "v1", .canary = "v2", .share = 0},
                    RolloutConfig{.model = "org/plain", .stable = "v1", .canary = "v2", .share = 0}});
  const CallResult encoded = g.Admin("POST", "/admin/rollouts/" + net::PathSegment(awkward), R"({"share":0.5})");
  ASSERT_EQ(encoded.status, 200) << encoded.body;
  EXPECT_EQ(json::parse(encoded.body)["model"], awkward);
  EXPECT_EQ(json::parse(encoded.body)["share"].get<double>(), 0.5);
  const CallResult raw = g.Admin("POST", "/admin/rollouts/org/plain", R"({"share":0.25})");
  ASSERT_EQ(raw.status, 200) << raw.body;
  EXPECT_EQ(json::parse(raw.body)["model"], "org/plain");
  const CallResult bad = g.Admin("POST", "/admin/rollouts/org%2", R"({"share":0.25})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("bad percent-escape in the model name"), std::string::npos) << bad.body;
  // The same for a backend's name in the drain route.
  EXPECT_EQ(g.Admin("POST", "/admin/backends/" + net::PathSegment("s0") + "/drain", "").status, 200);
  EXPECT_EQ(g.Admin("POST", "/admin/backends/s%zz/drain", "").status, 400);
}

TEST(GatewayRollout, ACanaryWithoutEnginesFallsBackToStableAndSaysSo) {
  RolloutGateway g(1.0, /*canary_engine=*/false);
  const json line = g.Request("someone", 1);
  EXPECT_EQ(line.value("version", ""), "v1") << line.dump();
  EXPECT_EQ(line.value("backend", "")[0], 's');
  EXPECT_NE(line.value("version_fallback", "").find("canary has no available backend"), std::string::npos)
      << line.dump();
  auto metrics = g.h->Client().Get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("myriad_gateway_rollout_canary_fallbacks_total{model=\"emu-model\"} 1"),
            std::string::npos);
}

TEST(GatewayRollout, WithinSloTimesTheStreamAfterItsFirstToken) {
  const policy::SloTargets slo{.ttft = 2 * kSecond, .tpot = 100 * kMillisecond};
  // 11 tokens, the first at 0.5 s and the last at 1.5 s: 100 ms each after the first.
  RequestOutcome o;
  o.ok = true;
  o.duration_s = 1.5;
  o.ttft_s = 0.5;
  o.output_tokens = 11;
  EXPECT_EQ(OutcomeTpot(o), 100 * kMillisecond);
  EXPECT_TRUE(WithinSlo(o, slo));
  o.duration_s = 1.6;
  EXPECT_FALSE(WithinSlo(o, slo)) << "110 ms a token";
  o.output_tokens = 1;
  EXPECT_TRUE(WithinSlo(o, slo)) << "one token: no gap to time";
  // Unstreamed: no first-token time, the whole answer held to the TTFT target.
  o.duration_s = 1.9;
  o.ttft_s = -1;
  o.output_tokens = 100;
  EXPECT_EQ(OutcomeTpot(o), -1);
  EXPECT_TRUE(WithinSlo(o, slo));
  o.duration_s = 2.1;
  EXPECT_FALSE(WithinSlo(o, slo));
  auto tpot = ParseGatewayConfig("routing:\n  tpot_slo: 2m\n", "gw.yaml");
  EXPECT_NE(tpot.status().message().find("gw.yaml:2: routing.tpot_slo: must be in [1ms, 1m]"), std::string::npos)
      << tpot.status();
  auto ok = ParseGatewayConfig("routing:\n  tpot_slo: 40ms\n", "gw.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->tpot_slo, 40 * kMillisecond);
}

TEST(GatewayRollout, ConfigErrorsNameTheLineAndKey) {
  auto good = ParseGatewayConfig(
      "backends:\n  - {name: a, url: http://h:1, model: m, version: v1}\n"
      "rollouts:\n  - {model: m, stable: v1, canary: v2, share: 0.05}\n",
      "gw.yaml");
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->backends[0].version, "v1");
  EXPECT_EQ(good->rollouts[0].share, 0.05);
  auto share = ParseGatewayConfig("rollouts:\n  - model: m\n    stable: v1\n    canary: v2\n    share: 2\n", "gw.yaml");
  EXPECT_NE(share.status().message().find("gw.yaml:5"), std::string::npos) << share.status();
  EXPECT_NE(share.status().message().find("rollouts[0].share: 2 is not in [0, 1]"), std::string::npos)
      << share.status();
  auto same = ParseGatewayConfig("rollouts:\n  - {model: m, stable: v1, canary: v1}\n", "gw.yaml");
  EXPECT_NE(same.status().message().find("rollouts[0].canary: 'v1' is the stable version too"), std::string::npos)
      << same.status();
  auto missing = ParseGatewayConfig("rollouts:\n  - {model: m, stable: v1}\n", "gw.yaml");
  EXPECT_NE(missing.status().message().find("rollouts[0].canary"), std::string::npos) << missing.status();
  auto twice = ParseGatewayConfig(
      "rollouts:\n  - {model: m, stable: v1, canary: v2}\n  - {model: m, stable: v1, canary: v3}\n", "gw.yaml");
  EXPECT_NE(twice.status().message().find("rollouts[1].model: a second rollout of model 'm'"), std::string::npos)
      << twice.status();
  auto version = ParseGatewayConfig("backends:\n  - {name: a, url: http://h:1, model: m, version: \"v 1\"}\n",
                                    "gw.yaml");
  EXPECT_NE(version.status().message().find("backends[0]: version"), std::string::npos) << version.status();
}

}  // namespace
}  // namespace myriad::gateway
