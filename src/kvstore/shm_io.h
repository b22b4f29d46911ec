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

inline Clock::time_point DeadlineIn(Nanos timeout) {
  return Clock::now() + std::chrono::nanoseconds(timeout);
}

// Waits until `fd` is readable. DeadlineExceeded at the deadline, Cancelled when `wake_fd`
// (-1: none) becomes readable first. Every wait here polls for a while before it sleeps (see
// kSpin in shm_io.cc), as a peer's answer is expected within microseconds; `spin` false
// sleeps at once (a wait that is usually long, such as for the next connection).
absl::Status WaitReadable(int fd, Clock::time_point deadline, int wake_fd = -1, bool spin = true);

// Receives exactly `bytes` into `buf`. Descriptors that arrive with the bytes are appended to
// *fds (nullptr: refused; any that come anyway are closed by the kernel). Unavailable when the
// peer closes or fails, DeadlineExceeded, Cancelled as WaitReadable.
absl::Status RecvAll(int fd, void* buf, size_t bytes, Clock::time_point deadline,
                     int wake_fd = -1, std::vector<int>* fds = nullptr);

// Sends every byte of `iov` (consumed), with `fds` (at most kMaxFdsPerMessage) attached to the
// first byte; a wait for room is cut short as WaitReadable's.
absl::Status SendAll(int fd, std::span<iovec> iov, Clock::time_point deadline,
                     std::span<const int> fds = {}, int wake_fd = -1);

// A connected AF_UNIX stream socket to `path` (close-on-exec); NotFound when there is no
// socket file there, Unavailable when nothing listens on it.
absl::StatusOr<int> ConnectUnix(const std::string& path);

void CloseAll(std::vector<int>* fds);

}  // namespace myriad::kvstore::shm
