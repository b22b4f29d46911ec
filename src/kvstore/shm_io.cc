#include "kvstore/shm_io.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "kvstore/shm_wire.h"

namespace myriad::kvstore::shm {

namespace {

int RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  // Rounded up, so that a wait never returns early and spins.
  return static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 3'600'000));
}

// Waits for `events` on fd (and readability of wake_fd): polls for up to limit.spin, yielding
// the core between polls (a peer on the same core gets to answer), then sleeps in poll().
absl::Status Wait(int fd, short events, const WaitLimit& limit, int wake_fd) {
  const Clock::time_point deadline = limit.deadline;
  const Clock::time_point spin_until = Clock::now() + std::chrono::nanoseconds(limit.spin);
  for (;;) {
    pollfd p[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    const Clock::time_point now = Clock::now();
    const bool spin = now < spin_until && now < deadline;
    const int ms = spin ? 0 : RemainingMs(deadline);
    const int n = poll(p, wake_fd >= 0 ? 2 : 1, ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(fmt::format("poll: {}", std::strerror(errno)));
    }
    if (wake_fd >= 0 && (p[1].revents & POLLIN) != 0) return absl::CancelledError("stopping");
    if (n > 0) return absl::OkStatus();  // ready, or an error/hang-up the next call reports
    if (spin) {
      sched_yield();
      continue;
    }
    if (ms == 0 || Clock::now() >= deadline) return absl::DeadlineExceededError("timed out");
  }
}

}  // namespace

absl::Status WaitReadable(int fd, const WaitLimit& limit, int wake_fd) {
  return Wait(fd, POLLIN, limit, wake_fd);
}

absl::Status RecvAll(int fd, void* buf, size_t bytes, const WaitLimit& limit, int wake_fd,
                     std::vector<int>* fds) {
  auto* p = static_cast<char*>(buf);
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
  while (bytes > 0) {
    iovec iov{p, bytes};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    if (fds != nullptr) {
      m.msg_control = control;
      m.msg_controllen = sizeof control;
    }
    const ssize_t n = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (absl::Status st = Wait(fd, POLLIN, limit, wake_fd); !st.ok()) return st;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(fmt::format("recv: {}", std::strerror(errno)));
    if (fds != nullptr) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
          int got;
          std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
          fds->push_back(got);
        }
      }
      if ((m.msg_flags & MSG_CTRUNC) != 0) {
        return absl::ResourceExhaustedError("descriptors passed with the message were cut off");
      }
    }
    if (n == 0) return absl::UnavailableError("the peer closed the connection");
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status SendAll(int fd, std::span<iovec> iov, const WaitLimit& limit,
                     std::span<const int> fds, int wake_fd) {
  if (fds.size() > kMaxFdsPerMessage) return absl::InvalidArgumentError("too many descriptors");
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
  size_t first = 0;
  while (first < iov.size()) {
    if (iov[first].iov_len == 0) {
      ++first;
      continue;
    }
    msghdr m{};
    m.msg_iov = iov.data() + first;
    m.msg_iovlen = iov.size() - first;
    if (!fds.empty()) {
      m.msg_control = control;
      m.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&m);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    const ssize_t n = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (absl::Status st = Wait(fd, POLLOUT, limit, wake_fd); !st.ok()) return st;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(fmt::format("send: {}", std::strerror(errno)));
    fds = {};  // sent with the first byte
    auto left = static_cast<size_t>(n);
    while (left > 0 && first < iov.size()) {
      const size_t k = std::min(left, iov[first].iov_len);
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + k;
      iov[first].iov_len -= k;
      left -= k;
      if (iov[first].iov_len == 0) ++first;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ConnectUnix(const std::string& path) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return absl::InvalidArgumentError(
        fmt::format("unix socket path '{}' is empty or longer than {} bytes", path,
                    sizeof addr.sun_path - 1));
  }
  struct stat st{};
  if (stat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    return absl::NotFoundError(fmt::format("no unix socket at '{}'", path));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(fmt::format("socket: {}", std::strerror(errno)));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    close(fd);
    return absl::UnavailableError(fmt::format("connecting to '{}': {}", path, std::strerror(e)));
  }
  return fd;
}

void CloseAll(std::vector<int>* fds) {
  for (int fd : *fds) close(fd);
  fds->clear();
}

}  // namespace myriad::kvstore::shm
