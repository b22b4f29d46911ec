// The cluster's side of fault handling: building the failure model and the recompute limiter,
// and the report section with the timeline.
#include <algorithm>

#include "sim/cluster.h"

namespace myriad::sim {

absl::Status Cluster::BuildFailures() {
  auto fm = FailureModel::Create(scenario_, events_, units_, placements_, *this);
  if (!fm.ok()) return fm.status();
  failures_ = std::move(*fm);
  const FaultConfig& fc = scenario_.faults;
  if (fc.recompute_limit > 0) {
    // The entry pools' nominal cost model (the router's), not the learned one: the limit is
    // fixed when the cluster is built.
    std::vector<const policy::PrefillCost*> costs;
    for (int u : entry_units_) {
      costs.push_back(&pool_costs_[static_cast<size_t>(units_[static_cast<size_t>(u)]->config().pool)]);
    }
    limiter_ = std::make_unique<policy::RecomputeLimiter>(
        policy::RecomputeLimiterOptions{.tokens_per_s = policy::RecomputeTokensPerSecond(fc.recompute_limit, costs)});
  }
  const Nanos bucket = fc.timeline_bucket > 0 ? fc.timeline_bucket : std::max<Nanos>(scenario_.duration / 48, kSecond);
  metrics_.EnableTimeline(bucket, scenario_.duration + scenario_.drain);
  return absl::OkStatus();
}

nlohmann::ordered_json Cluster::FailureReport() const {
  using nlohmann::ordered_json;
  ordered_json j = failures_->Report(end_);
  j["retried_requests"] = retries_;
  j["evacuated_requests"] = evacuated_;
  j["failed_kv_transfers"] = failed_transfers_;  // source died or destination gone mid-transfer
  j["kv_tokens_lost"] = lost_kv_tokens_;
  // Prompt plus already-streamed output of every retry: the most it may have to recompute.
  j["retried_context_tokens"] = retried_context_tokens_;
  j["recompute_limiter"] = {{"enabled", limiter_ != nullptr},
                            {"tokens_per_s", limiter_ ? limiter_->rate() : 0.0},
                            {"shed", limiter_ ? limiter_->shed() : 0}};
  // Per bucket: SLO attainment of the requests that arrived in it, goodput completed in it,
  // and the share of each pool's units serving.
  ordered_json timeline = ordered_json::array();
  const Nanos b = metrics_.timeline_bucket;
  for (size_t i = 0; i < metrics_.timeline.size(); ++i) {
    const Nanos from = static_cast<Nanos>(i) * b, to = std::min(from + b, end_);
    if (from >= end_) break;
    const auto& t = metrics_.timeline[i];
    ordered_json avail = ordered_json::object();
    for (size_t p = 0; p < scenario_.pools.size(); ++p) {
      avail[scenario_.pools[p].name] = failures_->Availability(static_cast<int>(p), from, to);
    }
    int faults = 0;
    for (const FaultRecord& f : failures_->faults()) faults += f.at >= from && f.at < to;
    timeline.push_back({{"t_s", NanosToSeconds(from)},
                        {"arrived", t.arrived},
                        {"slo_attainment", t.arrived ? ordered_json(static_cast<double>(t.good) / static_cast<double>(t.arrived))
                                                     : ordered_json()},
                        {"goodput_tokens_per_s", static_cast<double>(t.good_tokens) / NanosToSeconds(to - from)},
                        {"availability", avail},
                        {"faults", faults}});
  }
  j["timeline"] = timeline;
  return j;
}

}  // namespace myriad::sim
