// HttpServer on Boost.Beast. Every session runs on its own strand (or on a context that one
// thread runs), so its state needs no lock;
// the server's session table (for Stop) is the only shared state and has its own mutex.
#include "net/http_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <iterator>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "net/deadline.h"

namespace myriad::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

std::chrono::nanoseconds Dur(Nanos n) { return std::chrono::nanoseconds(n); }

// After an error response that closes the connection, the client may still be sending the body
// we refused. Reading (and discarding) it for a while before closing lets the client finish its
// write and read our answer; closing with unread bytes would send a reset that can destroy it.
constexpr size_t kLingerBytes = size_t{16} << 20;
constexpr Nanos kLingerTime = kSecond;

bool IsParseError(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

}  // namespace

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

class Session;

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

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, HttpServer::Impl* server)
      : stream_(std::move(socket)), server_(server), expiry_(stream_.get_executor()) {
    // Once per connection: every request on it names the same client.
    beast::error_code ec;
    const tcp::endpoint remote = stream_.socket().remote_endpoint(ec);
    if (!ec) {
      const std::string ip = remote.address().to_string();
      peer_ = remote.address().is_v6() ? "[" + ip + "]:" + std::to_string(remote.port())
                                       : ip + ":" + std::to_string(remote.port());
    }
  }
  ~Session() { server_->Unregister(this); }

  void Start() {
    // An expiry closes the socket, as beast's own does: the pending operations end with a
    // timeout (Check) and the connection is not reused.
    expiry_.Init(weak_from_this(), [this] {
      beast::error_code ignored;
      stream_.socket().close(ignored);
    });
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->WaitForRequest(); });
  }

  // From Stop(): idle connections close now, a request in progress is answered first.
  void Shutdown() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      self->stopping_ = true;
      if (!self->busy_) self->stream_.cancel();
    });
  }

 private:
  const HttpServerOptions& options() const { return server_->options; }
  HttpServer::Impl::Counters& Count() { return server_->counters; }

  void WaitForRequest() {
    busy_ = false;
    if (stopping_) return Close();
    // Bytes of a pipelined next request may already be buffered.
    if (buffer_.size() > 0) return ReadRequest();
    expiry_.Set(Dur(options().idle_timeout));
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              ec = self->expiry_.Check(ec);
                              if (ec) {  // idle timeout, EOF, Shutdown
                                if (ec == beast::error::timeout) self->Count().timeouts++;
                                return self->Close();
                              }
                              self->buffer_.commit(n);
                              self->ReadRequest();
                            });
  }

  void ReadRequest() {
    busy_ = true;
    parser_.emplace();
    parser_->body_limit(options().max_body_bytes);
    parser_->header_limit(static_cast<uint32_t>(
        std::min<size_t>(options().max_header_bytes, UINT32_MAX)));
    // One deadline from the first byte to the end of the body.
    expiry_.Set(Dur(options().read_timeout));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              self->OnHeader(self->expiry_.Check(ec));
                            });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    const auto& req = parser_->get();
    if (std::string why = FramingError(req); !why.empty()) {
      // The body's end is unknown (or two headers disagree on it): bytes after it could run as
      // a second, smuggled request. RFC 9112 6.1 and 6.3: answer 400 and close.
      Count().bad_requests++;
      return Respond(JsonError(400, "invalid_request", why), false);
    }
    if (!parser_->is_done() && req.version() >= 11 &&
        beast::iequals(req[http::field::expect], "100-continue")) {
      // curl and others wait (a second, by default) for this before sending a large body.
      continue_.emplace(http::status::continue_, 11);
      return http::async_write(stream_, *continue_,
                               [self = shared_from_this()](beast::error_code ec, size_t) {
                                 if (ec) return self->Close();
                                 self->ReadBody();
                               });
    }
    ReadBody();
  }

  // Why the request's body framing is refused, or "" when it is sound. Beast reads a request
  // whose Transfer-Encoding does not end in chunked as one without a body.
  std::string FramingError(const http::request<http::string_body>& req) const {
    const auto te = req.find(http::field::transfer_encoding);
    if (te == req.end()) return {};
    if (req.version() < 11) return "Transfer-Encoding is not allowed in an HTTP/1.0 request";
    if (!parser_->chunked()) {
      return fmt::format("Transfer-Encoding '{}' is not supported: only chunked, as the last coding",
                         std::string_view(te->value()));
    }
    if (req.find(http::field::content_length) != req.end()) {
      return "a request must not carry both Transfer-Encoding and Content-Length";
    }
    return {};
  }

  void ReadBody() {
    if (parser_->is_done()) return OnRequest();
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->OnReadError(self->expiry_.Check(ec));
                       self->OnRequest();
                     });
  }

  void OnReadError(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      Count().bodies_too_large++;
      return Respond(JsonError(413, "payload_too_large",
                               fmt::format("the request body exceeds the limit of {} bytes",
                                           options().max_body_bytes)),
                     false);
    }
    if (ec == http::error::header_limit) {
      Count().headers_too_large++;
      return Respond(JsonError(431, "invalid_request",
                               fmt::format("the request header exceeds the limit of {} bytes",
                                           options().max_header_bytes)),
                     false);
    }
    if (IsParseError(ec)) {
      Count().bad_requests++;
      return Respond(
          JsonError(400, "invalid_request", fmt::format("malformed HTTP request: {}", ec.message())),
          false);
    }
    // Timeout (the stream has closed the socket), reset, or the client left mid-request.
    if (ec == beast::error::timeout) Count().timeouts++;
    Close();
  }

  // The parsed request as the handler sees it (the body moved out); counts it.
  HttpRequest ToRequest(http::request<http::string_body>& req) {
    HttpRequest request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    request.body = std::move(req.body());
    request.peer = peer_;
    request.headers.reserve(8);
    for (const auto& field : req) {
      request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    Count().requests++;
    return request;
  }

  void OnRequest() {
    if (server_->async_handler) return OnAsyncRequest();
    auto req = parser_->release();
    HttpRequest request = ToRequest(req);
    HttpResponse response;
    try {
      response = server_->handler(request);
    } catch (const std::exception& e) {
      Count().handler_failures++;
      response = JsonError(500, "internal", fmt::format("handler failed: {}", e.what()));
    } catch (...) {
      Count().handler_failures++;
      response = JsonError(500, "internal", "handler failed");
    }
    Respond(std::move(response), req.keep_alive(), req.version());
  }

  // --- Asynchronous exchanges: the handler answers through a Responder, possibly streaming.
  // While it works, a read on the socket watches for the client leaving (EOF or reset), so a
  // proxy can cancel its upstream call instead of generating tokens nobody reads.

  void OnAsyncRequest() {
    auto req = parser_->release();
    HttpRequest request = ToRequest(req);
    expiry_.Clear();  // the read deadline is over; the handler may take its time
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    ++exchange_;
    streaming_ = false;
    ending_ = false;
    gone_callback_ = nullptr;
    auto responder = std::make_shared<Responder>(shared_from_this(), exchange_);
    gone_flag_ = responder->gone_;
    buffered_ = responder->buffered_;
    if (buffer_.size() == 0) StartWatch();  // with pipelined bytes buffered the client is alive
    try {
      server_->async_handler(std::move(request), responder);
    } catch (const std::exception& e) {
      Count().handler_failures++;
      responder->Respond(JsonError(500, "internal", fmt::format("handler failed: {}", e.what())));
    } catch (...) {
      Count().handler_failures++;
      responder->Respond(JsonError(500, "internal", "handler failed"));
    }
  }

  void StartWatch() {
    watching_ = true;
    stream_.socket().async_read_some(
        buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
          self->watching_ = false;
          if (!ec) {
            self->buffer_.commit(n);  // the next (pipelined) request's first bytes
            if (self->resume_after_watch_) self->ResumeAfterExchange();
            return;
          }
          if (ec == asio::error::operation_aborted && self->resume_after_watch_) {
            return self->ResumeAfterExchange();
          }
          self->ClientGone();
          if (self->resume_after_watch_) self->Close();
        });
  }

  void ClientGone() {
    if (!gone_flag_ || gone_flag_->exchange(true)) return;
    Count().clients_gone++;
    if (auto cb = std::move(gone_callback_)) cb();
    gone_callback_ = nullptr;
  }

  // The following run on the strand, posted by the Responder of exchange `id`.
  void AsyncRespond(uint64_t id, HttpResponse r) {
    if (id != exchange_ || answered_) return;
    answered_ = true;
    Respond(std::move(r), keep_alive_, version_);
  }

  void AsyncBeginStream(uint64_t id, int status, std::string content_type, Headers headers) {
    if (id != exchange_ || answered_) return;
    answered_ = true;
    streaming_ = true;
    busy_ = true;
    head_.emplace();
    head_->version(version_);
    head_->result(static_cast<unsigned>(status));
    head_->set(http::field::server, options().server_name);
    if (!content_type.empty()) head_->set(http::field::content_type, content_type);
    for (auto& [k, v] : headers) head_->insert(k, v);
    head_->keep_alive(keep_alive_ && !stopping_);
    head_->chunked(true);
    head_serializer_.emplace(*head_);
    writing_ = true;
    expiry_.Set(Dur(options().write_timeout));
    http::async_write_header(stream_, *head_serializer_,
                             [self = shared_from_this()](beast::error_code ec, size_t) {
                               self->writing_ = false;
                               self->expiry_.Clear();  // between chunks: as long as it takes
                               if (ec) return self->StreamFailed(self->expiry_.Check(ec));
                               self->PumpStream();
                             });
  }

  // False when the chunk is not taken (another exchange's, or no stream open).
  bool AsyncWrite(uint64_t id, std::string_view data) {
    if (id != exchange_ || !streaming_ || ending_ || data.empty()) return false;
    pending_ += data;
    if (!writing_) PumpStream();
    return true;
  }

  void AsyncEnd(uint64_t id) {
    if (id != exchange_ || !streaming_ || ending_) return;
    ending_ = true;
    if (!writing_) PumpStream();
  }

  void AsyncAbort(uint64_t id) {
    if (id != exchange_) return;
    answered_ = true;
    Close();
  }

  void AsyncOnClientGone(uint64_t id, std::function<void()> cb) {
    if (id != exchange_) return;
    if (gone_flag_ && gone_flag_->load()) return cb();
    gone_callback_ = std::move(cb);
  }

  // Empties a stream buffer; one that grew past 64 KiB (a burst, a slow client) gives its
  // memory back rather than keep it for the connection's life.
  static void ClearKeepingLittle(std::string& s) {
    if (s.capacity() > (size_t{64} << 10)) {
      std::string().swap(s);
    } else {
      s.clear();
    }
  }

  void PumpStream() {
    if (writing_ || !head_serializer_) return;
    if (!pending_.empty()) {
      // Whatever queued up while the last write was in flight goes out as one chunk: one
      // syscall and one chunk header instead of one per event when the client lags. The
      // chunk is framed here (size in hex, CRLF, data, CRLF) in a buffer kept across writes:
      // beast's make_chunk allocated a shared size sequence per chunk.
      frame_.clear();
      fmt::format_to(std::back_inserter(frame_), "{:x}\r\n", pending_.size());
      frame_ += pending_;
      frame_ += "\r\n";
      in_flight_ = pending_.size();
      ClearKeepingLittle(pending_);
      writing_ = true;
      expiry_.Set(Dur(options().write_timeout));
      asio::async_write(stream_, asio::buffer(frame_), [self = shared_from_this()](beast::error_code ec, size_t) {
        self->writing_ = false;
        self->expiry_.Clear();
        if (ec) return self->StreamFailed(self->expiry_.Check(ec));
        self->buffered_->fetch_sub(self->in_flight_);
        ClearKeepingLittle(self->frame_);
        self->PumpStream();
      });
      return;
    }
    if (!ending_) return;  // waiting for the handler's next chunk, however long
    writing_ = true;
    expiry_.Set(Dur(options().write_timeout));
    asio::async_write(stream_, http::make_chunk_last(),
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        self->writing_ = false;
                        self->expiry_.Clear();
                        if (ec) return self->StreamFailed(self->expiry_.Check(ec));
                        const bool keep = self->head_->keep_alive();
                        self->head_serializer_.reset();
                        self->head_.reset();
                        self->streaming_ = false;
                        self->FinishExchange(keep);
                      });
  }

  void StreamFailed(beast::error_code ec) {
    if (ec == beast::error::timeout) Count().timeouts++;
    ClientGone();
    ClearKeepingLittle(pending_);
    buffered_->store(0);
    Close();
  }

  // The response is on the wire: read the next request, once the watch read is out of the way.
  void FinishExchange(bool keep_alive) {
    if (!server_->async_handler) {
      if (!keep_alive) return Linger();
      return WaitForRequest();
    }
    if (!keep_alive) {
      resume_after_watch_ = false;
      return Linger();
    }
    if (watching_) {
      resume_after_watch_ = true;
      beast::error_code ignored;
      stream_.socket().cancel(ignored);
      return;
    }
    ResumeAfterExchange();
  }

  void ResumeAfterExchange() {
    resume_after_watch_ = false;
    answered_ = false;
    WaitForRequest();
  }

  void Respond(HttpResponse r, bool keep_alive, unsigned version = 11) {
    busy_ = true;
    keep_alive = keep_alive && !stopping_;
    res_.emplace();
    res_->version(version);
    res_->result(static_cast<unsigned>(r.status));
    res_->set(http::field::server, options().server_name);
    if (!r.content_type.empty()) res_->set(http::field::content_type, r.content_type);
    for (auto& [k, v] : r.headers) res_->insert(k, v);
    res_->body() = std::move(r.body);
    res_->keep_alive(keep_alive);
    res_->prepare_payload();
    expiry_.Set(Dur(options().write_timeout));
    http::async_write(stream_, *res_,
                      [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
                        self->res_.reset();
                        self->expiry_.Clear();
                        ec = self->expiry_.Check(ec);
                        if (ec) {
                          if (ec == beast::error::timeout) self->Count().timeouts++;
                          return self->Close();
                        }
                        self->FinishExchange(keep_alive);
                      });
  }

  void Linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    if (stopping_) return Close();
    expiry_.Set(Dur(std::min(options().read_timeout, kLingerTime)));
    Drain();
  }

  void Drain() {
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(65536),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > kLingerBytes) return self->Close();
                              self->Drain();
                            });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

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

Responder::~Responder() {
  if (answered_.load()) return;
  // Dropped without an answer: a bug in the handler, but the client still gets one.
  asio::dispatch(session_->stream_.get_executor(), [s = session_, id = exchange_] {
    s->AsyncRespond(id, JsonError(500, "internal", "the handler dropped the request unanswered"));
  });
}

void Responder::Respond(HttpResponse response) {
  if (answered_.exchange(true)) return;
  asio::dispatch(session_->stream_.get_executor(),
                 [s = session_, id = exchange_, r = std::move(response)]() mutable {
                   s->AsyncRespond(id, std::move(r));
                 });
}

void Responder::BeginStream(int status, std::string content_type, Headers headers) {
  if (answered_.exchange(true)) return;
  asio::dispatch(session_->stream_.get_executor(),
                 [s = session_, id = exchange_, status, ct = std::move(content_type),
                  h = std::move(headers)]() mutable {
                   s->AsyncBeginStream(id, status, std::move(ct), std::move(h));
                 });
}

void Responder::Write(std::string_view data) {
  buffered_->fetch_add(data.size(), std::memory_order_relaxed);
  // On the session's own thread (a context per thread: the proxy's layout) the bytes go
  // straight into its stream buffer, as dispatch would run them there at once, but without a
  // string of their own first.
  // The executor is a copy: target() points into it, so it must outlive `io` (a pointer into
  // the temporary that get_executor() returns dangles at the end of the statement).
  const auto ex = session_->stream_.get_executor();
  const auto* io = ex.target<asio::io_context::executor_type>();
  if (io != nullptr && io->running_in_this_thread()) {
    if (!session_->AsyncWrite(exchange_, data)) buffered_->fetch_sub(data.size());
    return;
  }
  asio::dispatch(session_->stream_.get_executor(),
                 [s = session_, id = exchange_, b = buffered_, d = std::string(data)] {
                   if (!s->AsyncWrite(id, d)) b->fetch_sub(d.size());  // not accepted
                 });
}

void Responder::End() {
  asio::dispatch(session_->stream_.get_executor(),
                 [s = session_, id = exchange_] { s->AsyncEnd(id); });
}

void Responder::Abort() {
  answered_.store(true);
  asio::dispatch(session_->stream_.get_executor(),
                 [s = session_, id = exchange_] { s->AsyncAbort(id); });
}

void Responder::OnClientGone(std::function<void()> callback) {
  asio::dispatch(session_->stream_.get_executor(),
                 [s = session_, id = exchange_, cb = std::move(callback)]() mutable {
                   s->AsyncOnClientGone(id, std::move(cb));
                 });
}

void HttpServer::Impl::DoAccept() {
  // A context run by one thread already serializes its handlers: the session needs a strand
  // only on the shared context (and a strand costs an executor copy and a queue per handler).
  asio::any_io_executor ex;
  if (options.context_per_thread) {
    ex = NextContext().get_executor();
  } else {
    ex = asio::make_strand(NextContext());
  }
  acceptor.async_accept(std::move(ex), [this](beast::error_code ec, tcp::socket s) {
    OnAccept(ec, std::move(s));
  });
}

void HttpServer::Impl::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
  if (ec) {
    // Out of descriptors, or the like: retry shortly rather than spin on the error.
    accept_retry.expires_after(std::chrono::milliseconds(10));
    accept_retry.async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec && acceptor.is_open()) DoAccept();
    });
    return;
  }
  beast::error_code ignored;
  bool full = false;
  {
    std::lock_guard lock(mu);
    full = sessions.size() >= options.max_connections;
  }
  if (full) {
    counters.connections_refused++;
    socket.close(ignored);
    return DoAccept();
  }
  socket.set_option(tcp::no_delay(true), ignored);  // small JSON answers: no Nagle delay
  counters.connections_accepted++;
  auto session = std::make_shared<Session>(std::move(socket), this);
  Register(session.get(), session);
  DoAccept();
}

void HttpServer::Impl::Register(Session* s, const std::shared_ptr<Session>& p) {
  {
    std::lock_guard lock(mu);
    sessions.emplace(s, p);
    if (!accepting) {
      // Accepted while Stop() was snapshotting the sessions: it will not see this one.
      p->Shutdown();
    }
  }
  p->Start();
}

void HttpServer::Impl::Unregister(Session* s) {
  std::lock_guard lock(mu);
  sessions.erase(s);
  if (sessions.empty()) cv.notify_all();
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}

HttpServer::HttpServer(HttpServerOptions options, AsyncHttpHandler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Listen() {
  Impl& s = *impl_;
  if (s.listening) return absl::OkStatus();
  if (s.options.threads < 1 || s.options.threads > kMaxHttpThreads) {
    return absl::InvalidArgumentError(fmt::format("HttpServer: threads must be in [1, {}], got {}",
                                                  kMaxHttpThreads, s.options.threads));
  }
  const std::string where = fmt::format("{}:{}", s.options.address, s.options.port);
  beast::error_code ec;
  tcp::resolver resolver(*s.iocs[0]);
  auto endpoints = resolver.resolve(s.options.address, std::to_string(s.options.port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("HttpServer: cannot resolve listen address {}: {}", where, ec.message()));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    beast::error_code ignored;
    s.acceptor.close(ignored);
    return absl::UnavailableError(
        fmt::format("HttpServer: cannot listen on {}: {}", where, ec.message()));
  }
  s.port = s.acceptor.local_endpoint(ec).port();
  s.listening = true;
  return absl::OkStatus();
}

absl::Status HttpServer::Start() {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mu);
    if (s.started) return absl::FailedPreconditionError("HttpServer::Start: already started");
  }
  if (absl::Status st = Listen(); !st.ok()) return st;
  {
    std::lock_guard lock(s.mu);
    s.started = true;
    s.accepting = true;
  }
  for (auto& c : s.iocs) s.work.push_back(asio::make_work_guard(*c));
  asio::dispatch(s.acceptor.get_executor(), [&s] { s.DoAccept(); });
  for (int i = 0; i < s.options.threads; ++i) {
    asio::io_context* c = s.iocs[static_cast<size_t>(i) % s.iocs.size()].get();
    s.threads.emplace_back([c] { c->run(); });
  }
  return absl::OkStatus();
}

void HttpServer::Stop() {
  Impl& s = *impl_;
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard lock(s.mu);
    if (!s.started || s.stopped) return;
    s.stopped = true;
    s.accepting = false;
    for (auto& [ptr, weak] : s.sessions) {
      if (auto p = weak.lock()) live.push_back(std::move(p));
    }
  }
  asio::post(s.acceptor.get_executor(), [&s] {
    beast::error_code ignored;
    s.acceptor.close(ignored);
    s.accept_retry.cancel();
  });
  for (auto& p : live) p->Shutdown();
  live.clear();  // the sessions' own handlers keep them alive; these refs would block the wait
  {
    std::unique_lock lock(s.mu);
    s.cv.wait_for(lock, Dur(s.options.stop_grace), [&s] { return s.sessions.empty(); });
  }
  s.work.clear();
  for (auto& c : s.iocs) c->stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
  // The posted close may not have run before ioc.stop(): a listening socket left open would
  // go on accepting connections (into the kernel's backlog) that nobody answers.
  beast::error_code ignored;
  s.acceptor.close(ignored);
}

uint16_t HttpServer::port() const { return impl_->port.load(); }

boost::asio::io_context& HttpServer::io_context(int i) {
  return *impl_->iocs[static_cast<size_t>(i) % impl_->iocs.size()];
}

int HttpServer::io_contexts() const { return static_cast<int>(impl_->iocs.size()); }

size_t HttpServer::connections() const {
  std::lock_guard lock(impl_->mu);
  return impl_->sessions.size();
}

HttpServerStats HttpServer::stats() const {
  const Impl::Counters& c = impl_->counters;
  HttpServerStats out;
  out.connections_accepted = c.connections_accepted.load(std::memory_order_relaxed);
  out.connections_refused = c.connections_refused.load(std::memory_order_relaxed);
  out.requests = c.requests.load(std::memory_order_relaxed);
  out.bad_requests = c.bad_requests.load(std::memory_order_relaxed);
  out.bodies_too_large = c.bodies_too_large.load(std::memory_order_relaxed);
  out.headers_too_large = c.headers_too_large.load(std::memory_order_relaxed);
  out.timeouts = c.timeouts.load(std::memory_order_relaxed);
  out.handler_failures = c.handler_failures.load(std::memory_order_relaxed);
  out.clients_gone = c.clients_gone.load(std::memory_order_relaxed);
  return out;
}

}  // namespace myriad::net
