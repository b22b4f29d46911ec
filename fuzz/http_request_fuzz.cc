// libFuzzer target for the HTTP server's request handling: any bytes sent on a connection get
// an answer or a close, never a crash or a hang, and the server goes on serving. The server
// runs once per process on loopback; each input is one connection.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "net/http_server.h"

namespace {

myriad::net::HttpServer* Server() {
  static std::unique_ptr<myriad::net::HttpServer> server = [] {
    myriad::net::HttpServerOptions o;
    o.max_body_bytes = 4096;
    o.max_header_bytes = 2048;
    o.read_timeout = 200 * myriad::kMillisecond;
    o.idle_timeout = 200 * myriad::kMillisecond;
    auto s = std::make_unique<myriad::net::HttpServer>(
        o, [](myriad::net::HttpRequest req, std::shared_ptr<myriad::net::HttpResponder> r) {
          if (req.path() == "/stream") {
            r->BeginStream(200, "text/event-stream");
            r->Write("data: " + req.body + "\n\n");
            r->End();
          } else {
            r->Respond(myriad::net::HttpResponse{200, "text/plain", req.target, {}});
          }
        });
    if (!s->Start().ok()) std::abort();
    return s;
  }();
  return server.get();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint16_t port = Server()->port();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) std::abort();
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server closed on a bad request: fine
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) std::abort();  // a hang
    break;
  }
  ::close(fd);
  return 0;
}
