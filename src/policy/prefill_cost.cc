#include "policy/prefill_cost.h"

#include <algorithm>

namespace myriad::policy {

PrefillCost::PrefillCost(const perf::StepModel& model, int64_t chunk_tokens)
    : chunk_tokens_(std::max<int64_t>(chunk_tokens, 1)), kv_bytes_per_token_(model.KvBytesPerToken()) {
  // A request's prompt runs on one DP rank, one chunk per step, while the other ranks carry
  // chunks of their own (a busy unit: the estimate is meant for ranking loaded candidates).
  const double n = static_cast<double>(chunk_tokens_);
  const int64_t dp = std::max(model.layout().dp, 1);
  // A chunk of n tokens on every rank, each token attending to `attended` positions on average.
  auto step = [&](double attended) {
    perf::BatchShape b;
    b.prefill_seqs = dp;
    b.prefill_tokens = chunk_tokens_ * dp;
    b.prefill_attended = static_cast<double>(dp) * n * attended;
    return NanosToSeconds(model.StepTime(b));
  };
  constexpr double kLongContext = 32768;
  const double own = (n + 1) / 2;  // a chunk's causal attention over itself, per token
  step_overhead_ = NanosToSeconds(model.calibration().step_overhead);
  const double t_flat = step(0);
  const double t0 = step(own);
  const double t1 = step(own + kLongContext);
  // The per-token term leaves attention out: PrefillSeconds charges a prompt's attention over
  // itself and its cached prefix by per_attended_. Taken from a step that included the chunk's
  // own attention, it was charged twice: 6% on Llama-3.1-70B, 1.6-2.3x on DeepSeek-V3's MLA.
  per_token_ = std::max(0.0, (t_flat - step_overhead_) / n);
  per_attended_ = std::max(0.0, (t1 - t0) / (n * kLongContext));
  fixed_ = step_overhead_;
  // Queued prompts and a busy unit's throughput go by full chunks, their attention included.
  chunk_per_token_ = std::max(0.0, (t0 - step_overhead_) / n);
  queue_per_token_ = chunk_per_token_;
  ranks_ = static_cast<double>(dp);
}

PrefillCost PrefillCost::Linear(double fixed_s, double per_uncached_s, double per_cached_s, double per_queued_s,
                                double kv_bytes_per_token, double per_slot_wait_s) {
  PrefillCost c;
  c.fixed_ = fixed_s;
  c.per_token_ = per_uncached_s;
  c.chunk_per_token_ = per_uncached_s;
  c.per_cached_ = per_cached_s;
  c.queue_per_token_ = per_queued_s;
  c.slot_wait_ = per_slot_wait_s;
  c.kv_bytes_per_token_ = kv_bytes_per_token;
  return c;
}

}  // namespace myriad::policy
