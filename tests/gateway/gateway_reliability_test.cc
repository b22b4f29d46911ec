// The gateway under the clients and shutdowns that break proxies: a reader that never reads,
// upstream calls on the connection's own thread, stopping with requests in flight.
#include "gateway_test_util.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace myriad::gateway {
namespace {

using namespace gwtest;

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


// upstream_threads: 2: upstream calls on threads of their own, each chunk handed to the client's
// connection thread (the default, 0, runs both sides on one thread and is what the other tests
// use). The same behaviour: streaming, retry on another backend, cancel.
TEST(GatewaySeparateThreadsTest, StreamsRetriesAndCancelsAcrossThreads) {
  GatewayConfig c;
  c.threads = 2;
  c.upstream_threads = 2;
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
