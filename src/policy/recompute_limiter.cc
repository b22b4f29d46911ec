#include "policy/recompute_limiter.h"

#include <algorithm>

namespace myriad::policy {

RecomputeLimiter::RecomputeLimiter(RecomputeLimiterOptions o) : o_(o) {
  depth_ = o_.tokens_per_s * o_.burst_seconds;
  level_ = depth_;
}

double RecomputeTokensPerSecond(double fraction, std::span<const PrefillCost* const> entry_units) {
  double tokens_per_s = 0;
  for (const PrefillCost* c : entry_units) tokens_per_s += c->ThroughputTokensPerSecond();
  return fraction * tokens_per_s;
}

void RecomputeLimiter::SetRate(Nanos now, double tokens_per_s) {
  Refill(now);
  const double depth = tokens_per_s * o_.burst_seconds;
  level_ = std::min(depth, level_ + std::max(0.0, depth - depth_));
  depth_ = depth;
  o_.tokens_per_s = tokens_per_s;
}

void RecomputeLimiter::Refill(Nanos now) {
  if (now > last_) {
    level_ = std::min(depth_, level_ + o_.tokens_per_s * NanosToSeconds(now - last_));
    last_ = now;
  }
}

void RecomputeLimiter::Charge(Nanos now, double tokens) {
  if (!enabled()) return;
  Refill(now);
  // At most one bucket of debt: a larger storm is still paid back within 2 x burst_seconds.
  level_ = std::max(level_ - tokens, -depth_);
}

bool RecomputeLimiter::WouldAdmit(Nanos now, double tokens, int levels_below_top) {
  if (!enabled()) return true;
  Refill(now);
  const double reserve =
      depth_ * std::min(o_.max_reserve, o_.reserve_per_level * std::max(levels_below_top, 0));
  // A request larger than what is left above its reserve waits its turn as a 429; one larger
  // than the whole bucket is let through when the bucket is full, so it is never starved.
  return level_ - tokens >= reserve || (level_ >= depth_ && levels_below_top == 0);
}

bool RecomputeLimiter::Admit(Nanos now, double tokens, int levels_below_top) {
  if (!WouldAdmit(now, tokens, levels_below_top)) {
    ++shed_;
    return false;
  }
  level_ -= tokens;
  return true;
}

}  // namespace myriad::policy
