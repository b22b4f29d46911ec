#pragma once
// At most one log line per key (a publisher, a peer) per interval, so a source that fails on
// every message cannot flood the log; the lines held back are counted and reported with the
// next line let through, so nothing is lost silently. Pure: time comes in as `now`.
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "core/time.h"

namespace myriad {

class LogThrottle {
 public:
  explicit LogThrottle(Nanos interval) : interval_(interval) {}

  // Whether a line for `key` may be written at `now`. When it may, `*suppressed` is how many
  // lines for the key were held back since the last one written (0 otherwise untouched).
  bool Admit(uint64_t key, Nanos now, uint64_t* suppressed) {
    auto [it, fresh] = keys_.try_emplace(key);
    State& s = it->second;
    if (!fresh && now - s.last < interval_) {
      ++s.held;
      return false;
    }
    *suppressed = s.held;
    s.held = 0;
    s.last = now;
    return true;
  }

 private:
  struct State {
    Nanos last = 0;
    uint64_t held = 0;
  };
  Nanos interval_;
  absl::flat_hash_map<uint64_t, State> keys_;
};

}  // namespace myriad
