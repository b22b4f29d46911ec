#pragma once
// Polling helpers for tests that watch a child process: a condition within a bound, and
// (read_file.h) a file's text.
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "read_file.h"

namespace myriad::test {

// True once `done` holds, polled every 20 ms; false when `limit` (5 s unless given) passes first.
inline bool WaitFor(const std::function<bool()>& done,
                    std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace myriad::test
