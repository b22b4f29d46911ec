#pragma once
// Blocking Unix-socket I/O with deadlines for the shared-memory data path (kvstore/shm_server.h,
// kvstore/shm_client.h): whole-buffer sends and receives, descriptors passed with SCM_RIGHTS,
// and a wake-up descriptor that interrupts a wait (the server's Stop).
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/time.h"

namespace myriad::kvstore::shm {

using Clock = std::chrono::steady_clock;

// How long a wait polls for the peer before it sleeps in poll(), by default. A peer on another
// core answers this path's short exchanges within microseconds, while waking a thread that
// sleeps costs tens of them on a VM (its idle vCPU is halted). On the 2-vCPU development VM a
// 1 MiB PUT (a round trip, the client's memcpy of ~40 us, a round trip) took 205-213 us with
// sleeping waits, 84-90 us polling for 50 us (the node fell asleep during the client's copy)
// and 65-66 us polling for 200 us. A wait that sleeps has burnt at most this much of a core.
inline constexpr Nanos kDefaultSpin = 200 * kMicrosecond;

// When a wait gives up, and how long it polls before it sleeps (0: at once).
struct WaitLimit {
  Clock::time_point deadline;
  Nanos spin = kDefaultSpin;
};

inline WaitLimit DeadlineIn(Nanos timeout, Nanos spin = kDefaultSpin) {
  return {Clock::now() + std::chrono::nanoseconds(timeout), spin};
}

// Waits until `fd` is readable. DeadlineExceeded at the deadline, Cancelled when `wake_fd`
// (-1: none) becomes readable first. Every wait here polls for limit.spin before it sleeps, as
// a peer's answer is expected within microseconds.
absl::Status WaitReadable(int fd, const WaitLimit& limit, int wake_fd = -1);

// Receives exactly `bytes` into `buf`. Descriptors that arrive with the bytes are appended to
// *fds (nullptr: refused; any that come anyway are closed by the kernel). Unavailable when the
// peer closes or fails, DeadlineExceeded, Cancelled as WaitReadable.
absl::Status RecvAll(int fd, void* buf, size_t bytes, const WaitLimit& limit,
                     int wake_fd = -1, std::vector<int>* fds = nullptr);

// Sends every byte of `iov` (consumed), with `fds` (at most kMaxFdsPerMessage) attached to the
// first byte; a wait for room is cut short as WaitReadable's.
absl::Status SendAll(int fd, std::span<iovec> iov, const WaitLimit& limit,
                     std::span<const int> fds = {}, int wake_fd = -1);

// A connected AF_UNIX stream socket to `path` (close-on-exec); NotFound when there is no
// socket file there, Unavailable when nothing listens on it.
absl::StatusOr<int> ConnectUnix(const std::string& path);

void CloseAll(std::vector<int>* fds);

}  // namespace myriad::kvstore::shm
