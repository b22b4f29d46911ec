#pragma once
// A raw TCP client for the HTTP server tests: sends exactly the bytes given (garbage included)
// and reads what comes back, with a receive timeout as a safety net so a test fails instead
// of hanging when the server misbehaves.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>

namespace myriad::net::testing {

class RawSocket {
 public:
  explicit RawSocket(uint16_t port, int recv_timeout_s = 10) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{recv_timeout_s, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawSocket() { ::close(fd_); }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  bool connected() const { return connected_; }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads until `stop` appears, the peer closes, or the timeout; returns what was read.
  // closed() tells whether the peer closed (EOF or reset), timed_out() whether it timed out.
  std::string ReadUntil(std::string_view stop) {
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) {
        closed_ = true;
        return out;
      }
      if (n < 0) {
        timed_out_ = errno == EAGAIN || errno == EWOULDBLOCK;
        return out;
      }
      out.append(buf, static_cast<size_t>(n));
      if (!stop.empty() && out.find(stop) != std::string::npos) return out;
    }
  }
  // Reads until the peer closes the connection (or the timeout).
  std::string ReadAll() { return ReadUntil({}); }

  bool closed() const { return closed_; }
  bool timed_out() const { return timed_out_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  bool timed_out_ = false;
};

}  // namespace myriad::net::testing
