// The gateway's spans as a collector receives them: a receiver started here on loopback takes
// the OTLP/HTTP POSTs; fake engines on loopback answer, fail or dawdle on purpose.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "../test_util/promtool.h"
#include "gateway_test_util.h"

namespace myriad::gateway {
namespace {

using namespace gwtest;

// An OTLP/HTTP receiver: it keeps every body POSTed to /v1/traces.
struct Collector {
  std::mutex mu;
  std::vector<json> posts;
  std::vector<std::string> content_types;
  std::unique_ptr<net::HttpServer> server;

  Collector() {
    server = std::make_unique<net::HttpServer>(net::HttpServerOptions{}, [this](const net::HttpRequest& req) {
      std::lock_guard l(mu);
      if (req.method != "POST" || req.path() != "/v1/traces") return net::HttpResponse{404, "text/plain", "", {}};
      const std::string* ct = net::FindHeader(req.headers, "Content-Type");
      content_types.push_back(ct ? *ct : "");
      posts.push_back(json::parse(req.body, nullptr, false));
      return net::HttpResponse{200, "application/json", "{}", {}};
    });
    EXPECT_TRUE(server->Start().ok());
  }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", server->port()); }

  // The spans received for `trace_id`, waited for until there are at least `n` (or 3 s).
  std::vector<json> Spans(const std::string& trace_id, size_t n = 1) {
    std::vector<json> out;
    for (int i = 0; i < 600; ++i) {
      out.clear();
      {
        std::lock_guard l(mu);
        for (const json& p : posts) {
          if (!p.is_object()) continue;
          for (const json& rs : p["resourceSpans"]) {
            for (const json& ss : rs["scopeSpans"]) {
              for (const json& s : ss["spans"]) {
                if (s["traceId"] == trace_id) out.push_back(s);
              }
            }
          }
        }
      }
      if (out.size() >= n) return out;
      std::this_thread::sleep_for(5ms);
    }
    return out;
  }
};

// A fake engine: answers a whole completion, after `delay`, or with `status`; keeps the
// traceparent of each call.
struct FakeEngine {
  std::mutex mu;
  std::vector<std::string> traceparents;
  std::atomic<int> status{200};
  std::atomic<int> delay_ms{0};
  std::unique_ptr<net::HttpServer> server;

  FakeEngine() {
    server = std::make_unique<net::HttpServer>(net::HttpServerOptions{.threads = 2}, [this](const net::HttpRequest& req) {
      if (req.path() == "/health") return net::HttpResponse{200, "text/plain", "ok\n", {}};
      // The gateway's cache-capacity probe (GET /props, /metrics, ...) carries no trace.
      if (req.method != "POST") return net::HttpResponse{404, "text/plain", "not found\n", {}};
      {
        std::lock_guard l(mu);
        const std::string* tp = net::FindHeader(req.headers, "traceparent");
        traceparents.push_back(tp ? *tp : "");
      }
      if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
      if (status != 200) return net::JsonError(status, "server_error", "failing on purpose");
      return net::HttpResponse{
          200, "application/json",
          R"({"id":"cmpl-1","object":"text_completion","model":"emu-model","choices":[{"index":0,"text":" hi","finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}})",
          {}};
    });
    EXPECT_TRUE(server->Start().ok());
  }
  BackendConfig Backend(std::string name, std::string model = "emu-model") const {
    BackendConfig b = EmuBackend(std::move(name), server->port());
    b.model = std::move(model);
    return b;
  }
};

// A port nothing listens on: bound, then closed.
uint16_t DeadPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

GatewayConfig TracedConfig(const std::string& endpoint, double ratio = 1.0) {
  GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.access_log = "";
  c.scrape_interval = 0;
  c.health_interval = 10 * kSecond;
  c.tracing.endpoint = endpoint;
  c.tracing.sample_ratio = ratio;
  c.tracing.flush_interval = 10 * kMillisecond;
  return c;
}

std::unique_ptr<Gateway> StartGateway(const GatewayConfig& c, LogLines* log = nullptr) {
  auto g = Gateway::Create(c);
  EXPECT_TRUE(g.ok()) << g.status();
  if (log) log->Attach(**g);
  EXPECT_TRUE((*g)->Start().ok());
  return *std::move(g);
}

std::string Attr(const json& span, const std::string& key) {
  for (const json& a : span["attributes"]) {
    if (a["key"] != key) continue;
    const json& v = a["value"];
    if (v.contains("stringValue")) return v["stringValue"];
    if (v.contains("intValue")) return v["intValue"];
    if (v.contains("boolValue")) return v["boolValue"].get<bool>() ? "true" : "false";
    if (v.contains("doubleValue")) return v["doubleValue"].dump();
  }
  return "<absent>";
}

bool IsHex(const json& v, size_t n) {
  if (!v.is_string() || v.get<std::string>().size() != n) return false;
  for (char ch : v.get<std::string>()) {
    if (!std::isxdigit(static_cast<unsigned char>(ch)) || std::isupper(static_cast<unsigned char>(ch))) return false;
  }
  return true;
}

bool IsDecimal(const json& v) {
  return v.is_string() && !v.get<std::string>().empty() &&
         v.get<std::string>().find_first_not_of("0123456789") == std::string::npos;
}

const json* Find(const std::vector<json>& spans, int kind, const std::string& name_prefix = "") {
  for (const json& s : spans) {
    if (s["kind"] == kind && s["name"].get<std::string>().starts_with(name_prefix)) return &s;
  }
  return nullptr;
}

CallResult Post(uint16_t port, const std::string& body, const std::string& traceparent = "") {
  net::AsyncHttpClient ac;
  net::CallRequest req;
  req.server = net::HostPort{"127.0.0.1", port};
  req.target = "/v1/completions";
  req.body = body;
  if (!traceparent.empty()) req.headers.emplace_back("traceparent", traceparent);
  return CallAndWait(ac, req);
}

TEST(GatewayTracingTest, OneOtlpTracePerRequestRootRoutingAndAttemptUnderTheClientsTrace) {
  Collector col;
  FakeEngine engine;
  GatewayConfig c = TracedConfig(col.url());
  c.backends.push_back(engine.Backend("b0"));
  LogLines log;
  auto gw = StartGateway(c, &log);
  const std::string trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  const std::string client_span = "00f067aa0ba902b7";
  CallResult r = Post(gw->port(), Completion("hello", 1), fmt::format("00-{}-{}-01", trace_id, client_span));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(log.Line(1)["trace_id"], trace_id);
  std::vector<json> spans = col.Spans(trace_id, 3);
  ASSERT_EQ(spans.size(), 3u);
  {
    // The OTLP/JSON envelope.
    std::lock_guard l(col.mu);
    ASSERT_FALSE(col.posts.empty());
    EXPECT_EQ(col.content_types[0], "application/json");
    const json& p = col.posts[0];
    ASSERT_TRUE(p.is_object()) << "not JSON";
    const json& rs = p["resourceSpans"][0];
    bool service = false;
    for (const json& a : rs["resource"]["attributes"]) {
      service |= a["key"] == "service.name" && a["value"]["stringValue"] == "myriad-gateway";
    }
    EXPECT_TRUE(service) << rs["resource"].dump();
    EXPECT_EQ(rs["scopeSpans"][0]["scope"]["name"], "myriad.gateway");
  }
  for (const json& s : spans) {
    EXPECT_TRUE(IsHex(s["traceId"], 32)) << s.dump();
    EXPECT_TRUE(IsHex(s["spanId"], 16)) << s.dump();
    EXPECT_TRUE(IsHex(s["parentSpanId"], 16)) << s.dump();
    EXPECT_TRUE(s["kind"].is_number_integer());
    EXPECT_TRUE(IsDecimal(s["startTimeUnixNano"]) && IsDecimal(s["endTimeUnixNano"])) << s.dump();
    EXPECT_LE(std::stoll(s["startTimeUnixNano"].get<std::string>()), std::stoll(s["endTimeUnixNano"].get<std::string>()));
    EXPECT_TRUE(s["status"]["code"].is_number_integer());
    for (const json& a : s["attributes"]) {
      ASSERT_TRUE(a["key"].is_string());
      ASSERT_EQ(a["value"].size(), 1u) << a.dump();
      if (a["value"].contains("intValue")) {
        EXPECT_TRUE(a["value"]["intValue"].is_string()) << a.dump();
      }
    }
  }
  const json* root = Find(spans, 2);
  const json* route = Find(spans, 1, "route");
  const json* attempt = Find(spans, 3);
  ASSERT_TRUE(root && route && attempt);
  // The root is the client's child; the routing decision and the attempt are the root's.
  EXPECT_EQ((*root)["parentSpanId"], client_span);
  EXPECT_EQ((*route)["parentSpanId"], (*root)["spanId"]);
  EXPECT_EQ((*attempt)["parentSpanId"], (*root)["spanId"]);
  EXPECT_EQ((*root)["name"], "POST /v1/completions");
  EXPECT_EQ(Attr(*root, "http.request.method"), "POST");
  EXPECT_EQ(Attr(*root, "http.response.status_code"), "200");
  EXPECT_EQ(Attr(*root, "url.path"), "/v1/completions");
  EXPECT_EQ(Attr(*root, "gen_ai.request.model"), "emu-model");
  EXPECT_EQ(Attr(*root, "gen_ai.usage.input_tokens"), "3");
  EXPECT_EQ(Attr(*root, "gen_ai.usage.output_tokens"), "1");
  EXPECT_EQ(Attr(*root, "myriad.tenant"), "anonymous");
  EXPECT_EQ(Attr(*root, "myriad.sampled_by"), "head");
  EXPECT_EQ(Attr(*route, "myriad.route.backend"), "b0");
  EXPECT_EQ(Attr(*route, "myriad.route.candidates"), "1");
  EXPECT_EQ(Attr(*route, "myriad.route.tier"), "hbm:0,store:0");
  EXPECT_EQ(Attr(*route, "myriad.route.policy"), "kv-aware");
  EXPECT_NE(Attr(*route, "myriad.route.estimated_ttft_s"), "<absent>");
  EXPECT_EQ(Attr(*attempt, "server.address"), "127.0.0.1");
  EXPECT_EQ(Attr(*attempt, "server.port"), std::to_string(engine.server->port()));
  EXPECT_EQ(Attr(*attempt, "http.response.status_code"), "200");
  EXPECT_EQ(Attr(*attempt, "myriad.retry"), "0");
  EXPECT_EQ(Attr(*attempt, "myriad.backend"), "b0");
  EXPECT_EQ((*attempt)["status"]["code"], 0);
  // The engine's parent is the attempt's span, in the client's trace.
  {
    std::lock_guard l(engine.mu);
    ASSERT_EQ(engine.traceparents.size(), 1u);
    EXPECT_EQ(engine.traceparents[0],
              fmt::format("00-{}-{}-01", trace_id, (*attempt)["spanId"].get<std::string>()));
  }
  // The client is told the root.
  const std::string* tp = net::FindHeader(r.headers, "traceparent");
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(*tp, fmt::format("00-{}-{}-01", trace_id, (*root)["spanId"].get<std::string>()));
  // Another request, with no traceparent: a trace of its own.
  ASSERT_EQ(Post(gw->port(), Completion("again", 1)).status, 200);
  const std::string second = log.Line(2)["trace_id"];
  EXPECT_NE(second, trace_id);
  std::vector<json> other = col.Spans(second, 3);
  ASSERT_EQ(other.size(), 3u);
  ASSERT_NE(Find(other, 2), nullptr);
  EXPECT_FALSE(Find(other, 2)->contains("parentSpanId"));
  gw->Stop();
}

TEST(GatewayTracingTest, RatioZeroDropsAnOkButKeepsA502AndASlowRequest) {
  Collector col;
  FakeEngine fast;
  FakeEngine slow;
  slow.delay_ms = 150;
  GatewayConfig c = TracedConfig(col.url(), 0.0);
  c.tracing.slow_threshold = 100 * kMillisecond;
  c.backends.push_back(fast.Backend("fast"));
  c.backends.push_back(slow.Backend("slow", "slow-model"));
  BackendConfig dead = EmuBackend("dead", DeadPort());
  dead.model = "dead-model";
  c.backends.push_back(dead);
  LogLines log;
  auto gw = StartGateway(c, &log);
  auto body = [](std::string model) { return json({{"model", model}, {"prompt", "p"}, {"max_tokens", 1}}).dump(); };
  ASSERT_EQ(Post(gw->port(), body("emu-model")).status, 200);
  ASSERT_EQ(Post(gw->port(), body("dead-model")).status, 502);
  ASSERT_EQ(Post(gw->port(), body("slow-model")).status, 200);
  const std::string ok_id = log.Line(1)["trace_id"], failed_id = log.Line(2)["trace_id"],
                    slow_id = log.Line(3)["trace_id"];
  // The attempt, and a second routing decision that found no backend left to try.
  std::vector<json> failed = col.Spans(failed_id, 4);
  ASSERT_EQ(failed.size(), 4u);
  const json* root = Find(failed, 2);
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(Attr(*root, "http.response.status_code"), "502");
  EXPECT_EQ(Attr(*root, "myriad.sampled_by"), "error");
  EXPECT_EQ((*root)["status"]["code"], 2);
  const json* attempt = Find(failed, 3);
  ASSERT_NE(attempt, nullptr);
  EXPECT_EQ((*attempt)["status"]["code"], 2);
  EXPECT_EQ(Attr(*attempt, "error.type"), "connection");
  EXPECT_EQ(Attr(*attempt, "http.response.status_code"), "<absent>");
  int refused_routes = 0;
  for (const json& s : failed) refused_routes += Attr(s, "myriad.route.rejected") == "retry_no_available_unit";
  EXPECT_EQ(refused_routes, 1);
  std::vector<json> slow_spans = col.Spans(slow_id, 3);
  ASSERT_EQ(slow_spans.size(), 3u);
  ASSERT_NE(Find(slow_spans, 2), nullptr);
  EXPECT_EQ(Attr(*Find(slow_spans, 2), "myriad.sampled_by"), "slow");
  // Sampled out: the engine is told so, and nothing of it reaches the collector (the later
  // traces did: it would have come with or before them).
  EXPECT_TRUE(col.Spans(ok_id, 1).empty());
  {
    std::lock_guard l(fast.mu);
    ASSERT_EQ(fast.traceparents.size(), 1u);
    EXPECT_TRUE(fast.traceparents[0].ends_with("-00")) << fast.traceparents[0];
  }
  auto metrics = net::HttpClient(net::HostPort{"127.0.0.1", gw->port()}).Get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("myriad_gateway_traces_sampled_out_total 1\n"), std::string::npos) << metrics->body;
  const std::vector<std::string> complaints = myriad::testing::PromtoolComplaints(metrics->body);
  EXPECT_TRUE(complaints.empty()) << complaints[0];
  gw->Stop();
}

// One attempt refused (503), retried on the other backend: two routing decisions and two
// attempt spans, the first an error, both the root's children.
TEST(GatewayTracingTest, ARetryShowsAsTwoAttemptSpans) {
  Collector col;
  FakeEngine failing;
  failing.status = 503;
  FakeEngine good;
  GatewayConfig c = TracedConfig(col.url());
  c.policy = "round-robin";
  c.backends.push_back(failing.Backend("failing"));
  c.backends.push_back(good.Backend("good"));
  LogLines log;
  auto gw = StartGateway(c, &log);
  std::string retried;
  for (size_t i = 1; i <= 4 && retried.empty(); ++i) {
    ASSERT_EQ(Post(gw->port(), Completion(fmt::format("r{}", i), 1)).status, 200);
    if (log.Line(i)["attempts"] == 2) retried = log.Line(i)["trace_id"];
  }
  ASSERT_FALSE(retried.empty()) << "no request went to the failing backend first";
  std::vector<json> spans = col.Spans(retried, 5);
  ASSERT_EQ(spans.size(), 5u);
  const json* root = Find(spans, 2);
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(Attr(*root, "myriad.attempts"), "2");
  std::map<std::string, const json*> attempts;
  int routes = 0;
  for (const json& s : spans) {
    if (s["kind"] == 3) attempts[Attr(s, "myriad.retry")] = &s;
    if (s["name"] == "route") ++routes;
    if (&s != root) {
      EXPECT_EQ(s["parentSpanId"], (*root)["spanId"]);
    }
  }
  EXPECT_EQ(routes, 2);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(Attr(*attempts["0"], "myriad.backend"), "failing");
  EXPECT_EQ(Attr(*attempts["0"], "http.response.status_code"), "503");
  EXPECT_EQ((*attempts["0"])["status"]["code"], 2);
  EXPECT_EQ(Attr(*attempts["1"], "myriad.backend"), "good");
  EXPECT_EQ(Attr(*attempts["1"], "http.response.status_code"), "200");
  gw->Stop();
}

TEST(GatewayTracingTest, PrefillThenDecodeShowsBothAttemptsAndTheHandOff) {
  Collector col;
  GatewayConfig c = TracedConfig(col.url());
  c.scrape_interval = 50 * kMillisecond;
  Harness h(2, c, {BackendRole::kPrefill, BackendRole::kDecode});
  auto r = h.Client().Post("/v1/completions", Completion(Words(100, 3), 4, true));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string id = h.RequestLog(1)["trace_id"];
  std::vector<json> spans = col.Spans(id, 5);
  ASSERT_EQ(spans.size(), 5u);
  const json* handoff = Find(spans, 1, "pd handoff");
  ASSERT_NE(handoff, nullptr);
  EXPECT_EQ(Attr(*handoff, "myriad.pd.prefill_backend"), "b0");
  EXPECT_EQ(Attr(*handoff, "myriad.pd.decode_backend"), "b1");
  std::map<std::string, std::string> phases;
  for (const json& s : spans) {
    if (s["kind"] == 3) phases[Attr(s, "myriad.phase")] = Attr(s, "myriad.backend");
  }
  EXPECT_EQ(phases["prefill"], "b0");
  EXPECT_EQ(phases["decode"], "b1");
  EXPECT_EQ(Attr(*Find(spans, 1, "route"), "myriad.route.decode_backend"), "b1");
}

// A collector that is not there: requests are served as fast as ever, spans are dropped and
// counted, and the gateway stops promptly.
TEST(GatewayTracingTest, DeadCollectorNeitherSlowsNorBreaksRequestsAndDropsAreCounted) {
  FakeEngine engine;
  GatewayConfig c = TracedConfig(fmt::format("http://127.0.0.1:{}", DeadPort()));
  c.tracing.max_queue = 8;
  c.tracing.max_retries = 1;
  c.tracing.max_backoff = 10 * kMillisecond;
  c.backends.push_back(engine.Backend("b0"));
  auto gw = StartGateway(c);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 40; ++i) ASSERT_EQ(Post(gw->port(), Completion(fmt::format("d{}", i), 1)).status, 200);
  const double per_request_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 40;
  EXPECT_LT(per_request_ms, 100) << "the dead collector slowed requests";
  auto dropped = [&](const std::string& reason) {
    auto m = net::HttpClient(net::HostPort{"127.0.0.1", gw->port()}).Get("/metrics");
    const std::string key = fmt::format("myriad_gateway_trace_spans_dropped_total{{reason=\"{}\"}} ", reason);
    const size_t at = m.ok() ? m->body.find(key) : std::string::npos;
    return at == std::string::npos ? -1L : std::stol(m->body.substr(at + key.size()));
  };
  for (int i = 0; i < 300 && dropped("export_failed") <= 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_GT(dropped("export_failed"), 0);
  EXPECT_GT(dropped("queue_full"), 0);
  const auto s0 = std::chrono::steady_clock::now();
  gw->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - s0, 3s);
}

TEST(GatewayTracingTest, ConfigBoundsAreCheckedAndNamed) {
  auto bad = [](const std::string& yaml) {
    auto c = ParseGatewayConfig(yaml, "gw.yaml");
    return c.ok() ? std::string("accepted") : std::string(c.status().message());
  };
  EXPECT_EQ(bad("tracing: {sample_ratio: 1.5}"), "gw.yaml:1: tracing.sample_ratio: must be in [0, 1] (got 1.5)");
  EXPECT_NE(bad("tracing: {endpoint: 'ftp://x'}").find("tracing.endpoint"), std::string::npos);
  EXPECT_NE(bad("tracing: {max_queue: 0}").find("tracing.max_queue: must be in [1, 1000000]"), std::string::npos);
  EXPECT_NE(bad("tracing: {max_batch: 20000}").find("tracing.max_batch"), std::string::npos);
  EXPECT_NE(bad("tracing: {slow_threshold: 2h}").find("tracing.slow_threshold"), std::string::npos);
  EXPECT_NE(bad("tracing: {flush_interval: 0s}").find("tracing.flush_interval"), std::string::npos);
  EXPECT_NE(bad("tracing: {max_retries: 11}").find("tracing.max_retries"), std::string::npos);
  EXPECT_NE(bad("tracing: {max_spans_per_request: 1}").find("tracing.max_spans_per_request"), std::string::npos);
  EXPECT_NE(bad("tracing: {sampel_ratio: 1}").find("sampel_ratio"), std::string::npos);
  auto ok = ParseGatewayConfig(
      "tracing: {endpoint: 'http://127.0.0.1:4318', sample_ratio: 0.1, slow_threshold: 2s, service_name: gw-a}", "gw.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->tracing.endpoint, "http://127.0.0.1:4318");
  EXPECT_EQ(ok->tracing.slow_threshold, 2 * kSecond);
  EXPECT_EQ(ok->tracing.service_name, "gw-a");
}

}  // namespace
}  // namespace myriad::gateway
