#include "control/elastic_driver.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace myriad::control {

using Phase = ElasticEngine::Phase;

ElasticDriver::ElasticDriver(const ElasticSignalsConfig& signals, const AutoscaleConfig& autoscale,
                             const PdRatioControlConfig& pd_ratio)
    : signals_(signals) {
  for (const auto& [role, bounds] : autoscale.pools) {
    policy::ScalerOptions o = autoscale.scaler;
    o.min_units = bounds.min;
    o.max_units = bounds.max;
    pools_[role].scaler = std::make_unique<policy::Autoscaler>(
        o, policy::SeasonalForecast(autoscale.forecast_period, autoscale.forecast_buckets));
  }
  if (pd_ratio.enabled) {
    pd_ = std::make_unique<policy::PdRatioController>(pd_ratio.options);
    pools_["prefill"];
    pools_["decode"];
  }
}

ElasticDriver::Sample ElasticDriver::Measure(const std::string& role, Pool& pool,
                                             const std::vector<ElasticEngine>& engines, double dt_s) {
  Sample out;
  double offered = 0, util = 0, waiting = 0;
  for (const ElasticEngine& e : engines) {
    if (e.role != role) continue;
    out.starting += e.phase == Phase::kStarting;
    const double inflight = e.running + e.waiting;
    if (e.reachable) {
      const auto it = last_.find(e.name);
      if (it != last_.end()) {
        // A restarted engine counts from zero again.
        const double before = e.finished >= it->second.first ? it->second.first : 0;
        offered += e.finished - before + inflight - it->second.second;
      }
    }
    if (e.phase != Phase::kServing) continue;
    ++out.signals.units;
    util += std::min(1.0, std::max(e.kv_usage, inflight / signals_.engine_concurrency));
    waiting += e.waiting;
  }
  for (const auto& [expires, n] : pool.pending) out.starting += n;
  out.rate = std::max(0.0, offered) / dt_s;
  if (out.signals.units > 0) {
    const double sampled = util / out.signals.units;
    const double tau = NanosToSeconds(signals_.smoothing);
    pool.utilisation =
        pool.utilisation < 0 ? sampled : pool.utilisation + (1 - std::exp(-dt_s / tau)) * (sampled - pool.utilisation);
    out.signals.utilisation = pool.utilisation;
    out.signals.queue_per_unit = waiting / out.signals.units;
  }
  return out;
}

std::vector<std::string> ElasticDriver::LeastLoaded(const std::string& role, int n,
                                                    const std::vector<ElasticEngine>& engines) const {
  std::vector<const ElasticEngine*> serving;
  for (const ElasticEngine& e : engines) {
    if (e.role == role && e.phase == Phase::kServing) serving.push_back(&e);
  }
  // Later engines first, so that among equals the newest goes.
  std::reverse(serving.begin(), serving.end());
  std::stable_sort(serving.begin(), serving.end(), [](const ElasticEngine* a, const ElasticEngine* b) {
    return a->running + a->waiting < b->running + b->waiting;
  });
  std::vector<std::string> out;
  for (size_t i = 0; i < serving.size() && static_cast<int>(out.size()) < n; ++i) out.push_back(serving[i]->name);
  return out;
}

std::vector<ElasticAction> ElasticDriver::Round(Nanos now, const std::vector<ElasticEngine>& engines) {
  std::vector<ElasticAction> actions;
  for (const ElasticEngine& e : engines) {
    if (!seen_.insert(e.name).second || last_round_ < 0) continue;
    // A new engine of the pool: one asked for has arrived.
    const auto it = pools_.find(e.role);
    if (it == pools_.end() || it->second.pending.empty()) continue;
    if (--it->second.pending.front().second == 0) it->second.pending.erase(it->second.pending.begin());
  }
  const bool first = last_round_ < 0;
  const double dt_s = first ? 0 : NanosToSeconds(now - last_round_);
  if (!first && dt_s > 0) {
    std::map<std::string, Sample> samples;
    for (auto& [role, pool] : pools_) {
      std::erase_if(pool.pending, [&](const auto& p) { return p.first <= now; });
      samples[role] = Measure(role, pool, engines, dt_s);
      if (!pool.scaler) continue;
      const Sample& s = samples[role];
      const auto d = pool.scaler->Decide({.arrival_rate = s.rate,
                                          .serving = s.signals.units,
                                          .starting = s.starting,
                                          .utilisation = s.signals.utilisation,
                                          .latency_over_slo = s.signals.latency_over_slo},
                                         now);
      if (!d) continue;
      if (d->delta > 0) {
        int more = d->delta;
        // Engines still draining are the fastest capacity there is: they serve again at once.
        for (const ElasticEngine& e : engines) {
          if (more == 0) break;
          if (e.role != role || e.phase != Phase::kRetiring) continue;
          actions.push_back({.kind = ElasticAction::Kind::kKeep, .role = role, .engine = e.name, .reason = d->reason});
          --more;
        }
        if (more > 0) {
          actions.push_back({.kind = ElasticAction::Kind::kScaleOut, .role = role, .count = more,
                             .ready_by = d->ready_by, .reason = d->reason});
          pool.pending.emplace_back(d->ready_by + pool.scaler->options().lead_time, more);
        }
      } else {
        for (const std::string& name : LeastLoaded(role, -d->delta, engines)) {
          actions.push_back({.kind = ElasticAction::Kind::kScaleIn, .role = role, .engine = name, .reason = d->reason});
        }
      }
    }
    if (pd_) {
      // A switch in progress settles before the next is considered.
      bool settling = false;
      for (const ElasticEngine& e : engines) {
        settling |= (e.role == "prefill" || e.role == "decode") && e.phase != Phase::kServing && e.phase != Phase::kOut;
      }
      if (!settling) {
        if (const auto sw = pd_->Decide(samples["prefill"].signals, samples["decode"].signals, now)) {
          const bool to_prefill = sw->to == policy::PdSide::kPrefill;
          const auto victim = LeastLoaded(to_prefill ? "decode" : "prefill", 1, engines);
          if (!victim.empty()) {
            actions.push_back({.kind = ElasticAction::Kind::kSwitch, .role = to_prefill ? "prefill" : "decode",
                               .engine = victim.front(), .reason = sw->reason});
          }
        }
      }
    }
  }
  last_.clear();
  for (const ElasticEngine& e : engines) {
    if (e.reachable) last_[e.name] = {e.finished, e.running + e.waiting};
  }
  last_round_ = now;
  return actions;
}

}  // namespace myriad::control
