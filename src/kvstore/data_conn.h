#pragma once
// Internal to the data path's .cc files (it includes Asio): a connection with a deadline that a
// watchdog coroutine enforces by closing the socket, and the reply reading that the server's
// COPY_TO push and the client share.
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <limits>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/time.h"
#include "kvstore/data_wire.h"

namespace myriad::kvstore {

inline constexpr auto kTuple = boost::asio::as_tuple(boost::asio::use_awaitable);

// A completion condition for async_read / async_write of payloads: each system call may move
// every byte still to go. Asio's default (transfer_all) caps each call at 64 KiB, so a 1 MiB
// object cost 16 sendmsg on one side and 16 recvmsg (each a pass through the scheduler, most
// with an EAGAIN and an epoll_wait between them) on the other.
struct WholeTransfer {
  size_t operator()(const boost::system::error_code& ec, size_t) const {
    return ec ? 0 : std::numeric_limits<size_t>::max();
  }
};
inline constexpr WholeTransfer kWhole{};

struct Conn {
  explicit Conn(boost::asio::ip::tcp::socket s)
      : socket(std::move(s)), timer(socket.get_executor()) {}

  // Resets the deadline to now + timeout (waking the watchdog to re-arm).
  void SetDeadline(Nanos timeout) {
    deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout);
    timer.expires_at(deadline);
  }
  void Close() {
    boost::system::error_code ignored;
    socket.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    timer.cancel();
  }

  boost::asio::ip::tcp::socket socket;
  boost::asio::steady_timer timer;
  // Steady-clock nanoseconds since which the server's connection has waited for a frame; 0
  // while it serves one. Read from other threads when the server sheds idle connections.
  std::atomic<int64_t> idle_since{0};
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// Closes conn's socket once its deadline has passed; ends when the socket is closed.
boost::asio::awaitable<void> Watchdog(std::shared_ptr<Conn> conn, std::atomic<uint64_t>* timeouts);

// "host:port" as the nodes register it.
absl::StatusOr<std::pair<std::string, uint16_t>> SplitHostPort(std::string_view address);

// Resolves and connects conn's socket (closed first if open); `buffer_bytes` as SetBuffers.
boost::asio::awaitable<absl::Status> ConnectTo(Conn& conn, std::string_view address,
                                               int buffer_bytes = 4 << 20);

// Socket send and receive buffers of `bytes` (0: leave the kernel's autotuning).
void SetBuffers(boost::asio::ip::tcp::socket& socket, int bytes);

// Presents the cluster's secret on a fresh connection (an AUTH frame, kvstore/auth.h); OK at
// once when `token` is empty. The node's refusal comes back as Unauthenticated.
boost::asio::awaitable<absl::Status> Authenticate(Conn& conn, std::string_view token,
                                                  uint64_t request_id);

// Reads a reply header to request (op, id) and, for an error reply, its message; returns the
// reply's status (the node's error as an absl::Status) and the header in *out.
boost::asio::awaitable<absl::Status> ReadReply(Conn& conn, uint8_t op, uint64_t request_id,
                                               uint64_t max_body, wire::Header* out);

}  // namespace myriad::kvstore
