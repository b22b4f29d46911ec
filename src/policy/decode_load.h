#pragma once
// The load a decode candidate is ranked by at hand-off, from what the router itself handed it:
// the sequences whose prompt it sent there and has not seen finish, and their KV (prompt plus
// output tokens). The gateway and the simulator keep this charge the same way, so both pick
// the decode engine from the same information. The engines' own figures are not used: a
// gateway scrapes them once a second (an idle decode engine's KV usage of a second ago decided
// ties), and a simulated unit's counts miss the sequences whose KV is still on the wire; the two
// worlds picked different decode engines about half of the time (docs/twin.md). With several
// gateways each ranks by its own hand-offs, as each charges its own prefill queues.
#include <algorithm>
#include <cstdint>

#include "policy/load_balancer.h"

namespace myriad::policy {

struct DecodeCharge {
  int64_t sequences = 0;  // handed over, not finished
  int64_t kv_tokens = 0;  // their prompt + output tokens: the KV they hold at most

  // A hand-off (+1) or its end (-1) of a sequence of `tokens` prompt + output tokens.
  void Apply(int sign, int64_t tokens) {
    sequences = std::max<int64_t>(0, sequences + sign);
    kv_tokens = std::max<int64_t>(0, kv_tokens + sign * tokens);
  }
};

// Least-loaded's decode key (load_balancer.h: sequences, then KV usage) over the charge. The KV
// is a fraction of `kv_capacity_tokens` where the caller knows it (> 0), else millions of
// tokens: like engines rank alike either way. `base` keeps the other fields (the queued prefill
// tokens of a decode unit that prefills short prompts itself).
inline UnitLoad DecodeLoad(const DecodeCharge& c, int64_t kv_capacity_tokens, UnitLoad base) {
  base.running = static_cast<int32_t>(std::min<int64_t>(c.sequences, INT32_MAX));
  base.waiting = 0;
  const double scale = kv_capacity_tokens > 0 ? static_cast<double>(kv_capacity_tokens) : 1e6;
  base.kv_usage = static_cast<double>(c.kv_tokens) / scale;
  return base;
}

}  // namespace myriad::policy
