#include "policy/tenants.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "policy/tenant_fill.h"

namespace myriad::policy {

TenantConfig TenantPolicy::Default(uint32_t tenant) {
  return TenantConfig{.name = "tenant" + std::to_string(tenant)};
}

TenantConfig TenantPolicy::config(uint32_t tenant) const {
  return tenant < state_.size() ? state_[tenant].config : Default(tenant);
}

TenantPolicy::State& TenantPolicy::Get(uint32_t tenant) {
  while (state_.size() <= tenant) {
    State s;
    s.config = Default(static_cast<uint32_t>(state_.size()));
    state_.push_back(std::move(s));
  }
  return state_[tenant];
}

TenantPolicy::TenantPolicy(std::vector<TenantConfig> tenants, TenantOptions options) : options_(options) {
  for (auto& t : tenants) {
    State s;
    if (t.quota_tokens_per_s > 0 && t.burst_tokens <= 0) t.burst_tokens = 2 * t.quota_tokens_per_s;
    s.config = std::move(t);
    s.bucket = s.config.burst_tokens;
    state_.push_back(std::move(s));
  }
}

namespace {

// What a value kept since `since` is worth at `now` (1 when now <= since).
double Decay(Nanos since, Nanos now, Nanos window) {
  if (now <= since) return 1.0;
  return std::exp(-NanosToSeconds(now - since) / NanosToSeconds(window));
}

}  // namespace

double TenantPolicy::Decayed(double value, Nanos since, Nanos now) const {
  return value * Decay(since, now, options_.usage_window);
}

double TenantPolicy::UsageRate(uint32_t tenant, Nanos now) const {
  if (tenant >= state_.size()) return 0;
  const State& s = state_[tenant];
  return Decayed(s.usage, s.usage_time, now) / NanosToSeconds(options_.usage_window);
}

double TenantPolicy::FairShare(uint32_t tenant, Nanos now) const {
  double total = 0, weights = 0;
  for (const State& s : state_) {
    const double demand = Decayed(s.demand, s.usage_time, now);
    if (demand < 1.0) continue;  // not active recently
    total += Decayed(s.usage, s.usage_time, now);
    weights += s.config.weight;
  }
  if (weights <= 0) return 0;
  return total / NanosToSeconds(options_.usage_window) * config(tenant).weight / weights;
}

std::string_view TenantPolicy::Admit(uint32_t tenant, int64_t tokens, double load, Nanos now, double decode_load) {
  State& s = Get(tenant);
  // Both decay over the same span: one exponential.
  const double keep = Decay(s.usage_time, now, options_.usage_window);
  s.usage *= keep;
  s.demand *= keep;
  s.usage_time = now;
  s.demand += static_cast<double>(tokens);
  const double t = static_cast<double>(tokens);
  // Fill takes only what nobody else needs: refused before it spends quota or counts as usage.
  if (IsFill(s.config.priority) && (load > options_.contention || decode_load > options_.contention)) {
    return kTenantNoHeadroom;
  }

  if (s.config.quota_tokens_per_s > 0) {
    s.bucket = std::min(s.config.burst_tokens,
                        s.bucket + s.config.quota_tokens_per_s * NanosToSeconds(now - s.bucket_time));
    s.bucket_time = now;
    // A request larger than the whole bucket may go when the bucket is full, or it never could.
    if (s.bucket < std::min(t, s.config.burst_tokens)) return "tenant_quota";
  }
  if (options_.fairness && load > options_.contention) {
    if (load > 2 * options_.contention) {
      int top = s.config.priority;
      for (const State& o : state_) {
        if (Decayed(o.demand, o.usage_time, now) >= 1.0) top = std::max(top, o.config.priority);
      }
      if (s.config.priority < top) return "tenant_low_priority";
    }
    // Over its weighted share of what the cluster is serving, and the most over-served of the
    // active tenants (usage per weight): it absorbs the shedding, a tenant that sends less
    // than its share never does.
    const double mine = UsageRate(tenant, now) / s.config.weight;
    bool most_served = true;
    for (uint32_t o = 0; o < state_.size() && most_served; ++o) {
      if (o == tenant || Decayed(state_[o].demand, state_[o].usage_time, now) < 1.0) continue;
      most_served = UsageRate(o, now) / state_[o].config.weight <= mine;
    }
    if (most_served && UsageRate(tenant, now) > FairShare(tenant, now) * (1 + 1e-9)) {
      return "tenant_over_fair_share";
    }
  }
  if (s.config.quota_tokens_per_s > 0) s.bucket -= t;
  s.usage += t;
  return "";
}

}  // namespace myriad::policy
