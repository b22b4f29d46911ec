#include "policy/prefill_cost.h"

#include <algorithm>

namespace myriad::policy {

PrefillCost::PrefillCost(const perf::StepModel& model, int64_t chunk_tokens)
    : chunk_tokens_(std::max<int64_t>(chunk_tokens, 1)), kv_bytes_per_token_(model.KvBytesPerToken()) {
  // A request's prompt runs on one DP rank, one chunk per step, while the other ranks carry
  // chunks of their own (a busy unit: the estimate is meant for ranking loaded candidates).
  const double n = static_cast<double>(chunk_tokens_);
  const int64_t dp = std::max(model.layout().dp, 1);
  auto step = [&](double context) {
    perf::BatchShape b;
    b.prefill_seqs = dp;
    b.prefill_tokens = chunk_tokens_ * dp;
    b.prefill_attended = static_cast<double>(dp) * (n * context + n * (n + 1) / 2);
    return NanosToSeconds(model.StepTime(b));
  };
  constexpr double kLongContext = 32768;
  step_overhead_ = NanosToSeconds(model.calibration().step_overhead);
  const double t0 = step(0);
  const double t1 = step(kLongContext);
  per_token_ = std::max(0.0, (t0 - step_overhead_) / n);
  per_attended_ = std::max(0.0, (t1 - t0) / (n * kLongContext));
  fixed_ = step_overhead_;
  queue_per_token_ = per_token_;
  ranks_ = static_cast<double>(dp);
}

PrefillCost PrefillCost::Linear(double fixed_s, double per_uncached_s, double per_cached_s, double per_queued_s,
                                double kv_bytes_per_token) {
  PrefillCost c;
  c.fixed_ = fixed_s;
  c.per_token_ = per_uncached_s;
  c.per_cached_ = per_cached_s;
  c.queue_per_token_ = per_queued_s;
  c.kv_bytes_per_token_ = kv_bytes_per_token;
  return c;
}

}  // namespace myriad::policy
