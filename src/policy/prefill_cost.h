#pragma once
// The router's estimate of how long a unit takes to prefill a prompt, reduced from the step
// model to a closed form once per pool so that a routing decision over a thousand candidates
// stays within microseconds: T(n uncached, c cached) = a + b*n + k*n*(c + n/2). A backend whose
// cost is learned from its first-token times (backend_cost_model.h) is priced by a straight
// line instead: a + b*n + d*c; and, for an engine with a fixed number of sequence slots
// (llama-server's --parallel), a request that finds every slot taken waits for one to finish:
// w per request that must finish first (SlotWaitSeconds).
#include <cstdint>

#include "core/time.h"
#include "perf/step_model.h"

namespace myriad::policy {

class PrefillCost {
 public:
  PrefillCost() = default;
  // `chunk_tokens` is the unit's chunked-prefill budget per DP rank per step.
  PrefillCost(const perf::StepModel& model, int64_t chunk_tokens);
  // The fitted line: seconds fixed, per uncached and per cached prompt token, and per prompt
  // token queued ahead on the backend, and per request that must finish before a slot frees.
  static PrefillCost Linear(double fixed_s, double per_uncached_s, double per_cached_s, double per_queued_s,
                            double kv_bytes_per_token, double per_slot_wait_s = 0);

  double PrefillSeconds(int64_t uncached, int64_t cached) const {
    const double n = static_cast<double>(uncached), c = static_cast<double>(cached);
    return fixed_ + per_token_ * n + per_cached_ * c + per_attended_ * n * (c + n / 2) +
           step_overhead_ * static_cast<double>(uncached / chunk_tokens_);
  }
  // Waiting behind `queued_tokens` prompt tokens already accepted by the unit.
  // Its DP ranks work through the queue in parallel.
  double QueueSeconds(int64_t queued_tokens) const {
    return queue_per_token_ * static_cast<double>(queued_tokens) / ranks_;
  }
  // Waiting for a slot: `waits` requests in flight must finish before this one gets one
  // (SlotWaits in router.h; 0 on an engine that batches any number of sequences).
  double SlotWaitSeconds(int64_t waits) const { return slot_wait_ * static_cast<double>(waits); }
  // Prompt tokens per second the unit computes when every rank is busy with full chunks.
  double ThroughputTokensPerSecond() const {
    return ranks_ / (chunk_per_token_ + step_overhead_ / static_cast<double>(chunk_tokens_));
  }
  double kv_bytes_per_token() const { return kv_bytes_per_token_; }

 private:
  double fixed_ = 0, per_token_ = 0, per_cached_ = 0, per_attended_ = 0, step_overhead_ = 0;
  double queue_per_token_ = 0;  // per queued token on one rank
  double slot_wait_ = 0;        // per request ahead of this one for a slot
  double chunk_per_token_ = 0;  // per token of a full chunk on one rank, its own attention included
  int64_t chunk_tokens_ = 1;
  double ranks_ = 1;
  double kv_bytes_per_token_ = 0;
};

}  // namespace myriad::policy
