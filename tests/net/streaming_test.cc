// The asynchronous side of net: a server whose handler answers later or streams chunks, and
// the AsyncHttpClient that a proxy uses upstream. Real sockets on loopback.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/async_http_client.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "net_test_util.h"

namespace myriad::net {
namespace {

using namespace std::chrono_literals;

// The result of one AsyncHttpClient call, waited for with a deadline.
struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  int status = 0;
  std::vector<std::string> pieces;
  std::string body;
  bool done = false;
  absl::Status result;
  CallStage stage = CallStage::kConnect;

  CallCallbacks Callbacks() {
    CallCallbacks cb;
    cb.on_header = [this](int s, const Headers&) {
      std::lock_guard l(mu);
      status = s;
    };
    cb.on_data = [this](std::string_view d) {
      std::lock_guard l(mu);
      pieces.emplace_back(d);
      body.append(d);
      cv.notify_all();
    };
    cb.on_done = [this](absl::Status st, CallStage sg) {
      std::lock_guard l(mu);
      result = std::move(st);
      stage = sg;
      done = true;
      cv.notify_all();
    };
    return cb;
  }
  bool Wait(std::chrono::milliseconds limit = 10s) {
    std::unique_lock l(mu);
    return cv.wait_for(l, limit, [this] { return done; });
  }
  bool WaitForBody(std::string_view what, std::chrono::milliseconds limit = 10s) {
    std::unique_lock l(mu);
    return cv.wait_for(l, limit, [&] { return body.find(what) != std::string::npos; });
  }
};

CallRequest Get(uint16_t port, std::string target) {
  CallRequest r;
  r.server = HostPort{"127.0.0.1", port};
  r.method = "GET";
  r.target = std::move(target);
  return r;
}

// A streaming handler fed by the test: each request's responder is handed to the test.
class StreamingServer {
 public:
  explicit StreamingServer(HttpServerOptions o = {}) {
    o.threads = 2;
    server_ = std::make_unique<HttpServer>(
        o, [this](HttpRequest req, std::shared_ptr<HttpResponder> r) {
          if (req.path() == "/now") {
            r->Respond(HttpResponse{200, "text/plain", "now", {}});
            return;
          }
          if (req.path() == "/drop") return;  // dropped unanswered
          std::lock_guard l(mu_);
          pending_.push_back(std::move(r));
          cv_.notify_all();
        });
    EXPECT_TRUE(server_->Start().ok());
  }
  ~StreamingServer() {
    {
      std::lock_guard l(mu_);
      pending_.clear();
    }
    server_->Stop();
  }
  std::shared_ptr<HttpResponder> Next() {
    std::unique_lock l(mu_);
    if (!cv_.wait_for(l, 10s, [this] { return !pending_.empty(); })) return nullptr;
    auto r = pending_.front();
    pending_.erase(pending_.begin());
    return r;
  }
  uint16_t port() const { return server_->port(); }
  HttpServer& server() { return *server_; }

 private:
  std::unique_ptr<HttpServer> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<HttpResponder>> pending_;
};

TEST(StreamingTest, ChunksArriveAsWrittenNotAtTheEnd) {
  StreamingServer server;
  AsyncHttpClient client;
  Collected c;
  auto call = client.Start(Get(server.port(), "/stream"), c.Callbacks());
  auto r = server.Next();
  ASSERT_NE(r, nullptr);
  r->BeginStream(200, "text/event-stream", {{"X-Test", "1"}});
  r->Write("data: one\n\n");
  // The first event reaches the client while the response is still open.
  ASSERT_TRUE(c.WaitForBody("data: one\n\n"));
  EXPECT_FALSE(c.done);
  r->Write("data: two\n\n");
  ASSERT_TRUE(c.WaitForBody("data: two\n\n"));
  r->Write("data: [DONE]\n\n");
  r->End();
  ASSERT_TRUE(c.Wait());
  EXPECT_TRUE(c.result.ok()) << c.result;
  EXPECT_EQ(c.status, 200);
  EXPECT_EQ(c.body, "data: one\n\ndata: two\n\ndata: [DONE]\n\n");
  EXPECT_GE(c.pieces.size(), 2u);
}

TEST(StreamingTest, KeepAliveAfterStreamAndAfterLateAnswer) {
  StreamingServer server;
  HttpClient client(HostPort{"127.0.0.1", server.port()});
  std::thread t([&] {
    auto r = server.Next();
    ASSERT_NE(r, nullptr);
    r->BeginStream(200, "text/plain");
    r->Write("ab");
    r->Write("cd");
    r->End();
    r = server.Next();
    ASSERT_NE(r, nullptr);
    std::this_thread::sleep_for(50ms);  // answered later, from another thread
    r->Respond(HttpResponse{201, "text/plain", "late", {}});
  });
  auto a = client.Get("/s");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->body, "abcd");
  auto b = client.Get("/late");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->status, 201);
  EXPECT_EQ(b->body, "late");
  auto now = client.Get("/now");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->body, "now");
  EXPECT_EQ(client.reused(), 2u);
  t.join();
}

TEST(StreamingTest, DroppedResponderAnswers500) {
  StreamingServer server;
  HttpClient client(HostPort{"127.0.0.1", server.port()});
  auto r = client.Get("/drop");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 500);
  EXPECT_NE(r->body.find("unanswered"), std::string::npos);
}

TEST(StreamingTest, ClientThatLeavesIsReportedToTheHandler) {
  StreamingServer server;
  std::atomic<bool> gone{false};
  std::shared_ptr<HttpResponder> r;  // held, unanswered, while the client leaves
  {
    testing::RawSocket s(server.port());
    ASSERT_TRUE(s.Send("GET /wait HTTP/1.1\r\nHost: x\r\n\r\n"));
    r = server.Next();
    ASSERT_NE(r, nullptr);
    r->OnClientGone([&] { gone = true; });
    EXPECT_FALSE(r->client_gone());
  }  // the client closes its socket
  for (int i = 0; i < 500 && !gone; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(gone.load());
  EXPECT_TRUE(r->client_gone());
  EXPECT_EQ(server.server().stats().clients_gone, 1u);
  r->Respond(HttpResponse{});  // to nobody: dropped quietly
}

TEST(StreamingTest, CancelClosesTheUpstreamConnection) {
  StreamingServer server;
  AsyncHttpClient client;
  Collected c;
  auto call = client.Start(Get(server.port(), "/stream"), c.Callbacks());
  auto r = server.Next();
  ASSERT_NE(r, nullptr);
  std::atomic<bool> gone{false};
  r->OnClientGone([&] { gone = true; });
  r->BeginStream(200, "text/event-stream");
  r->Write("data: x\n\n");
  ASSERT_TRUE(c.WaitForBody("data: x"));
  call->Cancel();
  ASSERT_TRUE(c.Wait());
  EXPECT_EQ(c.result.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(c.stage, CallStage::kBody);
  for (int i = 0; i < 500 && !gone; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(gone.load());
  EXPECT_TRUE(r->client_gone());
}

TEST(StreamingTest, TimeoutsAndUnreachableServers) {
  StreamingServer server;
  AsyncHttpClient client;
  {  // no header within first_byte
    Collected c;
    CallRequest req = Get(server.port(), "/slow");
    req.timeouts.first_byte = 100 * kMillisecond;
    auto call = client.Start(req, c.Callbacks());
    auto r = server.Next();
    ASSERT_TRUE(c.Wait());
    EXPECT_EQ(c.result.code(), absl::StatusCode::kDeadlineExceeded) << c.result;
    EXPECT_EQ(c.stage, CallStage::kHeader);
  }
  {  // a stream that stalls longer than idle
    Collected c;
    CallRequest req = Get(server.port(), "/stall");
    req.timeouts.idle = 100 * kMillisecond;
    auto call = client.Start(req, c.Callbacks());
    auto r = server.Next();
    ASSERT_NE(r, nullptr);
    r->BeginStream(200, "text/event-stream");
    r->Write("data: 1\n\n");
    ASSERT_TRUE(c.Wait());
    EXPECT_EQ(c.result.code(), absl::StatusCode::kDeadlineExceeded) << c.result;
    EXPECT_EQ(c.stage, CallStage::kBody);
    EXPECT_EQ(c.body, "data: 1\n\n");
  }
  {  // nothing listens there
    uint16_t dead_port;
    {
      HttpServer tmp(HttpServerOptions{}, [](const HttpRequest&) { return HttpResponse{}; });
      ASSERT_TRUE(tmp.Start().ok());
      dead_port = tmp.port();
    }
    Collected c;
    auto call = client.Start(Get(dead_port, "/"), c.Callbacks());
    ASSERT_TRUE(c.Wait());
    EXPECT_EQ(c.result.code(), absl::StatusCode::kUnavailable) << c.result;
    EXPECT_EQ(c.stage, CallStage::kConnect);
  }
}

// Deadlines bound each operation, not the whole exchange: the server's write_timeout does not
// run while its handler waits for the next chunk, and the client's idle timeout restarts with
// every chunk read.
TEST(StreamingTest, DeadlinesBoundEachOperationNotTheExchange) {
  HttpServerOptions o;
  o.write_timeout = 100 * kMillisecond;
  StreamingServer server(o);
  AsyncHttpClient client;
  Collected c;
  CallRequest req = Get(server.port(), "/paced");
  req.timeouts.idle = 400 * kMillisecond;  // 250 ms of slack per gap on a loaded machine
  auto call = client.Start(req, c.Callbacks());
  auto r = server.Next();
  ASSERT_NE(r, nullptr);
  r->BeginStream(200, "text/event-stream");
  std::string want;
  for (int i = 0; i < 6; ++i) {  // 6 x 150 ms: past both timeouts in all, within each per gap
    std::this_thread::sleep_for(150ms);
    const std::string event = fmt::format("data: {}\n\n", i);
    r->Write(event);
    want += event;
    ASSERT_TRUE(c.WaitForBody(event)) << i;
  }
  r->End();
  ASSERT_TRUE(c.Wait());
  EXPECT_TRUE(c.result.ok()) << c.result;
  EXPECT_EQ(c.body, want);
  EXPECT_EQ(server.server().stats().timeouts, 0u);
}

TEST(StreamingTest, PooledConnectionsAreReusedAndStaleOnesRetried) {
  HttpServerOptions o;
  o.idle_timeout = 200 * kMillisecond;  // the server closes idle connections quickly
  StreamingServer server(o);
  AsyncHttpClient client;
  for (int i = 0; i < 3; ++i) {
    Collected c;
    auto call = client.Start(Get(server.port(), "/now"), c.Callbacks());
    ASSERT_TRUE(c.Wait());
    ASSERT_TRUE(c.result.ok()) << c.result;
    EXPECT_EQ(c.body, "now");
  }
  EXPECT_EQ(client.stats().connections_opened, 1u);
  EXPECT_EQ(client.stats().connections_reused, 2u);
  std::this_thread::sleep_for(400ms);  // the pooled connection is now closed by the server
  Collected c;
  CallRequest post = Get(server.port(), "/now");
  post.method = "POST";
  post.body = "{}";
  auto call = client.Start(post, c.Callbacks());
  ASSERT_TRUE(c.Wait());
  EXPECT_TRUE(c.result.ok()) << c.result;
  EXPECT_EQ(c.body, "now");
  EXPECT_EQ(client.stats().connections_opened, 2u);
}

TEST(StreamingTest, ManyConcurrentStreams) {
  HttpServerOptions o;
  o.threads = 2;
  std::atomic<int> served{0};
  HttpServer server(o, [&](HttpRequest, std::shared_ptr<HttpResponder> r) {
    // Stream from another thread, as a proxy relays an upstream's chunks.
    std::thread([r, &served] {
      r->BeginStream(200, "text/event-stream");
      for (int i = 0; i < 20; ++i) r->Write("data: " + std::to_string(i) + "\n\n");
      r->End();
      served++;
    }).detach();
  });
  ASSERT_TRUE(server.Start().ok());
  std::string expected;
  for (int i = 0; i < 20; ++i) expected += "data: " + std::to_string(i) + "\n\n";
  AsyncHttpClient client(AsyncHttpClientOptions{.threads = 2});
  std::vector<std::unique_ptr<Collected>> all;
  for (int i = 0; i < 64; ++i) {
    all.push_back(std::make_unique<Collected>());
    client.Start(Get(server.port(), "/s"), all.back()->Callbacks());
  }
  for (auto& c : all) {
    ASSERT_TRUE(c->Wait());
    EXPECT_TRUE(c->result.ok()) << c->result;
    EXPECT_EQ(c->body, expected);
  }
  for (int i = 0; i < 500 && served < 64; ++i) std::this_thread::sleep_for(10ms);
  server.Stop();
}

}  // namespace
}  // namespace myriad::net
