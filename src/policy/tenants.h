#pragma once
// Tenants: per-tenant quotas (token buckets on tokens per second), priority classes, and a
// weighted fair share under contention, so that a large tenant cannot starve a small one.
// Pure: time comes in as `now`.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"

namespace myriad::policy {

struct TenantConfig {
  std::string name;
  double weight = 1.0;               // share of capacity under contention
  int priority = 0;                  // higher is more important
  double quota_tokens_per_s = 0;     // 0: no quota
  double burst_tokens = 0;           // bucket depth; 0: two seconds of quota
};

struct TenantOptions {
  bool fairness = false;
  // The cluster is contended when the router's TTFT estimate exceeds this fraction of the SLO;
  // at twice this, lower priority classes are shed whole.
  double contention = 0.5;
  // Time constant of the usage rate each tenant's share is measured by.
  Nanos usage_window = 10 * kSecond;
};

class TenantPolicy {
 public:
  TenantPolicy(std::vector<TenantConfig> tenants, TenantOptions options);

  // Decides on a request of `tokens` (prompt + expected output) from `tenant` given the
  // router's load signal (estimated TTFT / SLO) and the decode side's (recent TPOT / SLO,
  // policy::DecodePressure; read for the fill class only). Returns "" when admitted (and
  // charges the tenant), else the reason: "tenant_no_headroom", "tenant_quota",
  // "tenant_over_fair_share", "tenant_low_priority".
  std::string_view Admit(uint32_t tenant, int64_t tokens, double load, Nanos now, double decode_load = 0);

  // Tenants not configured get weight 1, priority 0, no quota, named "tenant<N>".
  size_t size() const { return state_.size(); }
  TenantConfig config(uint32_t tenant) const;
  // Recent admitted tokens per second.
  double UsageRate(uint32_t tenant, Nanos now) const;
  // The tenant's fair share of the recent total, by weight among tenants active recently.
  double FairShare(uint32_t tenant, Nanos now) const;

 private:
  struct State {
    TenantConfig config;
    double bucket = 0;
    Nanos bucket_time = 0;
    double usage = 0;  // exponentially decayed token count
    Nanos usage_time = 0;
    double demand = 0;  // decayed count of offered tokens (admitted or not): who is active
  };
  State& Get(uint32_t tenant);
  static TenantConfig Default(uint32_t tenant);
  double Decayed(double value, Nanos since, Nanos now) const;

  std::vector<State> state_;
  TenantOptions options_;
};

}  // namespace myriad::policy
