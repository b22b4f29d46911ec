#pragma once
// Low-priority fill (issue 22): a batch tenant that only soaks up idle capacity, as a priority
// class of policy/tenants.h's TenantPolicy. A tenant of priority kFillPriority (config
// `fill: true`, in the gateway and the simulator alike) is admitted only into headroom: when
// this request's load signal (its estimated TTFT over the SLO) is at most
// TenantOptions::contention, fairness on or off, before its quota is spent or its usage
// counted. So it is the first class shed as load rises, at a load where no other tenant is
// touched yet; and, the lowest class, the recompute limiter's first shed too.
#include <string_view>

namespace myriad::policy {

inline constexpr int kFillPriority = -1'000'000;
// The priorities a configured tenant may have, the fill class's excluded.
inline constexpr int kMinTenantPriority = kFillPriority + 1;
inline constexpr int kMaxTenantPriority = 1'000'000;
inline constexpr std::string_view kTenantNoHeadroom = "tenant_no_headroom";

constexpr bool IsFill(int priority) { return priority == kFillPriority; }

}  // namespace myriad::policy
