#pragma once
// HttpServer: a small HTTP/1.1 server on Boost.Beast for Myriad's real processes (the KV store
// master, the gateway, the engine emulator). One io_context run by N threads; each connection
// lives on its own strand and reads requests one at a time (keep-alive, no pipelining of
// responses). The handler is called on an io thread and must not block for long: it is the
// place for a lock-protected lookup, not for a call to another server.
//
// Defences, because every process on the cluster network is reachable by every buggy client:
// - a request body above max_body_bytes gets 413 before the body is read, and headers above
//   max_header_bytes get 431; malformed requests get 400. Each closes the connection, since the
//   stream position after a bad request is unknown;
// - idle_timeout bounds the wait for the first byte of the next request (a connection that
//   connects and sends nothing is dropped), read_timeout bounds the time from that first byte
//   to the end of the body (a slow-loris client cannot hold a connection by trickling bytes),
//   write_timeout bounds sending the response to a client that does not read;
// - the handler's exceptions become 500 (the handler should not throw; the server survives).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "core/time.h"
#include "net/http.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace myriad::net {

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

// The answer to one request, for handlers that answer later (after calling another server) or
// stream (SSE). Every method may be called from any thread; the calls are queued onto the
// connection in order. Either Respond once, or BeginStream, any number of Write, then End (or
// Abort). A responder dropped without an answer sends 500, so a request is never left hanging.
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;
  virtual void Respond(HttpResponse response) = 0;
  // Sends the status line and headers now, the body in HTTP/1.1 chunks as written.
  virtual void BeginStream(int status, std::string content_type, Headers headers = {}) = 0;
  // One body chunk, sent as soon as the connection can take it (no coalescing delay). The
  // bytes are copied before Write returns.
  virtual void Write(std::string_view data) = 0;
  virtual void End() = 0;
  // Closes the connection without finishing the response: the client sees a truncated stream,
  // which is what a proxy must show when its upstream died mid-stream and no error can be
  // framed any more.
  virtual void Abort() = 0;
  // True once the client has closed or reset its connection (or a write to it failed).
  virtual bool client_gone() const = 0;
  // Called once, on an io thread, when the client goes before the response is finished; at
  // once if it has already gone. For cancelling upstream work.
  virtual void OnClientGone(std::function<void()> callback) = 0;
  // Body bytes accepted by Write and not yet sent: a slow reader's backlog.
  virtual size_t buffered_bytes() const = 0;
};

// The handler of an asynchronous server: it owns `responder` and answers through it whenever
// it likes, from any thread. It must return quickly.
using AsyncHttpHandler =
    std::function<void(HttpRequest request, std::shared_ptr<HttpResponder> responder)>;

// More io threads than this is a typo, not a configuration (each has a stack and a context).
inline constexpr int kMaxHttpThreads = 1024;

struct HttpServerOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;  // 0: an ephemeral port, see HttpServer::port()
  int threads = 1;
  // One io_context per thread (each connection stays on one thread) instead of one shared by
  // all: what a proxy wants, so that work it starts from a handler can stay on that thread.
  bool context_per_thread = false;
  size_t max_body_bytes = size_t{1} << 20;
  size_t max_header_bytes = size_t{16} << 10;
  Nanos idle_timeout = 60 * kSecond;
  Nanos read_timeout = 10 * kSecond;
  Nanos write_timeout = 10 * kSecond;
  // Connections beyond this are closed as soon as accepted, so a flood of clients exhausts
  // neither descriptors nor memory; the ones already open go on being served.
  size_t max_connections = 10'000;
  // Stop() waits this long for requests in progress to be answered before it drops them.
  Nanos stop_grace = 5 * kSecond;
  std::string server_name = "myriad";
};

// Requests the server answered itself, without calling the handler, by reason; for metrics.
struct HttpServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;  // over max_connections
  uint64_t requests = 0;            // handed to the handler
  uint64_t bad_requests = 0;        // 400: malformed HTTP
  uint64_t bodies_too_large = 0;    // 413
  uint64_t headers_too_large = 0;   // 431
  uint64_t timeouts = 0;            // idle, read or write timeout: the connection was dropped
  uint64_t handler_failures = 0;    // 500: the handler threw
  uint64_t clients_gone = 0;        // clients that left before their response was finished
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  HttpServer(HttpServerOptions options, AsyncHttpHandler handler);
  // Stops the server if it is running.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens without serving yet (connections wait in the backlog), so a process can
  // find its port busy before it starts anything else. Fails (naming the address) when the
  // address does not parse or cannot be bound, or threads is out of [1, kMaxHttpThreads].
  // Optional: Start listens if this was not called.
  absl::Status Listen();
  // Listens (unless Listen did) and starts the io threads. Call once.
  absl::Status Start();
  // Stops accepting, closes idle connections, lets requests in progress finish (up to
  // stop_grace), then joins the io threads. Idempotent; safe to call from any thread but an
  // io thread of this server.
  void Stop();

  // The bound port (the ephemeral one when options.port was 0); 0 before Start.
  uint16_t port() const;
  // Connections open now (for tests and metrics).
  size_t connections() const;
  HttpServerStats stats() const;

  // The server's io_contexts (one, or one per thread with context_per_thread), for work that
  // should run on its io threads: a proxy's upstream calls on the thread of their client's
  // connection, with no hand-off between threads per chunk. Valid until the server is destroyed.
  boost::asio::io_context& io_context(int i = 0);
  int io_contexts() const;

 private:
  friend class Session;  // http_server.cc's per-connection state
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace myriad::net
