// One connection of HttpServer (http_server_internal.h): requests read under their limits and
// deadlines, handed to the handler, answered whole or streamed in chunks.
#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <chrono>
#include <exception>
#include <iterator>

#include "net/http_server_internal.h"

namespace myriad::net {

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

Session::Session(tcp::socket&& socket, HttpServer::Impl* server)
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

void Session::Start() {
  // An expiry closes the socket, as beast's own does: the pending operations end with a
  // timeout (Check) and the connection is not reused.
  expiry_.Init(weak_from_this(), [this] {
    beast::error_code ignored;
    stream_.socket().close(ignored);
  });
  asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->WaitForRequest(); });
}

void Session::Shutdown() {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
    self->stopping_ = true;
    if (!self->busy_) self->stream_.cancel();
  });
}

void Session::WaitForRequest() {
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

void Session::ReadRequest() {
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

void Session::OnHeader(beast::error_code ec) {
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

std::string Session::FramingError(const http::request<http::string_body>& req) const {
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

void Session::ReadBody() {
  if (parser_->is_done()) return OnRequest();
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     if (ec) return self->OnReadError(self->expiry_.Check(ec));
                     self->OnRequest();
                   });
}

void Session::OnReadError(beast::error_code ec) {
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

HttpRequest Session::ToRequest(http::request<http::string_body>& req) {
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

void Session::OnRequest() {
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

void Session::OnAsyncRequest() {
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

void Session::StartWatch() {
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

void Session::ClientGone() {
  if (!gone_flag_ || gone_flag_->exchange(true)) return;
  Count().clients_gone++;
  if (auto cb = std::move(gone_callback_)) cb();
  gone_callback_ = nullptr;
}

void Session::AsyncRespond(uint64_t id, HttpResponse r) {
  if (id != exchange_ || answered_) return;
  answered_ = true;
  Respond(std::move(r), keep_alive_, version_);
}

void Session::AsyncBeginStream(uint64_t id, int status, std::string content_type, Headers headers) {
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

bool Session::AsyncWrite(uint64_t id, std::string_view data) {
  if (id != exchange_ || !streaming_ || ending_ || data.empty()) return false;
  pending_ += data;
  if (!writing_) PumpStream();
  return true;
}

void Session::AsyncEnd(uint64_t id) {
  if (id != exchange_ || !streaming_ || ending_) return;
  ending_ = true;
  if (!writing_) PumpStream();
}

void Session::AsyncAbort(uint64_t id) {
  if (id != exchange_) return;
  answered_ = true;
  Close();
}

void Session::AsyncOnClientGone(uint64_t id, std::function<void()> cb) {
  if (id != exchange_) return;
  if (gone_flag_ && gone_flag_->load()) return cb();
  gone_callback_ = std::move(cb);
}

void Session::ClearKeepingLittle(std::string& s) {
  if (s.capacity() > (size_t{64} << 10)) {
    std::string().swap(s);
  } else {
    s.clear();
  }
}

void Session::PumpStream() {
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

void Session::StreamFailed(beast::error_code ec) {
  if (ec == beast::error::timeout) Count().timeouts++;
  ClientGone();
  ClearKeepingLittle(pending_);
  buffered_->store(0);
  Close();
}

void Session::FinishExchange(bool keep_alive) {
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

void Session::ResumeAfterExchange() {
  resume_after_watch_ = false;
  answered_ = false;
  WaitForRequest();
}

void Session::Respond(HttpResponse r, bool keep_alive, unsigned version) {
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

void Session::Linger() {
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  if (stopping_) return Close();
  expiry_.Set(Dur(std::min(options().read_timeout, kLingerTime)));
  Drain();
}

void Session::Drain() {
  buffer_.clear();
  stream_.async_read_some(buffer_.prepare(65536),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->drained_ += n;
                            if (ec || self->drained_ > kLingerBytes) return self->Close();
                            self->Drain();
                          });
}

void Session::Close() {
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
}

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

}  // namespace myriad::net
