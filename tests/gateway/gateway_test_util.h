#pragma once
// Shared by the gateway's end-to-end tests: emulated engines (emu::EmuServer) on loopback, a
// gateway in front of them, clients calling it as they would call OpenAI, and the gateway's
// access-log lines collected.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "emu/emu_server.h"
#include "gateway/config.h"
#include "gateway/gateway.h"
#include "net/async_http_client.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "tokenizer/prompt_encoder.h"

namespace myriad::gateway::gwtest {

using json = nlohmann::json;
using namespace std::chrono_literals;

inline std::unique_ptr<emu::EmuServer> StartEmu(std::string name = "emu-model") {
  emu::EmuOptions o;
  o.engine.speed = 50;
  o.served_model_name = std::move(name);
  auto s = emu::EmuServer::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Start().ok());
  return *std::move(s);
}

inline BackendConfig EmuBackend(std::string name, uint16_t port, BackendRole role = BackendRole::kColocated) {
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

  // `clock`: the gateway's (core/clock.h); a ManualClock runs its health rounds only when the
  // test advances it.
  explicit Harness(int n, GatewayConfig c = {}, std::vector<BackendRole> roles = {},
                   std::shared_ptr<Clock> clock = nullptr) {
    c.listen = "127.0.0.1:0";
    c.health_interval = 50 * kMillisecond;
    c.scrape_interval = 50 * kMillisecond;
    c.health_timeout = 200 * kMillisecond;
    c.access_log = "";
    for (int i = 0; i < n; ++i) {
      emus.push_back(StartEmu());
      c.backends.push_back(EmuBackend(fmt::format("b{}", i), emus.back()->port(),
                                   i < static_cast<int>(roles.size()) ? roles[i] : BackendRole::kColocated));
    }
    auto g = Gateway::Create(c, std::move(clock));
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

inline std::string Completion(std::string prompt, int max_tokens = 4, bool stream = false) {
  return json({{"model", "emu-model"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"stream", stream}})
      .dump();
}

inline std::string Words(int n, int seed) {
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
inline CallResult CallAndWait(net::AsyncHttpClient& client, const net::CallRequest& req) {
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

// A call with an Authorization header (HttpClient has no header API).
inline CallResult Send(net::AsyncHttpClient& client, uint16_t port, const std::string& method,
                       const std::string& target, const std::string& body, const std::string& bearer) {
  net::CallRequest req;
  req.server = net::HostPort{"127.0.0.1", port};
  req.method = method;
  req.target = target;
  req.body = body;
  req.headers.emplace_back("Content-Type", "application/json");
  if (!bearer.empty()) req.headers.emplace_back("Authorization", "Bearer " + bearer);
  return CallAndWait(client, req);
}

// `n` emulated engines publishing KV events (with replay), added to `c` as backends b0..b<n-1>.
// Waits (up to 2 s) until the gateway has indexed `blocks` blocks from the engines' events;
// returns how many it has.
inline uint64_t WaitBlocksStored(Gateway& gw, uint64_t blocks) {
  for (int i = 0; i < 400 && gw.kv_event_stats().blocks_stored < blocks; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return gw.kv_event_stats().blocks_stored;
}

// A gateway on a free port whose routing only the engines' KV events can explain: its own
// provisional entries expire at once, no access log file, no health probes or scrapes between.
inline GatewayConfig EventsOnlyConfig() {
  GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.access_log = "";
  c.approx_ttl = 1;
  c.health_interval = 10 * kSecond;
  c.scrape_interval = 0;
  return c;
}

// n emulated engines publishing KV events (each with dp_ranks DP ranks behind one API), and a
// backend for each in the gateway's config.
inline void StartEventEmus(int n, std::shared_ptr<const tokenizer::PromptEncoder> encoder, GatewayConfig* c,
                           std::vector<std::unique_ptr<emu::EmuServer>>* emus, int dp_ranks = 1) {
  for (int i = 0; i < n; ++i) {
    emu::EmuOptions o;
    o.engine.speed = 50;
    o.encoder = encoder;
    o.kv_events = "tcp://127.0.0.1:*";
    o.kv_replay = "tcp://127.0.0.1:*";
    o.dp_ranks = dp_ranks;
    auto e = emu::EmuServer::Create(o);
    ASSERT_TRUE(e.ok()) << e.status();
    const absl::Status started = (*e)->Start();
    ASSERT_TRUE(started.ok()) << started;
    BackendConfig b;
    b.name = fmt::format("b{}", i);
    b.url = fmt::format("http://127.0.0.1:{}", (*e)->port());
    b.model = "emu-model";
    b.kv_events = (*e)->kv_events_endpoint();
    b.kv_replay = (*e)->kv_replay_endpoint();
    b.dp_ranks = dp_ranks;
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

}  // namespace myriad::gateway::gwtest
