// The gateway learns each backend's speed from its first tokens (routing.learn_cost): two
// emulated engines behind it, one as fast as the configured performance model, one 20x
// slower. The emulator, like llama.cpp, sends its response header before it prefills, so
// only the first streamed event tells the two apart.
#include <map>

#include "gateway_test_util.h"

namespace myriad::gateway {
namespace {

using namespace gwtest;

constexpr double kSlowSpeed = 0.05;

std::unique_ptr<emu::EmuServer> StartEmuAt(double speed) {
  emu::EmuOptions o;
  o.engine.speed = speed;  // the gateway's prior below is this engine's model at speed 1
  o.served_model_name = "emu-model";
  auto s = emu::EmuServer::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Start().ok());
  return *std::move(s);
}

struct TwoSpeeds {
  std::unique_ptr<emu::EmuServer> fast = StartEmuAt(1), slow = StartEmuAt(kSlowSpeed);

  std::unique_ptr<Gateway> Start(bool learn) {
    GatewayConfig c;
    c.listen = "127.0.0.1:0";
    c.access_log = "";
    c.admin_token = "admin";
    c.learn_cost = learn;
    c.health_interval = 10 * kSecond;
    c.scrape_interval = 0;
    c.backends = {EmuBackend("fast", fast->port()), EmuBackend("slow", slow->port())};
    auto g = Gateway::Create(c);
    EXPECT_TRUE(g.ok()) << g.status();
    EXPECT_TRUE((*g)->Start().ok());
    return *std::move(g);
  }
  ~TwoSpeeds() {
    fast->Stop();
    slow->Stop();
  }
};

// A streamed completion of `tokens` distinct token ids (nothing cached anywhere); returns the
// backend that served it.
std::string Stream(net::HttpClient& cl, int64_t tokens, int seed) {
  json ids = json::array();
  for (int64_t i = 0; i < tokens; ++i) ids.push_back(100000 + seed * 1000 + i);
  auto r = cl.Post("/v1/completions",
                   json({{"model", "emu-model"}, {"prompt", ids}, {"max_tokens", 2}, {"stream", true}}).dump());
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return "";
  EXPECT_EQ(r->status, 200) << r->body;
  const std::string* b = net::FindHeader(r->headers, "X-Myriad-Backend");
  return b ? *b : "";
}

net::HttpResponse Admin(net::HttpClient& cl, const std::string& method, const std::string& target) {
  auto r = cl.Request(method, target, "", {}, {{"Authorization", "Bearer admin"}});
  EXPECT_TRUE(r.ok() && r->status == 200) << target;
  return r.ok() ? *r : net::HttpResponse{};
}

// Each backend's cost_model from one GET /admin/backends, by name.
std::map<std::string, json> CostModels(net::HttpClient& cl) {
  const json list = json::parse(Admin(cl, "GET", "/admin/backends").body, nullptr, false);
  std::map<std::string, json> out;
  for (const json& b : list.value("backends", json::array())) out[b.value("name", "")] = b.value("cost_model", json());
  return out;
}

json CostModelOf(net::HttpClient& cl, const std::string& backend) { return CostModels(cl)[backend]; }

TEST(GatewayCostModelTest, LearnsEachBackendsSpeedAndRoutesUncachedPromptsToTheFastOne) {
  TwoSpeeds emus;
  auto gw = emus.Start(/*learn=*/true);
  net::HttpClient cl(net::HostPort{"127.0.0.1", gw->port()});
  // Before any sample: the configured model, fully trusted, and no age yet.
  const json before = CostModelOf(cl, "slow");
  ASSERT_TRUE(before.is_object()) << before;
  EXPECT_EQ(before["samples"], 0);
  EXPECT_TRUE(before["last_sample_age_s"].is_null()) << before;
  EXPECT_EQ(before["freshness"], 1.0);
  // Warm-up: each backend in turn, the other drained, prompts of 100-650 tokens.
  int seed = 0;
  for (const auto& [drain, serve] : {std::pair<std::string, std::string>{"fast", "slow"}, {"slow", "fast"}}) {
    Admin(cl, "POST", "/admin/backends/" + drain + "/drain");
    for (int i = 0; i < 12; ++i) EXPECT_EQ(Stream(cl, 100 + 50 * i, ++seed), serve);
    Admin(cl, "POST", "/admin/backends/" + drain + "/undrain");
  }
  std::map<std::string, json> models = CostModels(cl);
  const json slow = models["slow"], fast = models["fast"];
  ASSERT_TRUE(slow.is_object() && fast.is_object()) << slow << fast;
  EXPECT_EQ(slow["samples"], 12);
  EXPECT_EQ(fast["samples"], 12);
  // Their age, read at one moment: the slow engine's last sample came before the fast one's
  // first; both are fresh (stale_after is 30 s) and neither engine is a slot engine.
  ASSERT_TRUE(slow["last_sample_age_s"].is_number() && fast["last_sample_age_s"].is_number()) << slow << fast;
  EXPECT_GT(slow["last_sample_age_s"].get<double>(), fast["last_sample_age_s"].get<double>());
  EXPECT_GE(fast["last_sample_age_s"].get<double>(), 0.0);
  EXPECT_EQ(slow["freshness"], 1.0);
  EXPECT_EQ(slow["per_slot_wait_s"], 0.0);
  // The slow engine's true cost is the prior's over its speed: 20x the configured model.
  const double truth = slow["prior"]["per_uncached_token_s"].get<double>() / kSlowSpeed;
  const double learned = slow["per_uncached_token_s"].get<double>();
  EXPECT_GT(learned, 0.6 * truth) << slow;
  EXPECT_LT(learned, 1.4 * truth) << slow;
  EXPECT_GT(learned, 8 * fast["per_uncached_token_s"].get<double>()) << fast;
  const std::string metrics = cl.Get("/metrics")->body;
  EXPECT_NE(metrics.find("myriad_gateway_backend_cost_seconds{backend=\"slow\",term=\"per_uncached_token\"}"),
            std::string::npos);
  EXPECT_NE(metrics.find("myriad_gateway_backend_cost_samples_total{backend=\"slow\"} 12"), std::string::npos);
  EXPECT_NE(metrics.find("myriad_gateway_backend_cost_seconds{backend=\"slow\",term=\"per_slot_wait\"} 0"),
            std::string::npos);
  EXPECT_NE(metrics.find("myriad_gateway_backend_cost_freshness{backend=\"slow\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("myriad_gateway_backend_cost_last_sample_age_seconds{backend=\"fast\"} "), std::string::npos);

  // Fresh uncached prompts on two idle backends: the learned model sends every one to the fast
  // engine, where the configured model sees two equal backends and spreads them.
  auto route = [&](Gateway& g) {
    net::HttpClient c(net::HostPort{"127.0.0.1", g.port()});
    int on_fast = 0;
    for (int i = 0; i < 10; ++i) on_fast += Stream(c, 400, 100 + i) == "fast";
    return on_fast;
  };
  EXPECT_EQ(route(*gw), 10);
  gw->Stop();
  auto fixed = emus.Start(/*learn=*/false);
  EXPECT_LT(route(*fixed), 10);
  net::HttpClient fc(net::HostPort{"127.0.0.1", fixed->port()});
  EXPECT_TRUE(CostModelOf(fc, "slow").is_null());
  fixed->Stop();
}

TEST(GatewayCostModelTest, LearnCostIsOnByDefaultAndABadValueNamesItsLine) {
  auto d = ParseGatewayConfig("listen: 127.0.0.1:8000\n", "gw.yaml");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->learn_cost);
  auto off = ParseGatewayConfig("routing:\n  learn_cost: false\n", "gw.yaml");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->learn_cost);
  auto bad = ParseGatewayConfig("routing:\n  policy: kv-aware\n  learn_cost: sometimes\n", "gw.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gw.yaml:3"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("routing.learn_cost"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace myriad::gateway
