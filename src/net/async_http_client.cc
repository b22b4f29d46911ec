// AsyncHttpClient on Boost.Beast: one io_context per thread, each with its own pool, so a call
// and the connection it uses never leave their thread and need no lock.
#include "net/async_http_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "net/deadline.h"

namespace myriad::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

std::string_view CallStageName(CallStage stage) {
  switch (stage) {
    case CallStage::kConnect: return "connect";
    case CallStage::kSend: return "send";
    case CallStage::kHeader: return "header";
    case CallStage::kBody: return "body";
  }
  return "?";
}

namespace {

struct Pooled {
  std::unique_ptr<beast::tcp_stream> stream;
  Clock::time_point since;
};

class CallImpl;

}  // namespace

struct AsyncHttpClient::Impl {
  struct Worker {
    std::optional<asio::io_context> own;  // absent when running on a shared io_context
    asio::io_context* ioc = nullptr;
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
    std::thread thread;
    // Touched only on this worker's thread.
    std::unordered_map<std::string, std::vector<Pooled>> pool;
    std::unordered_set<CallImpl*> live;
    bool stopping = false;
  };

  explicit Impl(AsyncHttpClientOptions o) : options(o) {}

  AsyncHttpClientOptions options;
  std::vector<std::unique_ptr<Worker>> workers;
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> calls{0}, opened{0}, reused{0};
};

namespace {

std::chrono::nanoseconds Dur(Nanos n) { return std::chrono::nanoseconds(n); }

bool LooksStale(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == http::error::partial_message;
}

class CallImpl : public Call, public std::enable_shared_from_this<CallImpl> {
 public:
  using Worker = AsyncHttpClient::Impl::Worker;

  CallImpl(AsyncHttpClient::Impl* client, Worker* worker, CallRequest req, CallCallbacks cb)
      : client_(client),
        worker_(worker),
        req_(std::move(req)),
        cb_(std::move(cb)),
        expiry_(worker->ioc->get_executor()) {
    key_ = fmt::format("{}:{}", req_.server.host, req_.server.port);
    msg_.method_string(req_.method);
    msg_.target(req_.target);
    msg_.version(11);
    msg_.set(http::field::host, key_);
    msg_.set(http::field::user_agent, "myriad");
    if (!req_.content_type.empty() && !req_.body.empty()) {
      msg_.set(http::field::content_type, req_.content_type);
    }
    for (const auto& [k, v] : req_.headers) msg_.insert(k, v);
    msg_.body() = std::move(req_.body);
    msg_.keep_alive(true);
    msg_.prepare_payload();
    if (req_.timeouts.total > 0) deadline_ = Clock::now() + Dur(req_.timeouts.total);
  }

  void Begin() {
    expiry_.Init(weak_from_this(), [this] {
      beast::error_code ignored;
      if (stream_) stream_->socket().close(ignored);  // the pending operation ends: a timeout
    });
    if (worker_->stopping) return Finish(absl::CancelledError("the client is shutting down"), stage_);
    worker_->live.insert(this);
    auto& idle = worker_->pool[key_];
    const auto now = Clock::now();
    while (!idle.empty()) {
      Pooled p = std::move(idle.back());
      idle.pop_back();
      if (now - p.since < Dur(client_->options.idle_keep)) {
        stream_ = std::move(p.stream);
        reused_ = true;
        client_->reused++;
        return Send();
      }
    }
    Connect();
  }

  void Cancel() override {
    asio::post(*worker_->ioc, [self = shared_from_this()] {
      self->Finish(absl::CancelledError("cancelled by the caller"), self->stage_);
    });
  }

  // From the client's destructor, on the worker thread.
  void Shutdown() { Finish(absl::CancelledError("the client is shutting down"), stage_); }

 private:
  void Expire(Nanos stage_timeout) {
    auto d = Dur(stage_timeout);
    if (deadline_) d = std::min(d, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       *deadline_ - Clock::now()));
    d = std::max(d, std::chrono::nanoseconds(1));
    expiry_.Set(d);
  }

  void Connect() {
    stage_ = CallStage::kConnect;
    reused_ = false;
    stream_ = std::make_unique<beast::tcp_stream>(*worker_->ioc);
    beast::error_code ec;
    // Numeric hosts resolve without a lookup; names go through the system resolver once per
    // connection (the pool makes that rare).
    tcp::resolver resolver(*worker_->ioc);
    auto endpoints = resolver.resolve(req_.server.host, std::to_string(req_.server.port),
                                      tcp::resolver::numeric_service, ec);
    if (ec) return Fail(ec, "resolve");
    client_->opened++;
    Expire(req_.timeouts.connect);
    stream_->async_connect(endpoints, [self = shared_from_this()](beast::error_code ec,
                                                                  const tcp::endpoint&) {
      if (self->done_) return;
      ec = self->expiry_.Check(ec);
      if (ec) return self->Fail(ec, "connect");
      beast::error_code ignored;
      self->stream_->socket().set_option(tcp::no_delay(true), ignored);
      self->Send();
    });
  }

  void Send() {
    stage_ = CallStage::kSend;
    Expire(req_.timeouts.first_byte);
    http::async_write(*stream_, msg_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (self->done_) return;
      ec = self->expiry_.Check(ec);
      if (ec) return self->RetryOrFail(ec, "send");
      self->ReadHeader();
    });
  }

  void ReadHeader() {
    stage_ = CallStage::kHeader;
    parser_.emplace();
    parser_->body_limit(req_.max_response_bytes);
    buffer_.clear();
    buffer_.reserve(kResponseReadBytes);
    http::async_read_header(*stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (self->done_) return;
                              ec = self->expiry_.Check(ec);
                              if (ec) return self->RetryOrFail(ec, "reading the response header");
                              self->OnHeader();
                            });
  }

  void OnHeader() {
    stage_ = CallStage::kBody;
    const auto& res = parser_->get();
    Headers headers;
    for (const auto& f : res) {
      headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    if (cb_.on_header) cb_.on_header(static_cast<int>(res.result_int()), headers);
    if (done_) return;
    if (parser_->is_done()) return Finish(absl::OkStatus(), stage_);
    ReadBody();
  }

  void ReadBody() {
    auto& body = parser_->get().body();
    body.data = chunk_;
    body.size = sizeof(chunk_);
    Expire(req_.timeouts.idle);
    http::async_read_some(*stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (self->done_) return;
                            ec = self->expiry_.Check(ec);
                            if (ec == http::error::need_buffer) ec = {};
                            if (!ec) self->ParseBuffered(ec);
                            const size_t got = sizeof(self->chunk_) - self->parser_->get().body().size;
                            if (got > 0 && self->cb_.on_data) {
                              self->cb_.on_data(std::string_view(self->chunk_, got));
                              if (self->done_) return;
                            }
                            if (ec) return self->Fail(ec, "reading the response body");
                            if (self->parser_->is_done()) {
                              return self->Finish(absl::OkStatus(), self->stage_);
                            }
                            self->ReadBody();
                          });
  }

  // A read stops after the first chunk it parses; the chunks already buffered behind it join
  // it here, so that events that arrived together reach on_data, and the client, as one piece.
  void ParseBuffered(beast::error_code& ec) {
    auto& body = parser_->get().body();
    while (buffer_.size() > 0 && body.size > 0 && !parser_->is_done()) {
      const size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == http::error::need_more || ec == http::error::need_buffer) {
        ec = {};
        return;
      }
      if (ec || used == 0) return;
    }
  }

  // A pooled connection the server closed while idle fails on first use without the server
  // having seen anything of this request; one fresh connection is then safe to try.
  void RetryOrFail(beast::error_code ec, std::string_view what) {
    if (reused_ && !retried_ && LooksStale(ec)) {
      retried_ = true;
      CloseStream();
      return Connect();
    }
    Fail(ec, what);
  }

  void Fail(beast::error_code ec, std::string_view what) {
    const std::string message = fmt::format("{} http://{}{}: {} failed: {}", req_.method, key_,
                                            req_.target, what, ec.message());
    absl::Status status;
    if (ec == beast::error::timeout) {
      status = absl::DeadlineExceededError(message);
    } else if (ec.category() == http::make_error_code(http::error::bad_version).category() &&
               !LooksStale(ec)) {
      status = absl::InternalError(message);
    } else {
      status = absl::UnavailableError(message);
    }
    Finish(std::move(status), stage_);
  }

  void CloseStream() {
    if (!stream_) return;
    beast::error_code ignored;
    stream_->socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_->close();
    stream_.reset();
  }

  void Finish(absl::Status status, CallStage stage) {
    if (done_) return;
    done_ = true;
    expiry_.Clear();
    worker_->live.erase(this);
    const bool reusable = status.ok() && parser_ && parser_->is_done() && parser_->get().keep_alive();
    if (reusable && stream_) {
      auto& idle = worker_->pool[key_];
      if (idle.size() < client_->options.max_idle_per_server) {
        idle.push_back(Pooled{std::move(stream_), Clock::now()});
      }
    }
    CloseStream();
    if (cb_.on_done) cb_.on_done(std::move(status), stage);
    cb_ = {};  // release what the callbacks hold (responders, buffers) now
  }

  AsyncHttpClient::Impl* client_;
  Worker* worker_;
  CallRequest req_;
  CallCallbacks cb_;
  std::string key_;
  http::request<http::string_body> msg_;
  std::unique_ptr<beast::tcp_stream> stream_;
  std::optional<http::response_parser<http::buffer_body>> parser_;
  beast::flat_buffer buffer_;
  char chunk_[16384];
  std::optional<Clock::time_point> deadline_;
  Deadline expiry_;
  CallStage stage_ = CallStage::kConnect;
  bool reused_ = false;
  bool retried_ = false;
  bool done_ = false;
};

}  // namespace

AsyncHttpClient::AsyncHttpClient(AsyncHttpClientOptions options)
    : impl_(std::make_unique<Impl>(options)) {
  std::vector<asio::io_context*> shared = options.shared_io_contexts;
  if (options.shared_io_context != nullptr) shared.push_back(options.shared_io_context);
  if (!shared.empty()) {
    for (asio::io_context* c : shared) {
      auto w = std::make_unique<Impl::Worker>();
      w->ioc = c;
      impl_->workers.push_back(std::move(w));
    }
    return;
  }
  const int n = std::max(1, options.threads);
  for (int i = 0; i < n; ++i) {
    auto w = std::make_unique<Impl::Worker>();
    w->own.emplace(1);
    w->ioc = &*w->own;
    w->work.emplace(w->ioc->get_executor());
    Impl::Worker* raw = w.get();
    w->thread = std::thread([raw] { raw->ioc->run(); });
    impl_->workers.push_back(std::move(w));
  }
}

AsyncHttpClient::~AsyncHttpClient() {
  std::mutex mu;
  std::condition_variable cv;
  size_t pending = impl_->workers.size();
  for (auto& w : impl_->workers) {
    Impl::Worker* raw = w.get();
    asio::post(*raw->ioc, [raw, &mu, &cv, &pending] {
      raw->stopping = true;
      std::vector<std::shared_ptr<CallImpl>> live;
      for (CallImpl* c : raw->live) live.push_back(c->shared_from_this());
      for (auto& c : live) c->Shutdown();
      raw->pool.clear();
      std::lock_guard l(mu);
      if (--pending == 0) cv.notify_all();
    });
    raw->work.reset();
  }
  // Own threads run out of work and end; a shared io_context's thread goes on, so wait for the
  // shutdown to have run there (the calls' sockets are closed before this returns).
  {
    std::unique_lock l(mu);
    cv.wait(l, [&] { return pending == 0; });
  }
  for (auto& w : impl_->workers) {
    if (w->thread.joinable()) w->thread.join();
  }
}

std::shared_ptr<Call> AsyncHttpClient::Start(CallRequest request, CallCallbacks callbacks) {
  Impl::Worker* w = nullptr;
  // On a thread that runs one of the workers' contexts, stay there: no hand-off.
  if (impl_->workers.size() > 1) {
    for (auto& candidate : impl_->workers) {
      if (candidate->ioc->get_executor().running_in_this_thread()) {
        w = candidate.get();
        break;
      }
    }
  }
  if (w == nullptr) {
    w = impl_->workers[impl_->next.fetch_add(1, std::memory_order_relaxed) % impl_->workers.size()]
            .get();
  }
  impl_->calls++;
  auto call = std::make_shared<CallImpl>(impl_.get(), w, std::move(request), std::move(callbacks));
  asio::post(*w->ioc, [call] { call->Begin(); });
  return call;
}

AsyncHttpClient::Stats AsyncHttpClient::stats() const {
  return Stats{impl_->calls.load(), impl_->opened.load(), impl_->reused.load()};
}

}  // namespace myriad::net
