// HttpServer on Boost.Beast: listening, accepting and stopping. Each connection is a Session
// (http_session.cc) on its own strand (or on a context that one thread runs), so its state
// needs no lock; the server's session table (for Stop) is the only shared state and has its
// own mutex.
#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <exception>

#include "net/http_server_internal.h"

namespace myriad::net {

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
    s.cv.wait_for(lock, std::chrono::nanoseconds(s.options.stop_grace), [&s] { return s.sessions.empty(); });
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
