#include "policy/trace_sampler.h"

#include <algorithm>
#include <cmath>

namespace myriad::policy {

namespace {
constexpr uint64_t kRandomSpan = uint64_t{1} << 56;
}  // namespace

std::string_view SampleReasonName(SampleReason reason) {
  switch (reason) {
    case SampleReason::kDropped: return "dropped";
    case SampleReason::kHead: return "head";
    case SampleReason::kError: return "error";
    case SampleReason::kRejected: return "rejected";
    case SampleReason::kSlow: return "slow";
  }
  return "?";
}

TraceSampler::TraceSampler(TraceSamplerOptions options) : options_(options) {
  const double r = std::clamp(std::isfinite(options_.sample_ratio) ? options_.sample_ratio : 0.0, 0.0, 1.0);
  // 56 bits: W3C level 2's random trace-id part; a double holds the product exactly enough.
  threshold_ = r >= 1.0 ? kRandomSpan : static_cast<uint64_t>(r * static_cast<double>(kRandomSpan));
}

bool TraceSampler::Head(std::optional<bool> parent_sampled, uint64_t trace_id_low) const {
  if (parent_sampled) return *parent_sampled;
  return (trace_id_low & (kRandomSpan - 1)) < threshold_;
}

SampleReason TraceSampler::Keep(bool head_sampled, int status, Nanos ttft, Nanos duration) const {
  if (status >= 500) return SampleReason::kError;
  if (status == 429 && options_.keep_rejected) return SampleReason::kRejected;
  if (options_.slow_threshold > 0 && (ttft > options_.slow_threshold || duration > options_.slow_threshold)) {
    return SampleReason::kSlow;
  }
  return head_sampled ? SampleReason::kHead : SampleReason::kDropped;
}

}  // namespace myriad::policy
