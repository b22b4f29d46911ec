#pragma once
// The parts of HttpServer that its two files share (http_server.cc: listening, accepting and
// stopping; http_session.cc: one connection's reads, writes and deadlines). Not an interface:
// include it from those two files only.
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "net/deadline.h"
#include "net/http_server.h"

namespace myriad::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

class Session;

struct HttpServer::Impl {
  Impl(HttpServerOptions o, HttpHandler h)
      : options(std::move(o)), handler(std::move(h)), iocs(MakeContexts(options)) {}
  Impl(HttpServerOptions o, AsyncHttpHandler h)
      : options(std::move(o)), async_handler(std::move(h)), iocs(MakeContexts(options)) {}

  static std::vector<std::unique_ptr<asio::io_context>> MakeContexts(const HttpServerOptions& o) {
    // Clamped: Listen reports a thread count out of range, the constructor must not allocate it.
    const int n = o.context_per_thread ? std::clamp(o.threads, 1, kMaxHttpThreads) : 1;
    std::vector<std::unique_ptr<asio::io_context>> v;
    for (int i = 0; i < n; ++i) v.push_back(std::make_unique<asio::io_context>(o.context_per_thread ? 1 : std::clamp(o.threads, 1, kMaxHttpThreads)));
    return v;
  }
  // The context of the next connection: round-robin when there is one per thread.
  asio::io_context& NextContext() {
    return *iocs[next_context.fetch_add(1, std::memory_order_relaxed) % iocs.size()];
  }

  void DoAccept();
  void OnAccept(beast::error_code ec, tcp::socket socket);
  void Register(Session* s, const std::shared_ptr<Session>& p);
  void Unregister(Session* s);

  HttpServerOptions options;
  HttpHandler handler;             // one of these two is set
  AsyncHttpHandler async_handler;
  // Declared before the io_context: sessions still queued in it unregister themselves when it
  // is destroyed, and need these alive (members are destroyed in reverse order).
  mutable std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions;
  bool accepting = false;
  bool started = false;
  bool listening = false;  // Listen succeeded (set by the thread that calls Listen / Start)
  bool stopped = false;
  struct Counters {
    std::atomic<uint64_t> connections_accepted{0}, connections_refused{0}, requests{0}, bad_requests{0},
        bodies_too_large{0}, headers_too_large{0}, timeouts{0}, handler_failures{0},
        clients_gone{0};
  } counters;

  // One io_context run by every thread, or (context_per_thread) one per thread, each connection
  // on one of them for its whole life.
  std::vector<std::unique_ptr<asio::io_context>> iocs;
  std::atomic<size_t> next_context{0};
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work;
  tcp::acceptor acceptor{asio::make_strand(*iocs[0])};
  asio::steady_timer accept_retry{acceptor.get_executor()};
  std::vector<std::thread> threads;
  std::atomic<uint16_t> port{0};
};

// The HttpResponder of one request: forwards each call onto its session's strand.
class Responder : public HttpResponder {
 public:
  Responder(std::shared_ptr<Session> session, uint64_t exchange)
      : session_(std::move(session)), exchange_(exchange) {}
  ~Responder() override;
  void Respond(HttpResponse response) override;
  void BeginStream(int status, std::string content_type, Headers headers) override;
  void Write(std::string_view data) override;
  void End() override;
  void Abort() override;
  bool client_gone() const override { return gone_->load(std::memory_order_acquire); }
  void OnClientGone(std::function<void()> callback) override;
  size_t buffered_bytes() const override { return buffered_->load(std::memory_order_relaxed); }

 private:
  friend class Session;
  std::shared_ptr<Session> session_;
  uint64_t exchange_;
  std::atomic<bool> answered_{false};
  std::shared_ptr<std::atomic<bool>> gone_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<size_t>> buffered_ = std::make_shared<std::atomic<size_t>>(0);
};

// One connection: reads requests, hands them to the handler, writes the answers (whole or
// streamed), and keeps the read, write and idle deadlines. Runs on its own strand (or a
// context that one thread runs), so its state needs no lock.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, HttpServer::Impl* server);
  ~Session() { server_->Unregister(this); }

  void Start();

  // From Stop(): idle connections close now, a request in progress is answered first.
  void Shutdown();

 private:
  const HttpServerOptions& options() const { return server_->options; }
  HttpServer::Impl::Counters& Count() { return server_->counters; }

  void WaitForRequest();
  void ReadRequest();
  void OnHeader(beast::error_code ec);

  // Why the request's body framing is refused, or "" when it is sound. Beast reads a request
  // whose Transfer-Encoding does not end in chunked as one without a body.
  std::string FramingError(const http::request<http::string_body>& req) const;
  void ReadBody();
  void OnReadError(beast::error_code ec);

  // The parsed request as the handler sees it (the body moved out); counts it.
  HttpRequest ToRequest(http::request<http::string_body>& req);
  void OnRequest();

  // --- Asynchronous exchanges: the handler answers through a Responder, possibly streaming.
  // While it works, a read on the socket watches for the client leaving (EOF or reset), so a
  // proxy can cancel its upstream call instead of generating tokens nobody reads.

  void OnAsyncRequest();
  void StartWatch();
  void ClientGone();

  // The following run on the strand, posted by the Responder of exchange `id`.
  void AsyncRespond(uint64_t id, HttpResponse r);
  void AsyncBeginStream(uint64_t id, int status, std::string content_type, Headers headers);

  // False when the chunk is not taken (another exchange's, or no stream open).
  bool AsyncWrite(uint64_t id, std::string_view data);
  void AsyncEnd(uint64_t id);
  void AsyncAbort(uint64_t id);
  void AsyncOnClientGone(uint64_t id, std::function<void()> cb);

  // Empties a stream buffer; one that grew past 64 KiB (a burst, a slow client) gives its
  // memory back rather than keep it for the connection's life.
  static void ClearKeepingLittle(std::string& s);
  void PumpStream();
  void StreamFailed(beast::error_code ec);

  // The response is on the wire: read the next request, once the watch read is out of the way.
  void FinishExchange(bool keep_alive);
  void ResumeAfterExchange();
  void Respond(HttpResponse r, bool keep_alive, unsigned version = 11);
  void Linger();
  void Drain();
  void Close();

  beast::tcp_stream stream_;
  std::string peer_;  // the client's address, for HttpRequest::peer
  HttpServer::Impl* server_;
  Deadline expiry_;  // of the operation in progress; none while the handler works
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> res_;
  std::optional<http::response<http::empty_body>> continue_;
  size_t drained_ = 0;
  bool busy_ = false;      // a request is being read, handled or answered
  bool stopping_ = false;  // the server is stopping: answer what is in progress, then close

  // Asynchronous exchanges (async_handler only).
  friend class Responder;
  uint64_t exchange_ = 0;  // which request the Responder calls belong to
  bool keep_alive_ = true;
  unsigned version_ = 11;
  bool answered_ = false;
  bool streaming_ = false;
  bool ending_ = false;
  bool writing_ = false;
  bool watching_ = false;
  bool resume_after_watch_ = false;
  std::shared_ptr<std::atomic<bool>> gone_flag_;
  std::shared_ptr<std::atomic<size_t>> buffered_;
  std::function<void()> gone_callback_;
  std::string pending_;  // streamed bytes not yet sent
  std::string frame_;    // the chunk being sent, framed
  size_t in_flight_ = 0;  // its data bytes
  std::optional<http::response<http::empty_body>> head_;
  std::optional<http::response_serializer<http::empty_body>> head_serializer_;
};

}  // namespace myriad::net
