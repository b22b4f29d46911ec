// Approximate routing (no KV events) with the engines' caches modelled: a llama.cpp-like engine
// on loopback says it has two slots (GET /props), and the gateway's index forgets a prompt
// once that engine has served two others, as the engine does; the capacity and occupancy show
// in the admin API and the metrics. The reports' parsers, and the configured capacity's bounds.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "gateway/engine_cache_probe.h"
#include "gateway_test_util.h"

namespace myriad::gateway {
namespace {

using namespace gwtest;

constexpr std::string_view kCompletion =
    R"({"id":"c","object":"text_completion","model":"emu-model","choices":[{"index":0,"text":" hi","finish_reason":"length"}],)"
    R"("usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}})";

// A llama-server as the gateway sees it: /health, /props with its slots, and completions; no
// /metrics (404), as llama-server without --metrics.
class FakeLlamaServer {
 public:
  explicit FakeLlamaServer(int slots) : slots_(slots) {
    net::HttpServerOptions o;
    o.threads = 2;
    o.stop_grace = 100 * kMillisecond;
    server_ = std::make_unique<net::HttpServer>(o, [this](net::HttpRequest req, std::shared_ptr<net::HttpResponder> r) {
      const std::string_view path = req.path();
      if (path == "/health") return r->Respond(net::HttpResponse{200, "application/json", R"({"status":"ok"})", {}});
      if (path == "/props") {
        props_++;
        return r->Respond(net::HttpResponse{
            200, "application/json",
            json({{"total_slots", slots_}, {"default_generation_settings", {{"n_ctx", 4096}}}}).dump(), {}});
      }
      if (path == "/v1/completions") return r->Respond(net::HttpResponse{200, "application/json", std::string(kCompletion), {}});
      if (path == "/slots") slots_asked_++;
      r->Respond(net::HttpResponse{404, "text/plain", "File Not Found", {}});
    });
    EXPECT_TRUE(server_->Start().ok());
  }
  ~FakeLlamaServer() { server_->Stop(); }
  uint16_t port() const { return server_->port(); }
  int props() const { return props_; }
  int slots() const { return slots_asked_; }

 private:
  int slots_;
  std::atomic<int> props_{0};
  std::atomic<int> slots_asked_{0};
  std::unique_ptr<net::HttpServer> server_;
};

struct Gw {
  std::unique_ptr<Gateway> gw;
  LogLines log;
  size_t sent = 0;
  Gw(std::vector<BackendConfig> backends, GatewayConfig c = {}, std::shared_ptr<Clock> clock = nullptr) {
    c.listen = "127.0.0.1:0";
    c.access_log = "";
    c.admin_token = "admin";
    c.health_interval = 3600 * kSecond;  // rounds run when the test asks (CheckHealthNow)
    c.scrape_interval = 0;
    c.backends = std::move(backends);
    auto g = Gateway::Create(c, std::move(clock));
    EXPECT_TRUE(g.ok()) << g.status();
    gw = *std::move(g);
    log.Attach(*gw);
    EXPECT_TRUE(gw->Start().ok());
  }
  ~Gw() { gw->Stop(); }
  // The tokens the router expected cached for this prompt (from the access log's decision).
  int Cached(const std::string& prompt) {
    auto cl = net::HttpClient(net::HostPort{"127.0.0.1", gw->port()});
    auto r = cl.Post("/v1/completions", Completion(prompt));
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;
    const std::string decision = log.Line(++sent).value("decision", std::string("no log line"));
    const size_t at = decision.find("cached ~");
    EXPECT_NE(at, std::string::npos) << decision;
    return at == std::string::npos ? -1 : std::stoi(decision.substr(at + 8));
  }
  json Admin(const std::string& path) {
    net::AsyncHttpClient client(net::AsyncHttpClientOptions{});
    CallResult r = Send(client, gw->port(), "GET", path, "", "admin");
    EXPECT_EQ(r.status, 200) << r.body;
    return path == "/metrics" ? json(r.body) : json::parse(r.body, nullptr, false);
  }
};

BackendConfig Llama(std::string name, uint16_t port) { return EmuBackend(std::move(name), port); }

TEST(GatewayCacheModel, IndexForgetsAPromptAfterTheSlotEngineServedTwoOthers) {
  FakeLlamaServer engine(2);
  Gw g({Llama("llama0", engine.port())});
  g.gw->CheckHealthNow();
  EXPECT_GE(engine.props(), 1);

  const json backends = g.Admin("/admin/backends");
  ASSERT_TRUE(backends.contains("backends")) << backends;
  const json cache = backends["backends"][0]["cache"];
  EXPECT_EQ(cache["kind"], "slots") << cache;
  EXPECT_EQ(cache["slots"], 2);
  EXPECT_EQ(cache["capacity_tokens"], 4096);
  EXPECT_EQ(cache["source"], "engine");

  const std::string a = Words(120, 1);
  EXPECT_EQ(g.Cached(a + Words(4, 900)), 0);
  EXPECT_GT(g.Cached(a + Words(4, 901)), 0) << "the engine's slot holds a's first turn";
  g.Cached(Words(120, 2));
  g.Cached(Words(120, 3));  // two other prompts: both slots taken over
  EXPECT_EQ(g.Cached(a + Words(4, 902)), 0) << "the index still believed the engine held a";

  const json after = g.Admin("/admin/backends")["backends"][0]["cache"];
  EXPECT_EQ(after["used_slots"], 2) << after;
  EXPECT_GT(after["evicted_blocks"].get<int64_t>(), 0) << after;
  const std::string metrics = g.Admin("/metrics").get<std::string>();
  EXPECT_NE(metrics.find(R"(myriad_gateway_backend_cache_capacity_tokens{backend="llama0",kind="slots",source="engine"} 4096)"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(R"(myriad_gateway_backend_cache_probe_failures_total{backend="llama0"} 0)"), std::string::npos);
}

TEST(GatewayCacheModel, CapacityFromConfigFromVllmMetricsOrNoneCounted) {
  FakeLlamaServer configured(2), silent(0);  // total_slots 0: no answer the model can use
  auto emu = StartEmu();  // its /metrics carry vllm:cache_config_info
  BackendConfig b = Llama("llama0", configured.port());
  b.cache_slots = 1;
  Gw g({b, EmuBackend("emu0", emu->port()), Llama("silent", silent.port())});
  g.gw->CheckHealthNow();
  EXPECT_EQ(configured.props(), 0) << "a configured capacity is not asked for";
  const json list = g.Admin("/admin/backends")["backends"];
  EXPECT_EQ(list[0]["cache"]["source"], "config");
  EXPECT_EQ(list[0]["cache"]["slots"], 1);
  EXPECT_EQ(list[1]["cache"]["kind"], "paged") << list[1];
  EXPECT_EQ(list[1]["cache"]["source"], "engine");
  EXPECT_GT(list[1]["cache"]["capacity_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(list[2]["cache"]["kind"], "unknown");
  EXPECT_EQ(list[2]["cache"]["source"], "default");
  const int64_t failed = list[2]["cache"]["probe_failures"].get<int64_t>();
  EXPECT_GE(failed, 1) << list[2];
  // Backing off: after 1, 2, 4 ... rounds, so 8 rounds see at most 4 more probes, not 8.
  for (int i = 0; i < 8; ++i) g.gw->CheckHealthNow();
  const int64_t later = g.Admin("/admin/backends")["backends"][2]["cache"]["probe_failures"].get<int64_t>();
  EXPECT_GE(later - failed, 1);
  EXPECT_LE(later - failed, 4);
  emu->Stop();
}

// Issue 25's pile-up: at low load (one request at a time, so every backend idle at each pick)
// and with no prompt cached anywhere, least-loaded sent nearly everything to the first backend
// (every load ties at zero). Both it and kv-aware now spread.
TEST(GatewayCacheModel, LowLoadWithoutCacheHitsSpreadsOverTheBackends) {
  for (const char* policy : {"least-loaded", "kv-aware"}) {
    GatewayConfig c;
    c.policy = policy;
    Harness h(4, c);
    auto cl = h.Client();
    std::map<std::string, int> count;
    constexpr int kRequests = 40;
    for (int i = 0; i < kRequests; ++i) {
      auto r = cl.Post("/v1/completions", Completion(Words(60, 500 + i)));
      ASSERT_TRUE(r.ok());
      ASSERT_EQ(r->status, 200) << r->body;
      ++count[h.RequestLog(static_cast<size_t>(i + 1)).value("backend", std::string("?"))];
    }
    for (int b = 0; b < 4; ++b) {
      const int n = count[fmt::format("b{}", b)];
      EXPECT_GE(n, kRequests / 8) << policy << ": backend b" << b;
      EXPECT_LE(n, kRequests * 3 / 8) << policy << ": backend b" << b;
    }
  }
}

TEST(GatewayCacheModel, ConfiguredCapacityIsBoundedAndNamedInErrors) {
  auto ok = ParseGatewayConfig(
      "backends:\n  - {name: a, url: 'http://127.0.0.1:1', model: m, cache_slots: 2, cache_tokens: 4096}\n", "gw.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->backends[0].cache_slots, 2);
  EXPECT_EQ(ok->backends[0].cache_tokens, 4096);
  auto bad = ParseGatewayConfig("backends:\n  - {name: a, url: 'http://127.0.0.1:1', model: m, cache_slots: 5000}\n",
                                "gw.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gw.yaml:2"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("cache_slots: 5000 is not in [0, 1024]"), std::string::npos) << bad.status();
  auto neg = ParseGatewayConfig("backends:\n  - {name: a, url: 'http://127.0.0.1:1', model: m, cache_tokens: -1}\n",
                                "gw.yaml");
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("cache_tokens"), std::string::npos) << neg.status();
  // health.slots_interval: 0 (off) or 100 ms-1 h.
  const std::string backend = "backends:\n  - {name: a, url: 'http://127.0.0.1:1', model: m}\n";
  auto off = ParseGatewayConfig(backend + "health: {slots_interval: 0s}\n", "gw.yaml");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->slots_interval, 0);
  for (const char* v : {"10ms", "2h"}) {
    auto out = ParseGatewayConfig(backend + "health: {slots_interval: " + v + "}\n", "gw.yaml");
    ASSERT_FALSE(out.ok()) << v;
    EXPECT_NE(out.status().message().find("gw.yaml:3"), std::string::npos) << out.status();
    EXPECT_NE(out.status().message().find("slots_interval"), std::string::npos) << out.status();
    EXPECT_NE(out.status().message().find("[100ms, 1h]"), std::string::npos) << out.status();
  }
}

// Issue 25: a llama-server (here the emulator's profile) that clients also use directly, behind
// the gateway's back. Its GET /slots tells the gateway which slots took tasks the gateway did not
// send: the model forgets what it believed those slots held, so the index stops promising a
// cached prefix the engine no longer has.
TEST(GatewayCacheModel, SlotsReportCorrectsTheModelAfterTheEngineWasUsedDirectly) {
  emu::EmuOptions o;
  o.engine.slots = emu::SlotProfile{};  // 2 slots, llama-server's similarity 0.1
  o.engine.speed = 50;
  auto s = emu::EmuServer::Create(o);
  ASSERT_TRUE(s.ok()) << s.status();
  std::unique_ptr<emu::EmuServer> engine = *std::move(s);
  ASSERT_TRUE(engine->Start().ok());
  GatewayConfig c;
  c.slots_interval = 1;  // every health round the test runs
  Gw g({Llama("llama0", engine->port())}, c);
  g.gw->CheckHealthNow();  // the capacity, from /props
  EXPECT_EQ(g.Admin("/admin/backends")["backends"][0]["cache"]["kind"], "slots");

  const std::string a = Words(120, 1);
  EXPECT_EQ(g.Cached(a + Words(4, 900)), 0);
  EXPECT_GT(g.Cached(a + Words(4, 901)), 0) << "the engine's slot holds a's first turn";
  // The report after the gateway's own requests (a poll during the user's think time): the
  // engine agrees, nothing to correct. (A slot the gateway sent to since the last report is
  // trusted: had another client also used it in that interval, the model would learn it only
  // when that slot next changes.)
  g.gw->CheckHealthNow();
  EXPECT_EQ(g.Admin("/admin/backends")["backends"][0]["cache"]["slots_corrected"], 0);
  EXPECT_GT(g.Cached(a + Words(4, 902)), 0) << "a's slot kept";
  g.gw->CheckHealthNow();

  // Two other clients' prompts, straight to the engine: both slots are taken over.
  net::HttpClient direct(net::HostPort{"127.0.0.1", engine->port()});
  for (int seed : {2, 3}) {
    auto r = direct.Post("/v1/completions", Completion(Words(120, seed)));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200) << r->body;
  }
  g.gw->CheckHealthNow();
  const json cache = g.Admin("/admin/backends")["backends"][0]["cache"];
  EXPECT_GE(cache["slots_corrected"].get<int>(), 1) << cache;
  EXPECT_EQ(cache["used_slots"], 0) << "both slots hold what the gateway did not send: " << cache;
  EXPECT_EQ(g.Cached(a + Words(4, 903)), 0) << "the index still believed the engine held a";
  const std::string metrics = g.Admin("/metrics").get<std::string>();
  EXPECT_NE(metrics.find(R"(myriad_gateway_backend_cache_slots_corrected_total{backend="llama0"} )"), std::string::npos);
  engine->Stop();
}

// An engine that refuses /slots (llama-server --no-slots answers 501, an engine without it 404) is
// asked again after a wait that doubles, and its model keeps working from the gateway's own
// decisions.
TEST(GatewayCacheModel, RefusedSlotsReportBacksOff) {
  FakeLlamaServer engine(2);
  auto clock = std::make_shared<ManualClock>();
  GatewayConfig c;
  c.slots_interval = kSecond;
  Gw g({Llama("llama0", engine.port())}, c, clock);
  g.gw->CheckHealthNow();  // the capacity
  for (int i = 0; i < 40; ++i) {  // 10 s in rounds of 250 ms
    g.gw->CheckHealthNow();
    clock->Advance(250 * kMillisecond);
  }
  EXPECT_GE(engine.slots(), 3) << "asked at 0, 1, 3 and 7 s";
  EXPECT_LE(engine.slots(), 5) << "every second would be 10";
  const std::string a = Words(120, 1);
  EXPECT_EQ(g.Cached(a + Words(4, 900)), 0);
  EXPECT_GT(g.Cached(a + Words(4, 901)), 0);
}

TEST(EngineCacheProbe, ReadsLlamaServersSlotsAcrossVersions) {
  // 2025+: n_prompt_tokens; an idle never-used slot has no id_task.
  const auto now = ParseLlamaCppSlots(
      R"([{"id":0,"n_ctx":4096,"speculative":false,"is_processing":false},)"
      R"({"id":1,"n_ctx":4096,"speculative":false,"is_processing":true,"id_task":7,"n_prompt_tokens":812,)"
      R"("n_prompt_tokens_processed":800,"n_prompt_tokens_cache":12,"params":{},"next_token":[{"n_decoded":3}]}])");
  ASSERT_TRUE(now.has_value());
  ASSERT_EQ(now->size(), 2u);
  EXPECT_FALSE((*now)[0].task.has_value());
  EXPECT_FALSE((*now)[0].processing);
  EXPECT_EQ((*now)[1].task, 7);
  EXPECT_TRUE((*now)[1].processing);
  EXPECT_EQ((*now)[1].tokens, 812);
  // 2024: `state` for busy, id_task -1 before the first task, no token count.
  const auto old = ParseLlamaCppSlots(R"([{"id":0,"id_task":-1,"state":0,"prompt":""},{"id":1,"id_task":3,"state":1}])");
  ASSERT_TRUE(old.has_value());
  ASSERT_EQ(old->size(), 2u);
  EXPECT_FALSE((*old)[0].task.has_value());
  EXPECT_TRUE((*old)[1].processing);
  EXPECT_FALSE((*old)[1].tokens.has_value());
  // Input like any other: bad entries are skipped, a non-array or oversized body is nothing.
  const auto bad = ParseLlamaCppSlots(R"([{"id":"0","is_processing":false},{"id":-1,"is_processing":false},)"
                                      R"({"id":2},{"id":3,"is_processing":false,"n_prompt_tokens":-5}])");
  ASSERT_TRUE(bad.has_value());
  ASSERT_EQ(bad->size(), 1u);
  EXPECT_FALSE((*bad)[0].tokens.has_value());
  EXPECT_FALSE(ParseLlamaCppSlots(R"({"error":{"code":501}})").has_value());
  EXPECT_FALSE(ParseLlamaCppSlots("not json").has_value());
  std::string many = "[";
  for (int i = 0; i <= policy::kMaxEngineSlots; ++i) many += R"({"id":0,"is_processing":false},)";
  many.back() = ']';
  EXPECT_FALSE(ParseLlamaCppSlots(many).has_value());
}

TEST(EngineCacheProbe, ReadsEachEnginesOwnReport) {
  auto props = ParseLlamaCppProps(R"({"total_slots":4,"default_generation_settings":{"n_ctx":8192}})");
  ASSERT_TRUE(props);
  EXPECT_EQ(props->kind, policy::EngineCacheKind::kSlots);
  EXPECT_EQ(props->slots, 4);
  EXPECT_EQ(props->tokens, 8192);
  EXPECT_FALSE(ParseLlamaCppProps(R"({"total_slots":0})"));
  EXPECT_FALSE(ParseLlamaCppProps(R"({"total_slots":99999})")) << "over kMaxEngineSlots";
  EXPECT_FALSE(ParseLlamaCppProps("not json"));

  auto sg = ParseSglangServerInfo(R"({"max_total_num_tokens":123456,"version":"0.4"})");
  ASSERT_TRUE(sg);
  EXPECT_EQ(sg->kind, policy::EngineCacheKind::kPaged);
  EXPECT_EQ(sg->tokens, 123456);
  auto nested = ParseSglangServerInfo(R"({"internal_states":[{"max_total_num_tokens":777}]})");
  ASSERT_TRUE(nested);
  EXPECT_EQ(nested->tokens, 777);
  EXPECT_FALSE(ParseSglangServerInfo(R"({"max_total_num_tokens":"many"})"));

  auto vllm = ParseVllmCacheConfig(
      "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
      "# TYPE vllm:cache_config_info gauge\n"
      "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",engine=\"0\",num_gpu_blocks=\"661\"} 1.0\n");
  ASSERT_TRUE(vllm);
  EXPECT_EQ(vllm->kind, policy::EngineCacheKind::kPaged);
  EXPECT_EQ(vllm->tokens, 661 * 16);
  EXPECT_FALSE(ParseVllmCacheConfig("vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"None\"} 1.0\n"));
  EXPECT_FALSE(ParseVllmCacheConfig("vllm:num_requests_running 3\n"));
}

}  // namespace
}  // namespace myriad::gateway
