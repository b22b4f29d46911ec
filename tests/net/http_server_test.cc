// net::HttpServer and net::HttpClient over loopback, on ephemeral ports.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "net/http.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "net_test_util.h"

namespace myriad::net {
namespace {

using testing::RawSocket;

HttpResponse Echo(const HttpRequest& r) {
  if (r.path() == "/throw") throw std::runtime_error("boom");
  HttpResponse out;
  out.content_type = "text/plain";
  out.body = r.method + " " + r.target + " " + std::to_string(r.body.size());
  const std::string* h = FindHeader(r.headers, "x-test");
  if (h != nullptr) out.body += " x-test=" + *h;
  return out;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options = {}) {
    server_ = std::make_unique<HttpServer>(options, Echo);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_NE(server_->port(), 0);
  }
  HttpClient Client() { return HttpClient({"127.0.0.1", server_->port()}, {.timeout = 10 * kSecond}); }
  void ExpectServes() {
    HttpClient c = Client();
    absl::StatusOr<HttpResponse> r = c.Get("/still-alive");
    ASSERT_TRUE(r.ok()) << std::string(r.status().message());
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "GET /still-alive 0");
  }
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, AnswersGetAndPost) {
  StartServer();
  HttpClient c = Client();
  absl::StatusOr<HttpResponse> r = c.Get("/hello?x=1");
  ASSERT_TRUE(r.ok()) << std::string(r.status().message());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "GET /hello?x=1 0");
  EXPECT_EQ(r->content_type, "text/plain");
  r = c.Post("/p", std::string(1000, 'a'));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, "POST /p 1000");
  r = c.Request("DELETE", "/d", "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, "DELETE /d 0");
}

TEST_F(HttpServerTest, KeepAliveReusesOneConnection) {
  StartServer();
  HttpClient c = Client();
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<HttpResponse> r = c.Get("/k");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200);
  }
  EXPECT_EQ(c.reused(), 4u);
  EXPECT_EQ(server_->stats().connections_accepted, 1u);
  EXPECT_EQ(server_->stats().requests, 5u);
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  StartServer();
  RawSocket s(server_->port());
  ASSERT_TRUE(s.connected());
  ASSERT_TRUE(s.Send("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n"
                     "Connection: close\r\n\r\n"));
  const std::string out = s.ReadAll();
  EXPECT_TRUE(s.closed());
  const size_t a = out.find("GET /a 0"), b = out.find("GET /b 0");
  ASSERT_NE(a, std::string::npos) << out;
  ASSERT_NE(b, std::string::npos) << out;
  EXPECT_LT(a, b);
}

TEST_F(HttpServerTest, OversizedBodyGets413AndServerGoesOn) {
  StartServer({.max_body_bytes = 1024});
  HttpClient c = Client();
  absl::StatusOr<HttpResponse> r = c.Post("/big", std::string(64 * 1024, 'x'));
  ASSERT_TRUE(r.ok()) << std::string(r.status().message());
  EXPECT_EQ(r->status, 413);
  EXPECT_NE(r->body.find("payload_too_large"), std::string::npos) << r->body;
  // Exactly at the limit is fine.
  r = c.Post("/edge", std::string(1024, 'x'));
  ASSERT_TRUE(r.ok()) << std::string(r.status().message());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(server_->stats().bodies_too_large, 1u);
  ExpectServes();
}

TEST_F(HttpServerTest, OversizedHeadersGet431) {
  StartServer({.max_header_bytes = 1024});
  RawSocket s(server_->port());
  ASSERT_TRUE(s.Send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(4096, 'h') + "\r\n\r\n"));
  const std::string out = s.ReadAll();
  EXPECT_EQ(out.rfind("HTTP/1.1 431", 0), 0u) << out;
  ExpectServes();
}

TEST_F(HttpServerTest, MalformedRequestsGet400OrCloseAndServerGoesOn) {
  StartServer();
  const std::vector<std::string> garbage = {
      "GARBAGE\r\n\r\n",
      "GET / HTTP/9.9\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
      "GET / HTTP/1.1\r\nBad Header Without Colon\r\n\r\n",
      std::string("\x00\xff\x13\x37\r\n\r\n\x01\x02", 10),
  };
  for (const std::string& bytes : garbage) {
    RawSocket s(server_->port());
    ASSERT_TRUE(s.connected());
    s.Send(bytes);
    const std::string out = s.ReadAll();
    EXPECT_TRUE(s.closed()) << "the server kept a connection open after: " << bytes;
    if (!out.empty()) {
      EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out;
      EXPECT_NE(out.find("invalid_request"), std::string::npos) << out;
    }
    ExpectServes();
  }
  EXPECT_GE(server_->stats().bad_requests, 1u);
}

// RFC 9112 6.1/6.3: a body whose framing the server cannot know (a Transfer-Encoding that does
// not end in chunked, or one beside a Content-Length) is refused with 400 and a close, so the
// bytes after it never run as a second, smuggled request.
TEST_F(HttpServerTest, UnknownTransferEncodingIs400AndNothingIsSmuggled) {
  StartServer();
  const std::string smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::vector<std::string> requests = {
      "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n" + smuggled,
      "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n" + smuggled,
      "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
      "0\r\n\r\n" + smuggled,
      "POST /a HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
  };
  for (const std::string& bytes : requests) {
    RawSocket s(server_->port());
    ASSERT_TRUE(s.Send(bytes));
    const std::string out = s.ReadAll();
    EXPECT_TRUE(s.closed()) << bytes;
    EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out;
    EXPECT_EQ(out.find("/smuggled"), std::string::npos) << "a smuggled request ran: " << out;
  }
  // A well-formed chunked body still works.
  RawSocket ok(server_->port());
  ASSERT_TRUE(ok.Send("POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                      "Connection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n"));
  const std::string out = ok.ReadAll();
  EXPECT_NE(out.find("POST /c 3"), std::string::npos) << out;
  ExpectServes();
}

TEST_F(HttpServerTest, SilentClientIsDroppedAfterIdleTimeoutWhileOthersAreServed) {
  StartServer({.idle_timeout = 200 * kMillisecond});
  RawSocket silent(server_->port());
  ASSERT_TRUE(silent.connected());
  ExpectServes();  // the silent connection does not block anyone
  const std::string out = silent.ReadAll();
  EXPECT_TRUE(out.empty()) << out;
  EXPECT_TRUE(silent.closed()) << "still open after the idle timeout";
  EXPECT_FALSE(silent.timed_out());
}

TEST_F(HttpServerTest, StalledRequestIsDroppedAfterReadTimeout) {
  StartServer({.read_timeout = 200 * kMillisecond});
  RawSocket slow(server_->port());
  ASSERT_TRUE(slow.Send("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly-part"));
  ExpectServes();
  slow.ReadAll();
  EXPECT_TRUE(slow.closed()) << "a stalled request held its connection past the read timeout";
  // The server counts the timeout just after closing the socket: wait for its session to end.
  for (int i = 0; i < 2000 && server_->stats().timeouts == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(server_->stats().timeouts, 1u);
}

TEST_F(HttpServerTest, KeptAliveConnectionClosedByIdleTimeoutIsReopenedByClient) {
  StartServer({.idle_timeout = 100 * kMillisecond});
  HttpClient c = Client();
  ASSERT_TRUE(c.Get("/1").ok());
  // Wait for the server to drop the idle connection, observed through its connection count.
  for (int i = 0; i < 1000 && server_->connections() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(server_->connections(), 0u);
  absl::StatusOr<HttpResponse> r = c.Get("/2");
  ASSERT_TRUE(r.ok()) << std::string(r.status().message());
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, ConnectionsOverTheLimitAreClosedOthersServed) {
  StartServer({.max_connections = 1});
  auto first = std::make_unique<RawSocket>(server_->port());
  ASSERT_TRUE(first->Send("GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_NE(first->ReadUntil("GET /1 0").find("GET /1 0"), std::string::npos);
  RawSocket second(server_->port());
  second.Send("GET /2 HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(second.ReadAll(), "");
  EXPECT_TRUE(second.closed());
  EXPECT_EQ(server_->stats().connections_refused, 1u);
  // The first connection is still served; once it is gone, there is room again.
  ASSERT_TRUE(first->Send("GET /3 HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_NE(first->ReadUntil("GET /3 0").find("GET /3 0"), std::string::npos);
  first.reset();
  for (int i = 0; i < 2000 && server_->connections() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ExpectServes();
}

TEST_F(HttpServerTest, ExpectContinueIsAnswered) {
  StartServer();
  RawSocket s(server_->port());
  ASSERT_TRUE(s.Send("POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                     "Expect: 100-continue\r\n\r\n"));
  const std::string interim = s.ReadUntil("\r\n\r\n");
  EXPECT_EQ(interim.rfind("HTTP/1.1 100 Continue", 0), 0u) << interim;
  ASSERT_TRUE(s.Send("hello"));
  const std::string out = s.ReadUntil("POST /e 5");
  EXPECT_NE(out.find("POST /e 5"), std::string::npos) << out;
}

TEST_F(HttpServerTest, HandlerExceptionIs500AndServerGoesOn) {
  StartServer();
  HttpClient c = Client();
  absl::StatusOr<HttpResponse> r = c.Get("/throw");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 500);
  EXPECT_NE(r->body.find("boom"), std::string::npos);
  ExpectServes();
}

TEST_F(HttpServerTest, ManyClientsOnManyThreads) {
  StartServer({.threads = 4});
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      HttpClient c = Client();
      for (int i = 0; i < 50; ++i) {
        absl::StatusOr<HttpResponse> r = c.Post("/t" + std::to_string(t), std::string(i, 'z'));
        if (r.ok() && r->status == 200 &&
            r->body == "POST /t" + std::to_string(t) + " " + std::to_string(i)) {
          ok++;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 200);
}

TEST_F(HttpServerTest, StopClosesIdleConnectionsAndIsIdempotent) {
  StartServer();
  RawSocket idle(server_->port());
  ASSERT_TRUE(idle.connected());
  ExpectServes();
  server_->Stop();
  idle.ReadAll();
  EXPECT_TRUE(idle.closed());
  server_->Stop();
  HttpClient c({"127.0.0.1", server_->port()}, {.timeout = 2 * kSecond});
  EXPECT_FALSE(c.Get("/").ok());
}

TEST(HttpClientTest, UnreachableServerIsUnavailable) {
  // Bind and close to find a port nobody listens on.
  uint16_t port = 0;
  {
    HttpServer s({}, Echo);
    ASSERT_TRUE(s.Start().ok());
    port = s.port();
  }
  HttpClient c({"127.0.0.1", port}, {.timeout = 2 * kSecond});
  absl::StatusOr<HttpResponse> r = c.Get("/");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
}

TEST(HttpServerStartTest, BadAddressIsAnError) {
  HttpServer s({.address = "not-an-address.invalid."}, Echo);
  absl::Status st = s.Start();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("not-an-address"), std::string::npos);
}

TEST(HttpAddressTest, ParsesHostPortAndUrls) {
  auto hp = ParseHostPort("127.0.0.1:8080");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "127.0.0.1");
  EXPECT_EQ(hp->port, 8080);
  hp = ParseHostPort("[::1]:0");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "::1");
  EXPECT_EQ(hp->port, 0);
  EXPECT_FALSE(ParseHostPort("127.0.0.1").ok());
  EXPECT_FALSE(ParseHostPort("h:65536").ok());
  EXPECT_FALSE(ParseHostPort("h:12x").ok());
  hp = ParseHttpUrl("http://localhost:7480/");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "localhost");
  EXPECT_EQ(hp->port, 7480);
  hp = ParseHttpUrl("http://example");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->port, 80);
  EXPECT_FALSE(ParseHttpUrl("https://x:1").ok());
  EXPECT_FALSE(ParseHttpUrl("http://x:1/path").ok());
}

TEST(HttpTypesTest, RequestPathQueryAndHeaders) {
  HttpRequest r;
  r.target = "/v1/get?a=b";
  r.headers = {{"Content-Type", "application/json"}};
  EXPECT_EQ(r.path(), "/v1/get");
  EXPECT_EQ(r.query(), "a=b");
  ASSERT_NE(FindHeader(r.headers, "content-type"), nullptr);
  EXPECT_EQ(FindHeader(r.headers, "x"), nullptr);
  HttpResponse e = JsonError(400, "invalid_request", "bad \"x\"", "x");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.body,
            R"({"error":{"message":"bad \"x\"","param":"x","type":"invalid_request"}})");
}

}  // namespace
}  // namespace myriad::net
