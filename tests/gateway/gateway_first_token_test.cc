// The gateway counts an answer's first byte at the upstream's first token, not at its header:
// engines such as llama.cpp send 200 and the SSE header (and keep-alive comments) before they
// prefill, and may still fail before a token. Scripted engines on loopback show the client's
// answer held until the token, a failure before it retried elsewhere, the prefill charge and
// the learned cost taken at the token, and completed streams counted as such.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gateway/stream_meter.h"
#include "gateway_test_util.h"

namespace myriad::gateway {
namespace {

using namespace gwtest;
using Steady = std::chrono::steady_clock;

constexpr std::string_view kTokenEvent = "data: {\"choices\":[{\"index\":0,\"text\":\" hi\"}]}\n\n";
constexpr std::string_view kLastEvent =
    "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n";
constexpr std::string_view kDone = "data: [DONE]\n\n";

// An engine on loopback that answers each generation request with a script (on a thread of
// its own, so the script may sleep); other paths (health checks) get 200.
class ScriptedEngine {
 public:
  using Script = std::function<void(net::HttpResponder& r)>;
  explicit ScriptedEngine(Script script) : script_(std::move(script)) {
    net::HttpServerOptions o;
    o.threads = 2;
    o.stop_grace = 100 * kMillisecond;
    server_ = std::make_unique<net::HttpServer>(o, [this](net::HttpRequest req, std::shared_ptr<net::HttpResponder> r) {
      if (!req.path().starts_with("/v1/")) return r->Respond(net::HttpResponse{200, "text/plain", "ok\n", {}});
      requests_++;
      std::lock_guard l(mu_);
      threads_.emplace_back([this, r] { script_(*r); });
    });
    EXPECT_TRUE(server_->Start().ok());
  }
  ~ScriptedEngine() {
    std::vector<std::thread> threads;
    {
      std::lock_guard l(mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
    server_->Stop();
  }
  uint16_t port() const { return server_->port(); }
  int requests() const { return requests_; }

 private:
  Script script_;
  std::atomic<int> requests_{0};
  std::mutex mu_;
  std::vector<std::thread> threads_;
  std::unique_ptr<net::HttpServer> server_;
};

// The header and a keep-alive comment at once, the first token after `prefill`.
ScriptedEngine::Script SlowPrefill(std::chrono::milliseconds prefill) {
  return [prefill](net::HttpResponder& r) {
    r.BeginStream(200, "text/event-stream");
    r.Write(": keep-alive\n\n");
    std::this_thread::sleep_for(prefill);
    r.Write(kTokenEvent);
    r.Write(kLastEvent);
    r.Write(kDone);
    r.End();
  };
}

struct Gw {
  std::unique_ptr<Gateway> gw;
  LogLines log;
  Gw(std::vector<std::pair<std::string, uint16_t>> backends, GatewayConfig c = {}) {
    c.listen = "127.0.0.1:0";
    c.access_log = "";
    c.admin_token = "admin";
    c.policy = "round-robin";
    c.health_interval = 10 * kSecond;
    c.scrape_interval = 0;
    for (const auto& [name, port] : backends) c.backends.push_back(EmuBackend(name, port));
    auto g = Gateway::Create(c);
    EXPECT_TRUE(g.ok()) << g.status();
    gw = *std::move(g);
    log.Attach(*gw);
    EXPECT_TRUE(gw->Start().ok());
  }
  ~Gw() { gw->Stop(); }
  json Backend(const std::string& name) {
    net::HttpClient cl(net::HostPort{"127.0.0.1", gw->port()});
    auto r = cl.Request("GET", "/admin/backends", "", {}, {{"Authorization", "Bearer admin"}});
    EXPECT_TRUE(r.ok() && r->status == 200);
    if (!r.ok()) return json();
    const json list = json::parse(r->body);
    for (const json& b : list["backends"]) {
      if (b["name"] == name) return b;
    }
    return json();
  }
};

net::CallRequest StreamRequest(uint16_t port, const std::string& prompt) {
  net::CallRequest req;
  req.server = net::HostPort{"127.0.0.1", port};
  req.target = "/v1/completions";
  req.body = Completion(prompt, 4, true);
  return req;
}

// The client's answer, the prefill charge and the learned cost all wait for the token: while the
// engine has sent only its header and a comment, the charge stays on the backend and the
// client has no header; the cost sample is the time to the token, not to the engine's header.
TEST(GatewayFirstTokenTest, ChargeIsHeldAndCostLearnedUntilTheFirstTokenNotTheHeader) {
  ScriptedEngine engine(SlowPrefill(std::chrono::milliseconds(400)));
  Gw g({{"slow", engine.port()}});
  net::AsyncHttpClient ac;
  std::atomic<bool> header{false};
  std::atomic<bool> done{false};
  const std::string prompt = Words(100, 1);
  const auto sent = Steady::now();
  Steady::time_point header_at;
  auto call = ac.Start(StreamRequest(g.gw->port(), prompt),
                       {.on_header = [&](int, const net::Headers&) {
                          header_at = Steady::now();
                          header = true;
                        },
                        .on_data = nullptr,
                        .on_done = [&](absl::Status, net::CallStage) { done = true; }});
  for (int i = 0; i < 200 && engine.requests() == 0; ++i) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(150ms);  // the engine's header and comment are long out
  const json during = g.Backend("slow");
  ASSERT_TRUE(during.contains("cost_model")) << during;
  EXPECT_FALSE(header) << "the client's answer began before the first token";
  EXPECT_EQ(during["inflight"], 1) << during;
  EXPECT_GT(during["queued_prefill_tokens"].get<int64_t>(), 0) << during;
  EXPECT_EQ(during["cost_model"]["samples"], 0) << during;
  for (int i = 0; i < 400 && !done; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(done);
  ASSERT_TRUE(header);
  EXPECT_GE(header_at - sent, 350ms);
  const json after = g.Backend("slow");
  ASSERT_TRUE(after.contains("cost_model")) << after;
  EXPECT_EQ(after["queued_prefill_tokens"], 0) << after;
  const json& cm = after["cost_model"];
  ASSERT_EQ(cm["samples"], 1) << after;
  // The fit passes near its one sample (the prior keeps only its shape): ~0.4 s, where the
  // header came in about a millisecond.
  const int64_t uncached = g.log.Line(1)["input_tokens_est"].get<int64_t>();
  const double predicted = cm["fixed_s"].get<double>() + cm["per_uncached_token_s"].get<double>() * uncached;
  EXPECT_GT(predicted, 0.2) << cm;
  EXPECT_LT(predicted, 0.8) << cm;
}

// TTFT in the access log and the metrics is the first token's, not the header's.
TEST(GatewayFirstTokenTest, TtftInTheLogAndMetricsIsTheDelayBeforeTheFirstToken) {
  ScriptedEngine engine(SlowPrefill(std::chrono::milliseconds(200)));
  Gw g({{"slow", engine.port()}});
  net::AsyncHttpClient ac;
  const CallResult r = CallAndWait(ac, StreamRequest(g.gw->port(), "a b c d"));
  ASSERT_EQ(r.status, 200) << r.body;
  const json line = g.log.Line(1);
  ASSERT_TRUE(line.is_object());
  EXPECT_LT(line["first_byte_ms"].get<double>(), 100) << line;  // the engine's header
  EXPECT_GE(line["ttft_ms"].get<double>(), 190) << line;
  net::HttpClient cl(net::HostPort{"127.0.0.1", g.gw->port()});
  const std::string metrics = cl.Get("/metrics")->body;
  EXPECT_NE(metrics.find(R"(myriad_gateway_ttft_seconds_bucket{model="emu-model",tenant="anonymous",le="0.1"} 0)"),
            std::string::npos)
      << metrics;
}

// An engine that sends its header and then dies (or sends an error event, or no token in time)
// before any token: the client gets one clean answer from the other backend, a single 200.
void ExpectRetriedBeforeTheFirstToken(ScriptedEngine::Script failing, GatewayConfig c = {}) {
  ScriptedEngine bad(std::move(failing)), good(SlowPrefill(std::chrono::milliseconds(1)));
  Gw g({{"bad", bad.port()}, {"good", good.port()}}, c);
  net::AsyncHttpClient ac;
  int retried = 0;
  for (int i = 0; i < 3; ++i) {  // round robin: at least one starts on the bad engine
    const CallResult r = CallAndWait(ac, StreamRequest(g.gw->port(), fmt::format("retry me {}", i)));
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body, std::string(": keep-alive\n\n") + std::string(kTokenEvent) + std::string(kLastEvent) +
                          std::string(kDone));
    const std::string* b = net::FindHeader(r.headers, "X-Myriad-Backend");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(*b, "good");
    const json line = g.log.Line(static_cast<size_t>(i + 1));
    EXPECT_EQ(line["status"], 200) << line;
    if (line["attempts"] == 2) {
      retried++;
      EXPECT_EQ(line["tried"], json({"bad", "good"})) << line;
      EXPECT_TRUE(line.contains("error")) << line;
    }
  }
  EXPECT_GE(retried, 1);
  EXPECT_EQ(retried, bad.requests());
  EXPECT_EQ(g.gw->stats().retries, static_cast<uint64_t>(retried));
}

TEST(GatewayFirstTokenTest, EngineThatDiesAfterItsHeaderIsRetriedElsewhere) {
  ExpectRetriedBeforeTheFirstToken([](net::HttpResponder& r) {
    r.BeginStream(200, "text/event-stream");
    r.Write(": keep-alive\n\n");
    std::this_thread::sleep_for(20ms);
    r.Abort();  // the engine process is gone
  });
}

TEST(GatewayFirstTokenTest, ErrorEventBeforeTheFirstTokenIsRetriedElsewhere) {
  ExpectRetriedBeforeTheFirstToken([](net::HttpResponder& r) {
    r.BeginStream(200, "text/event-stream");
    r.Write("data: {\"error\":{\"message\":\"out of memory\",\"code\":500}}\n\n");
    r.End();
  });
}

// The same with the emulator, which (like llama.cpp) sends its header before it prefills:
// cut before its first token, the request is answered by the other engine, cleanly.
TEST(GatewayFirstTokenTest, EmulatedEngineCutBeforeItsFirstTokenIsRetriedElsewhere) {
  GatewayConfig c;
  c.policy = "round-robin";
  Harness h(2, c);
  net::HttpClient e0(net::HostPort{"127.0.0.1", h.emus[0]->port()});
  ASSERT_EQ(e0.Post("/admin/fault", R"({"kind":"drop_stream","after_tokens":0})")->status, 200);
  auto cl = h.Client();
  for (int i = 0; i < 3; ++i) {
    auto r = cl.Post("/v1/completions", Completion(fmt::format("cut early {}", i), 5, true));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(*net::FindHeader(r->headers, "X-Myriad-Backend"), "b1");
    EXPECT_EQ(r->body.find("error"), std::string::npos) << r->body;
    EXPECT_NE(r->body.find("data: [DONE]"), std::string::npos) << r->body;
  }
  EXPECT_GE(h.gw->stats().retries, 1u);
}

// The hold is bounded: an engine that keeps its stream alive with comments but sends no token
// within first_byte_timeout is given up, and another answers.
TEST(GatewayFirstTokenTest, NoTokenWithinFirstByteTimeoutIsRetriedElsewhere) {
  GatewayConfig c;
  c.first_byte_timeout = 300 * kMillisecond;
  ExpectRetriedBeforeTheFirstToken(
      [](net::HttpResponder& r) {
        r.BeginStream(200, "text/event-stream");
        for (int i = 0; i < 10 && !r.client_gone(); ++i) {
          r.Write(": keep-alive\n\n");
          std::this_thread::sleep_for(50ms);
        }
        r.End();
      },
      c);
}

// A client that closes as soon as it has read [DONE], before the engine's stream has ended,
// had its whole answer: a success, not a 499, and in the duration histogram.
TEST(GatewayFirstTokenTest, ClientClosingRightAfterDoneIsNotCountedAsACancel) {
  ScriptedEngine engine([](net::HttpResponder& r) {
    r.BeginStream(200, "text/event-stream");
    r.Write(kTokenEvent);
    r.Write(kLastEvent);
    r.Write(kDone);
    std::this_thread::sleep_for(20ms);  // the engine's last chunk comes after [DONE]
    r.End();
  });
  Gw g({{"e", engine.port()}});
  net::AsyncHttpClient ac;
  constexpr int kStreams = 50;
  for (int i = 0; i < kStreams; ++i) {
    std::mutex mu;
    std::condition_variable cv;
    std::string body;
    bool got_done = false, ended = false;
    std::shared_ptr<net::Call> call;
    call = ac.Start(StreamRequest(g.gw->port(), fmt::format("short {}", i)),
                    {.on_header = nullptr,
                     .on_data =
                         [&](std::string_view d) {
                           std::lock_guard l(mu);
                           body.append(d);
                           if (body.find("[DONE]") != std::string::npos) got_done = true;
                           cv.notify_all();
                         },
                     .on_done = [&](absl::Status, net::CallStage) {
                       std::lock_guard l(mu);
                       ended = true;
                       cv.notify_all();
                     }});
    {
      std::unique_lock l(mu);
      ASSERT_TRUE(cv.wait_for(l, 5s, [&] { return got_done || ended; }));
      ASSERT_TRUE(got_done) << body;
    }
    call->Cancel();  // closes the connection at once
    std::unique_lock l(mu);
    ASSERT_TRUE(cv.wait_for(l, 5s, [&] { return ended; }));
  }
  for (int i = 1; i <= kStreams; ++i) EXPECT_EQ(g.log.Line(static_cast<size_t>(i))["status"], 200) << i;
  EXPECT_EQ(g.gw->stats().client_cancels, 0u);
  net::HttpClient cl(net::HostPort{"127.0.0.1", g.gw->port()});
  const std::string metrics = cl.Get("/metrics")->body;
  EXPECT_NE(metrics.find(fmt::format(
                R"(myriad_gateway_request_seconds_count{{model="emu-model",tenant="anonymous"}} {})", kStreams)),
            std::string::npos)
      << metrics;
  EXPECT_EQ(metrics.find(R"(code="499")"), std::string::npos) << metrics;
}

TEST(StreamMeterTest, SeesTheStreamsEndAndAnErrorBeforeAnyToken) {
  StreamMeter m(true);
  m.OnData(": keep-alive\n\ndata: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n", {});
  EXPECT_FALSE(m.has_first_token());
  EXPECT_FALSE(m.ended());
  m.OnData(kTokenEvent, {});
  // Generated text that looks like a key is escaped: neither an error nor an end.
  m.OnData("data: {\"choices\":[{\"text\":\"\\\"error\\\": \\\"finish_reason\\\":\\\"x\"}]}\n\n", {});
  EXPECT_TRUE(m.has_first_token());
  EXPECT_FALSE(m.ended());
  EXPECT_FALSE(m.error_before_token());
  m.OnData(kLastEvent, {});
  EXPECT_TRUE(m.ended());
  StreamMeter done(true);
  done.OnData(kDone, {});
  EXPECT_TRUE(done.ended());
  for (const char* error : {"data: {\"error\":{\"message\":\"oom\"}}\n\n", "error: {\"code\":500}\n\n"}) {
    StreamMeter e(true);
    e.OnData(error, {});
    EXPECT_TRUE(e.error_before_token()) << error;
    EXPECT_FALSE(e.has_first_token());
  }
}

// first_byte_timeout bounds the hold: zero (every stream would fail) and over a day are refused,
// naming the file, line and key.
TEST(GatewayFirstTokenTest, FirstByteTimeoutOutOfBoundsNamesItsLine) {
  for (const char* bad : {"0s", "25h"}) {
    auto c = ParseGatewayConfig(fmt::format("listen: 127.0.0.1:0\nupstream:\n  first_byte_timeout: {}\n", bad),
                                "gw.yaml");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find("gw.yaml:3"), std::string::npos) << c.status();
    EXPECT_NE(c.status().message().find("upstream.first_byte_timeout"), std::string::npos) << c.status();
    EXPECT_NE(c.status().message().find("[1ms, 24h]"), std::string::npos) << c.status();
  }
  EXPECT_TRUE(ParseGatewayConfig("upstream:\n  first_byte_timeout: 24h\n", "gw.yaml").ok());
}

}  // namespace
}  // namespace myriad::gateway
