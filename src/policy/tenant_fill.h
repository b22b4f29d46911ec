#pragma once
// Low-priority fill (issue 22): a batch tenant that only soaks up idle capacity, as a priority
// class of policy/tenants.h's TenantPolicy. A tenant of priority kFillPriority (config
// `fill: true`, in the gateway and the simulator alike) is admitted only into headroom: when
// this request's load signal (its estimated TTFT over the SLO) and the decode side's (the
// recent time per output token over the TPOT SLO, DecodePressure below) are both at most
// TenantOptions::contention, fairness on or off, before its quota is spent or its usage
// counted. So it is the first class shed as load rises, at a load where no other tenant is
// touched yet; and, the lowest class, the recompute limiter's first shed too. Once running, a
// fill sequence is the engines' first preemption victim (policy::BatchPlanner::Victim).
#include <cstdint>
#include <string_view>

#include "core/time.h"

namespace myriad::policy {

inline constexpr int kFillPriority = -1'000'000;
// The priorities a configured tenant may have, the fill class's excluded.
inline constexpr int kMinTenantPriority = kFillPriority + 1;
inline constexpr int kMaxTenantPriority = 1'000'000;
inline constexpr std::string_view kTenantNoHeadroom = "tenant_no_headroom";

constexpr bool IsFill(int priority) { return priority == kFillPriority; }

// The decode side's load as fill admission reads it: the time per output token of recently
// finished requests over the TPOT SLO, a mean weighted by recency (each request's weight decays
// by e every `window`), so fill stops entering a decode pool near its TPOT SLO while the prompt
// side still has room. The simulator feeds it its completions, the gateway the streams it
// relays (policy/slo.h's TPOT, the same definition). 0 before any sample, and once the samples'
// decayed weight is below that of one sample three windows old.
class DecodePressure {
 public:
  explicit DecodePressure(Nanos tpot_slo, Nanos window = 10 * kSecond) : tpot_slo_(tpot_slo), window_(window) {}
  // A request finished at `now` with this time per output token (< 0: one token, ignored).
  void Observe(Nanos now, Nanos tpot);
  double Load(Nanos now) const;

 private:
  void Decay(Nanos now, double* sum, double* weight) const;
  Nanos tpot_slo_, window_;
  double sum_ = 0, weight_ = 0;  // decayed to time_
  Nanos time_ = 0;
};

}  // namespace myriad::policy
