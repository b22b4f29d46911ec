#include "kvstore/data_conn.h"

#include <fmt/format.h>

#include <array>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <charconv>

namespace myriad::kvstore {

namespace asio = boost::asio;
using asio::ip::tcp;

asio::awaitable<void> Watchdog(std::shared_ptr<Conn> conn, std::atomic<uint64_t>* timeouts) {
  while (conn->socket.is_open()) {
    co_await conn->timer.async_wait(kTuple);
    if (!conn->socket.is_open()) break;
    if (conn->deadline <= std::chrono::steady_clock::now()) {
      if (timeouts != nullptr) timeouts->fetch_add(1, std::memory_order_relaxed);
      conn->Close();
      break;
    }
    // Woken by a new deadline (expires_at cancels the wait): wait for that one.
    conn->timer.expires_at(conn->deadline);
  }
}

absl::StatusOr<std::pair<std::string, uint16_t>> SplitHostPort(std::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(
        fmt::format("address '{}' is not host:port", address));
  }
  unsigned port = 0;
  const std::string_view p = address.substr(colon + 1);
  auto [end, err] = std::from_chars(p.data(), p.data() + p.size(), port);
  if (err != std::errc() || end != p.data() + p.size() || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(fmt::format("address '{}' has a bad port", address));
  }
  std::string host(address.substr(0, colon));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(std::move(host), static_cast<uint16_t>(port));
}

void SetBuffers(tcp::socket& socket, int bytes) {
  if (bytes <= 0) return;
  boost::system::error_code ignored;
  socket.set_option(asio::socket_base::send_buffer_size(bytes), ignored);
  socket.set_option(asio::socket_base::receive_buffer_size(bytes), ignored);
}

asio::awaitable<absl::Status> ConnectTo(Conn& conn, std::string_view address, int buffer_bytes) {
  auto hp = SplitHostPort(address);
  if (!hp.ok()) co_return hp.status();
  tcp::resolver resolver(conn.socket.get_executor());
  auto [ec, endpoints] =
      co_await resolver.async_resolve(hp->first, std::to_string(hp->second), kTuple);
  if (ec) {
    co_return absl::UnavailableError(
        fmt::format("cannot resolve storage node {}: {}", address, ec.message()));
  }
  boost::system::error_code ignored, last;
  bool connected = false;
  for (const auto& entry : endpoints) {
    conn.socket.close(ignored);
    conn.socket.open(entry.endpoint().protocol(), ignored);
    // Buffers before connecting, so the window scale is negotiated for them.
    SetBuffers(conn.socket, buffer_bytes);
    auto [ec2] = co_await conn.socket.async_connect(entry.endpoint(), kTuple);
    if (!ec2) {
      connected = true;
      break;
    }
    last = ec2;
  }
  if (!connected) {
    co_return absl::UnavailableError(
        fmt::format("cannot connect to storage node {}: {}", address, last.message()));
  }
  conn.socket.set_option(tcp::no_delay(true), ignored);
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> Authenticate(Conn& conn, std::string_view token,
                                           uint64_t request_id) {
  if (token.empty()) co_return absl::OkStatus();
  wire::Header h;
  h.op = static_cast<uint8_t>(wire::Op::kAuth);
  h.request_id = request_id;
  h.body_bytes = token.size();
  const std::array<asio::const_buffer, 2> frame{asio::buffer(&h, sizeof h), asio::buffer(token)};
  auto [ec, n] = co_await asio::async_write(conn.socket, frame, kTuple);
  if (ec) {
    co_return absl::UnavailableError(
        fmt::format("sending the token to the storage node failed: {}", ec.message()));
  }
  wire::Header reply;
  co_return co_await ReadReply(conn, h.op, h.request_id, 0, &reply);
}

asio::awaitable<absl::Status> ReadReply(Conn& conn, uint8_t op, uint64_t request_id,
                                        uint64_t max_body, wire::Header* out) {
  auto [ec, n] = co_await asio::async_read(conn.socket, asio::buffer(out, sizeof *out), kTuple);
  if (ec) {
    co_return absl::UnavailableError(
        fmt::format("storage node closed the connection before replying: {}", ec.message()));
  }
  if (absl::Status st = wire::ValidateReply(*out, op, request_id, max_body); !st.ok()) {
    co_return st;
  }
  if (out->status == 0) co_return absl::OkStatus();
  if (out->body_bytes > wire::kMaxMessageBytes) {
    co_return absl::InternalError("storage node's error message is too long");
  }
  std::string message(out->body_bytes, '\0');
  auto [ec2, m] = co_await asio::async_read(conn.socket, asio::buffer(message), kTuple);
  if (ec2) co_return absl::UnavailableError("storage node closed the connection mid-reply");
  const auto code = out->status <= 16 ? static_cast<absl::StatusCode>(out->status)
                                      : absl::StatusCode::kInternal;
  co_return absl::Status(code, fmt::format("storage node: {}", message));
}

}  // namespace myriad::kvstore
