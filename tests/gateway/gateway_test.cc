// The gateway end to end as a proxy: real sockets on loopback, emulated engines behind it.
#include "gateway_test_util.h"

#include <set>

namespace myriad::gateway {
namespace {

using namespace gwtest;

TEST(GatewayTest, ProxiesCompletionsAndChatAndListsModels) {
  Harness h(2);
  auto c = h.Client();
  auto r = c.Post("/v1/completions", Completion("hello there", 5));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 200) << r->body;
  json out = json::parse(r->body);
  EXPECT_EQ(out["usage"]["completion_tokens"], 5);
  EXPECT_NE(net::FindHeader(r->headers, "X-Myriad-Backend"), nullptr);
  const std::string* tp = net::FindHeader(r->headers, "traceparent");
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(tp->size(), 55u);
  auto chat = c.Post("/v1/chat/completions",
                     json({{"model", "emu-model"},
                           {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                           {"max_tokens", 2}})
                         .dump());
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(json::parse(chat->body)["object"], "chat.completion");
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models.ok());
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "emu-model");
  json line = h.RequestLog(2);
  EXPECT_EQ(line["status"], 200);
  EXPECT_EQ(line["route"], "chat.completions");
  EXPECT_NE(line["decision"].get<std::string>().find("kv-aware"), std::string::npos) << line;
}

TEST(GatewayTest, KeepsTheClientsTraceIdAndPassesItUpstream) {
  Harness h(1);
  auto c = h.Client();
  auto r = c.Request("POST", "/v1/completions", Completion("x y z"), "application/json");
  ASSERT_TRUE(r.ok());
  // With a traceparent of the client's own:
  net::AsyncHttpClient ac;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  net::Headers got;
  net::CallRequest req;
  req.server = net::HostPort{"127.0.0.1", h.gw->port()};
  req.target = "/v1/completions";
  req.body = Completion("x y z");
  req.headers.emplace_back("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  ac.Start(req, {.on_header = [&](int, const net::Headers& hd) { got = hd; },
                 .on_data = nullptr,
                 .on_done = [&](absl::Status, net::CallStage) {
                   std::lock_guard l(mu);
                   done = true;
                   cv.notify_all();
                 }});
  std::unique_lock l(mu);
  ASSERT_TRUE(cv.wait_for(l, 10s, [&] { return done; }));
  const std::string* tp = net::FindHeader(got, "traceparent");
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(tp->substr(3, 32), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(h.RequestLog(2)["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
}

TEST(GatewayTest, StreamIsPassedThroughByteForByteAsItArrives) {
  // An upstream that streams fixed bytes with pauses, so arrival order can be checked. Each
  // event carries a token: the gateway holds an answer until its first one.
  std::vector<std::string> events = {"data: {\"text\":\"a\"}\n\n", "data: {\"text\":\"b\"}\n\n",
                                     "data: {\"text\":\"\\u00e9\"}\n\n", "data: [DONE]\n\n"};
  net::HttpServerOptions so;
  so.threads = 2;
  net::HttpServer upstream(so, [&](net::HttpRequest, std::shared_ptr<net::HttpResponder> r) {
    std::thread([r, &events] {
      r->BeginStream(200, "text/event-stream");
      for (const auto& e : events) {
        r->Write(e);
        std::this_thread::sleep_for(30ms);
      }
      r->End();
    }).detach();
  });
  ASSERT_TRUE(upstream.Start().ok());
  GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.access_log = "";
  c.health_interval = 10 * kSecond;
  c.scrape_interval = 0;
  c.backends.push_back(EmuBackend("up", upstream.port()));
  auto gw = Gateway::Create(c);
  ASSERT_TRUE(gw.ok());
  ASSERT_TRUE((*gw)->Start().ok());
  net::AsyncHttpClient client;
  std::mutex mu;
  std::condition_variable cv;
  std::string body;
  std::vector<std::chrono::steady_clock::time_point> arrivals;
  bool done = false;
  net::CallRequest req;
  req.server = net::HostPort{"127.0.0.1", (*gw)->port()};
  req.target = "/v1/completions";
  req.body = Completion("p", 4, true);
  client.Start(req, {.on_header = nullptr,
                     .on_data = [&](std::string_view d) {
                       std::lock_guard l(mu);
                       body.append(d);
                       arrivals.push_back(std::chrono::steady_clock::now());
                     },
                     .on_done = [&](absl::Status st, net::CallStage) {
                       EXPECT_TRUE(st.ok()) << st;
                       std::lock_guard l(mu);
                       done = true;
                       cv.notify_all();
                     }});
  std::unique_lock l(mu);
  ASSERT_TRUE(cv.wait_for(l, 10s, [&] { return done; }));
  std::string expected;
  for (const auto& e : events) expected += e;
  EXPECT_EQ(body, expected);
  ASSERT_GE(arrivals.size(), 3u);  // not buffered into one piece at the end
  EXPECT_GE(arrivals.back() - arrivals.front(), 50ms);
  l.unlock();
  (*gw)->Stop();
  upstream.Stop();
}

// The health loop runs on a ManualClock: a round happens only when the test steps time, so
// re-admission is counted in rounds, not waited for.
TEST(GatewayTest, RetriesAnotherBackendAndEjectsOneThatKeepsFailing) {
  GatewayConfig c;
  c.backend_health.eject_after_errors = 2;
  c.backend_health.readmit_after_passing_checks = 2;
  c.policy = "round-robin";
  auto clock = std::make_shared<ManualClock>();
  Harness h(2, c, {}, clock);
  auto c0 = net::HttpClient(net::HostPort{"127.0.0.1", h.emus[0]->port()});
  ASSERT_EQ(c0.Post("/admin/fault", R"({"kind":"error","status":503})")->status, 200);
  auto c1 = h.Client();
  for (int i = 0; i < 6; ++i) {
    auto r = c1.Post("/v1/completions", Completion(fmt::format("retry me {}", i)));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(*net::FindHeader(r->headers, "X-Myriad-Backend"), "b1");
  }
  GatewayStats s = h.gw->stats();
  EXPECT_GE(s.retries, 1u);
  EXPECT_EQ(s.ejections, 1u);
  // Ejected, and no health round has run since (virtual time stands still): it stays out.
  ASSERT_EQ(c0.Post("/admin/fault", R"({"kind":"none"})")->status, 200);
  ASSERT_TRUE(clock->AwaitSleepers(1));
  auto still_out = c1.Post("/v1/completions", Completion("still out"));
  ASSERT_TRUE(still_out.ok());
  EXPECT_EQ(*net::FindHeader(still_out->headers, "X-Myriad-Backend"), "b1");
  // Two passing rounds (readmit_after_passing_checks) bring it back.
  for (int round = 0; round < c.backend_health.readmit_after_passing_checks; ++round) {
    clock->Advance(50 * kMillisecond);  // the harness's health and scrape interval
    ASSERT_TRUE(clock->AwaitSleepers(1));
  }
  std::set<std::string> served;
  for (int i = 0; i < 2; ++i) {  // round-robin over both again
    auto r = c1.Post("/v1/completions", Completion(fmt::format("after {}", i)));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;
    served.insert(*net::FindHeader(r->headers, "X-Myriad-Backend"));
  }
  EXPECT_EQ(served, (std::set<std::string>{"b0", "b1"}));
  EXPECT_EQ(h.gw->stats().ejections, 1u);
}

// An engine that answers 429 is busy, not broken: the request goes elsewhere, but the engine is
// not ejected (Envoy's outlier detection likewise counts 5xx, not 429).
TEST(GatewayTest, AnOverloadedBackendIsRetriedElsewhereButNotEjected) {
  GatewayConfig c;
  c.backend_health.eject_after_errors = 2;
  c.policy = "round-robin";
  Harness h(2, c);
  auto c0 = net::HttpClient(net::HostPort{"127.0.0.1", h.emus[0]->port()});
  ASSERT_EQ(c0.Post("/admin/fault", R"({"kind":"error","status":429})")->status, 200);
  auto c1 = h.Client();
  for (int i = 0; i < 6; ++i) {
    auto r = c1.Post("/v1/completions", Completion(fmt::format("busy {}", i)));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(*net::FindHeader(r->headers, "X-Myriad-Backend"), "b1");
  }
  EXPECT_GE(h.gw->stats().retries, 1u);
  EXPECT_EQ(h.gw->stats().ejections, 0u);
}

TEST(GatewayTest, AllBackendsDownGives502And503) {
  GatewayConfig c;
  auto clock = std::make_shared<ManualClock>();
  Harness h(1, c, {}, clock);
  h.emus[0]->Stop();
  auto cl = h.Client();
  auto r = cl.Post("/v1/completions", Completion("anyone?"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 502) << r->body;
  EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("b0"), std::string::npos);
  // The health checks mark it down, a round per step of virtual time; then the gateway says so
  // at once.
  for (int round = 0; round < 5 && cl.Get("/ready")->status == 200; ++round) {
    clock->Advance(50 * kMillisecond);
    ASSERT_TRUE(clock->AwaitSleepers(1));
  }
  EXPECT_EQ(cl.Get("/ready")->status, 503);
  EXPECT_EQ(cl.Post("/v1/completions", Completion("anyone?"))->status, 503);
}

TEST(GatewayTest, MidStreamFailureSendsAnSseErrorEvent) {
  Harness h(1);
  auto e = net::HttpClient(net::HostPort{"127.0.0.1", h.emus[0]->port()});
  ASSERT_EQ(e.Post("/admin/fault", R"({"kind":"drop_stream","after_tokens":2})")->status, 200);
  auto r = h.Client().Post("/v1/completions", Completion("cut", 10, true));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("data: {\"error\""), std::string::npos) << r->body;
  EXPECT_EQ(r->body.find("[DONE]"), std::string::npos);
}

TEST(GatewayTest, ClientThatLeavesCancelsTheUpstreamRequest) {
  Harness h(1);
  {
    net::AsyncHttpClient client;
    std::atomic<bool> got{false};
    net::CallRequest req;
    req.server = net::HostPort{"127.0.0.1", h.gw->port()};
    req.target = "/v1/completions";
    req.body = Completion("long one", 100000, true);
    auto call = client.Start(req, {.on_header = nullptr,
                                   .on_data = [&](std::string_view) { got = true; },
                                   .on_done = nullptr});
    for (int i = 0; i < 500 && !got; ++i) std::this_thread::sleep_for(5ms);
    ASSERT_TRUE(got);
    call->Cancel();
  }
  for (int i = 0; i < 400 && h.emus[0]->engine().stats().finished_abort == 0; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(h.emus[0]->engine().stats().finished_abort, 1u);
  EXPECT_EQ(h.RequestLog(1)["status"], 499);
}

TEST(GatewayTest, MalformedAndOversizedRequestsGet4xxWithOpenAiErrors) {
  GatewayConfig c;
  c.max_body_bytes = 4096;
  Harness h(1, c);
  auto cl = h.Client();
  struct Case {
    std::string body;
    int status;
    std::string param;
  };
  for (const Case& k : std::vector<Case>{
           {"{not json", 400, ""},
           {"[1,2]", 400, ""},
           {R"({"prompt":"x"})", 400, "model"},
           {R"({"model":"emu-model","prompt":"x","max_tokens":-1})", 400, "max_tokens"},
           {R"({"model":"emu-model","prompt":"x","stream":"yes"})", 400, "stream"},
           {R"({"model":"emu-model"})", 400, "prompt"},
           // vLLM answers 400 for stream options on a request that does not stream.
           {R"({"model":"emu-model","prompt":"x","stream_options":{"include_usage":true}})", 400,
            "stream_options"},
           {R"({"model":"emu-model","prompt":"x","stream":false,"stream_options":{"include_usage":true}})",
            400, "stream_options"},
           {R"({"model":"nope","prompt":"x"})", 404, "model"},
       }) {
    auto r = cl.Post("/v1/completions", k.body);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, k.status) << k.body << " -> " << r->body;
    json e = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.contains("error")) << r->body;
    if (!k.param.empty()) {
      EXPECT_EQ(e["error"]["param"], k.param) << r->body;
    }
  }
  auto chat = cl.Post("/v1/chat/completions", R"({"model":"emu-model","messages":[{"content":"x"}]})");
  EXPECT_EQ(chat->status, 400);
  auto big = cl.Post("/v1/completions", Completion(std::string(10000, 'a')));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->status, 413);
  // And it still serves.
  auto fine = h.Client().Post("/v1/completions", Completion("still here"));
  EXPECT_EQ(fine->status, 200);
}

// One parser (net/openai_request.h) in both: a bad body gets the same status and the same bytes
// from the gateway as from an emulated engine asked directly.
TEST(GatewayTest, RefusesBadRequestsWithTheEmulatorsWords) {
  Harness h(1);
  auto gw = h.Client();
  net::HttpClient emu(net::HostPort{"127.0.0.1", h.emus[0]->port()});
  for (const std::string body : {
           "{not json",
           R"({"model":"emu-model","prompt":"x","stream_options":{"include_usage":true}})",
           R"({"model":"emu-model","prompt":"x","max_tokens":-1})",
           R"({"model":7,"prompt":"x"})",
           R"({"model":"emu-model","prompt":"x","stream":"yes"})",
           R"({"model":"emu-model","prompt":"x","temperature":-1})",
           R"({"model":"emu-model","prompt":[1,-2]})",
           R"({"model":"emu-model","prompt":"x","cache_salt":""})",
           R"({"model":"emu-model","prompt":"x","kv_transfer_params":{"do_remote_prefill":true}})",
       }) {
    auto a = gw.Post("/v1/completions", body);
    auto b = emu.Post("/v1/completions", body);
    ASSERT_TRUE(a.ok() && b.ok()) << body;
    EXPECT_EQ(a->status, 400) << body << " -> " << a->body;
    EXPECT_EQ(a->status, b->status) << body;
    EXPECT_EQ(a->body, b->body) << body;
  }
}

TEST(GatewayTest, TenantQuotaAnswers429WithRetryAfterAndUnknownKeys401) {
  GatewayConfig c;
  TenantEntry small;
  small.config.name = "small";
  small.config.quota_tokens_per_s = 10;
  small.config.burst_tokens = 40;
  small.api_keys = {"key-small"};
  c.tenants.push_back(small);
  c.allow_anonymous = false;
  Harness h(1, c);
  net::HttpClient cl(net::HostPort{"127.0.0.1", h.gw->port()});
  auto anon = cl.Post("/v1/completions", Completion("x"));
  EXPECT_EQ(anon->status, 401);
  auto wrong = cl.Request("POST", "/v1/completions", Completion("x"), "application/json");
  EXPECT_EQ(wrong->status, 401);
  // Authorization header through a raw request (HttpClient has no header API): use the
  // async client.
  net::AsyncHttpClient ac;
  auto send = [&](const std::string& key) {
    net::CallRequest req;
    req.server = net::HostPort{"127.0.0.1", h.gw->port()};
    req.target = "/v1/completions";
    req.body = Completion("one two three four five six seven eight", 4);
    req.headers.emplace_back("Authorization", "Bearer " + key);
    CallResult r = CallAndWait(ac, req);
    return std::make_pair(r.status, r.headers);
  };
  EXPECT_EQ(send("key-bad").first, 401);
  int ok = 0, limited = 0;
  for (int i = 0; i < 6; ++i) {
    auto [status, headers] = send("key-small");
    if (status == 200) ok++;
    if (status == 429) {
      limited++;
      EXPECT_NE(net::FindHeader(headers, "Retry-After"), nullptr);
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(limited, 1);
}

// A request for n choices produces up to n * max_tokens: that is what its tenant is charged.
TEST(GatewayTest, TenantIsChargedForEveryChoice) {
  GatewayConfig c;
  TenantEntry small;
  small.config.name = "small";
  small.config.quota_tokens_per_s = 1;
  small.config.burst_tokens = 100;
  small.api_keys = {"key-small"};
  c.tenants.push_back(small);
  c.allow_anonymous = false;
  Harness h(1, c);
  net::AsyncHttpClient ac;
  auto send = [&](int n) {
    net::CallRequest req;
    req.server = net::HostPort{"127.0.0.1", h.gw->port()};
    req.target = "/v1/completions";
    req.body = json({{"model", "emu-model"}, {"prompt", "one two"}, {"max_tokens", 30}, {"n", n}}).dump();
    req.headers.emplace_back("Authorization", "Bearer key-small");
    return CallAndWait(ac, req).status;
  };
  EXPECT_EQ(send(1), 200);  // 2 + 30 of the 100
  // Admitted (2 + 2 x 30 = 62 of the 68 left) and charged for both choices; the emulator, which
  // serves one choice, then answers 400.
  EXPECT_NE(send(2), 429);
  // 6 left: charged for one choice only, 36 would have been left and this one would pass.
  EXPECT_EQ(send(1), 429);
}

TEST(GatewayTest, KvAwareRoutingSendsASharedPrefixBackToItsHolder) {
  GatewayConfig c;
  c.policy = "kv-aware";
  Harness h(3, c);
  auto cl = h.Client();
  const std::string system = Words(300, 7);  // ~2 KB shared prefix
  std::string first_backend;
  for (int i = 0; i < 6; ++i) {
    auto r = cl.Post("/v1/completions", Completion(system + Words(10, 100 + i)));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200);
    const std::string b = *net::FindHeader(r->headers, "X-Myriad-Backend");
    if (i == 0) first_backend = b;
    EXPECT_EQ(b, first_backend) << "request " << i;
  }
  // The engine saw the reuse: its prefix cache hit.
  uint64_t hits = 0;
  for (auto& e : h.emus) hits += e->engine().stats().prefix_hits;
  EXPECT_GT(hits, 5u * 200);
}

TEST(GatewayTest, PrefillThenDecodeWithKvTransferParams) {
  GatewayConfig c;
  Harness h(2, c, {BackendRole::kPrefill, BackendRole::kDecode});
  auto r = h.Client().Post("/v1/completions", Completion(Words(100, 3), 6, true));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->body.find("[DONE]"), std::string::npos);
  EXPECT_GT(h.emus[0]->engine().stats().prompt_tokens, 0u);   // prefill computed the prompt
  EXPECT_EQ(h.emus[1]->engine().stats().prompt_tokens, 0u);   // decode received it
  EXPECT_EQ(h.emus[1]->engine().stats().generation_tokens, 6u);
  EXPECT_EQ(h.gw->stats().pd_requests, 1u);
  json line = h.RequestLog(1);
  EXPECT_EQ(line["backend"], "b1");
  EXPECT_EQ(line["decode_backend"], "b1");
}

TEST(GatewayTest, AdminDrainAndUndrainNeedTheToken) {
  GatewayConfig c;
  c.admin_token = "sesame";
  c.policy = "round-robin";
  Harness h(2, c);
  net::AsyncHttpClient ac;
  auto admin = [&](std::string method, std::string target, std::string token) {
    net::CallRequest req;
    req.server = net::HostPort{"127.0.0.1", h.gw->port()};
    req.method = method;
    req.target = target;
    if (!token.empty()) req.headers.emplace_back("Authorization", "Bearer " + token);
    CallResult r = CallAndWait(ac, req);
    return std::make_pair(r.status, r.body);
  };
  EXPECT_EQ(admin("GET", "/admin/backends", "").first, 401);
  EXPECT_EQ(admin("GET", "/admin/backends", "wrong").first, 401);
  EXPECT_EQ(admin("POST", "/admin/backends/b0/drain", "sesame").first, 200);
  EXPECT_EQ(admin("POST", "/admin/backends/nope/drain", "sesame").first, 404);
  auto cl = h.Client();
  for (int i = 0; i < 4; ++i) {
    auto r = cl.Post("/v1/completions", Completion(fmt::format("d{}", i)));
    EXPECT_EQ(*net::FindHeader(r->headers, "X-Myriad-Backend"), "b1");
  }
  auto list = admin("GET", "/admin/backends", "sesame");
  EXPECT_EQ(list.first, 200);
  EXPECT_EQ(json::parse(list.second)["backends"][0]["draining"], true);
  EXPECT_EQ(admin("POST", "/admin/backends/b0/undrain", "sesame").first, 200);
  // A response is counted as its exchange finishes, which can trail the client's read of it.
  const std::string counted = "myriad_gateway_responses_total{route=\"completions\",code=\"200\"} 4";
  auto metrics = cl.Get("/metrics");
  for (int i = 0; i < 200 && metrics.ok() && metrics->body.find(counted) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    metrics = cl.Get("/metrics");
  }
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find(counted), std::string::npos) << metrics->body;
}

TEST(GatewayConfigTest, ErrorsNameTheLineAndKey) {
  auto bad = ParseGatewayConfig("listen: 127.0.0.1:8000\nbackends:\n  - name: a\n    url: ftp://x\n    model: m\n",
                                "gw.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gw.yaml:3: backends[0]"), std::string::npos) << bad.status();
  auto unknown = ParseGatewayConfig("routing:\n  polcy: kv-aware\n", "gw.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("gw.yaml:2: routing.polcy: unknown key"), std::string::npos)
      << unknown.status();
  auto policy = ParseGatewayConfig("routing:\n  policy: fastest\n", "gw.yaml");
  ASSERT_FALSE(policy.ok());
  EXPECT_NE(policy.status().message().find("routing.policy"), std::string::npos);
  auto good = ParseGatewayConfig(
      "listen: 0.0.0.0:9000\nadmin_token: t\nbackends:\n  - {name: p0, url: 'http://10.0.0.1:8100', role: prefill, model: m}\n"
      "  - {name: d0, url: 'http://10.0.0.2:8200', role: decode, model: m}\n"
      "tenants:\n  - {name: big, api_keys: [k1, k2], weight: 3, quota_tokens_per_s: 1000}\n"
      "upstream: {first_byte_timeout: 30s, max_attempts: 2}\nhealth: {interval: 2s}\n",
      "gw.yaml");
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->backends.size(), 2u);
  EXPECT_EQ(good->backends[0].role, BackendRole::kPrefill);
  EXPECT_EQ(good->tenants[0].api_keys.size(), 2u);
  EXPECT_EQ(good->first_byte_timeout, 30 * kSecond);
  EXPECT_EQ(good->health_interval, 2 * kSecond);
}

TEST(GatewayMetricsParseTest, ReadsVllmAndSglangGauges) {
  ScrapedLoad l = ParseEngineMetrics(
      "# HELP vllm:num_requests_running x\n"
      "vllm:num_requests_running{model_name=\"m\",engine=\"0\"} 3\n"
      "vllm:num_requests_running{model_name=\"m\",engine=\"1\"} 2\n"
      "vllm:num_requests_waiting{model_name=\"a b\"} 7\n"
      "vllm:kv_cache_usage_perc{engine=\"0\"} 0.25\n"
      "vllm:kv_cache_usage_perc{engine=\"1\"} 0.5\n"
      "garbage line\n"
      "vllm:num_requests_waiting{x=\"y\"} NaN\n");
  EXPECT_TRUE(l.any);
  EXPECT_EQ(l.running, 5);
  EXPECT_EQ(l.waiting, 7);
  EXPECT_EQ(l.kv_usage, 0.5);
}


}  // namespace
}  // namespace myriad::gateway
