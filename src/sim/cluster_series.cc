// The cluster's side of the time series: what it hands the sampler at each window's end, and
// its faults and controller actions as markers.
#include <fmt/format.h>

#include "sim/cluster.h"

namespace myriad::sim {

void Cluster::EnableSampling(Nanos interval) {
  std::vector<std::string> names;
  std::vector<int> counts;
  for (const PoolConfig& p : scenario_.pools) {
    names.push_back(p.name);
    counts.push_back(p.count);
  }
  const double dollars_per_second = scenario_.hardware.gpus() * scenario_.gpu_hour_price / 3600.0;
  sampler_ = std::make_unique<TimeSeriesSampler>(
      EffectiveSampleInterval(interval, scenario_.duration + scenario_.drain), std::move(names), std::move(counts),
      dollars_per_second, scenario_.slo.ttft, scenario_.slo.tpot);
  sampler_->series().variant = policy_name_;
  metrics_.set_sampler(sampler_.get());
}

const ClusterGauges& Cluster::ReadGauges() {
  ClusterGauges& g = gauges_;
  g.kv_handoff_bytes = transfer_bytes_;
  g.kv_fetch_bytes = kv_fetch_bytes_;
  if (store_) {
    const StoreTierStats& st = store_->stats();
    g.store_offload_bytes = st.offload_bytes;
    g.store_load_bytes = st.load_bytes;
    g.store_repair_bytes = st.repair_bytes;
  }
  g.limiter_shed = limiter_ ? static_cast<int64_t>(limiter_->shed()) : 0;
  g.rebalances = 0;
  for (const auto& d : moe_dynamics_) g.rebalances += d->rebalances;
  g.in_flight = static_cast<int64_t>(table_.live());
  const size_t pools = scenario_.pools.size();
  g.units_down = 0;
  g.pool_busy.assign(pools, 0);
  g.pool_waiting.assign(pools, 0);
  g.pool_running.assign(pools, 0);
  for (const auto& u : units_) {
    const auto p = static_cast<size_t>(u->config().pool);
    const policy::UnitLoad load = u->Load();
    g.units_down += u->routable() ? 0 : 1;
    g.pool_busy[p] += u->stats().busy;
    g.pool_waiting[p] += load.waiting;
    g.pool_running[p] += load.running;
  }
  return g;
}

void Cluster::RunSampledUntil(Nanos until) {
  // Events at a window's end belong to it (RunUntil runs those at `until` too). Once the run
  // has drained, the last window ends with the run (FinishRun), not on the sampling grid.
  for (Nanos next = sampler_->last_sample() + sampler_->interval(); next <= until; next += sampler_->interval()) {
    events_.RunUntil(next);
    if (arrivals_done_ && table_.live() == 0) break;
    sampler_->Sample(next, ReadGauges());
  }
  events_.RunUntil(until);
}

TimeSeries Cluster::Series() const {
  if (!sampler_) return {};
  TimeSeries s = sampler_->series();
  auto unit_name = [this](int unit) {
    if (unit < 0) return std::string("cluster");
    return fmt::format("unit {} ({})", unit,
                       scenario_.pools[static_cast<size_t>(units_[static_cast<size_t>(unit)]->config().pool)].name);
  };
  if (failures_) {
    for (const FaultRecord& f : failures_->faults()) {
      if (f.at > end_) continue;
      const std::string who = unit_name(f.unit);
      s.markers.push_back({Marker::Kind::kFault, NanosToSeconds(f.at), fmt::format("{} on {}", FaultKindName(f.kind), who)});
      if (f.absorbed) continue;  // recovered with the fault that had the unit down already
      if (f.detected >= 0 && f.detected <= end_) {
        s.markers.push_back({Marker::Kind::kEjection, NanosToSeconds(f.detected),
                             fmt::format("{} ejected ({}, detected by {})", who, FaultKindName(f.kind), f.detected_by)});
      }
      if (f.resumed >= 0 && f.resumed <= end_) {
        s.markers.push_back({Marker::Kind::kReadmission, NanosToSeconds(f.resumed), who + " serving degraded"});
      }
      if (f.recovered >= 0 && f.recovered <= end_) {
        s.markers.push_back({Marker::Kind::kReadmission, NanosToSeconds(f.recovered), who + " re-admitted"});
      }
    }
  }
  if (store_) {
    for (const StoreTier::NodeLoss& l : store_->losses()) {
      s.markers.push_back({Marker::Kind::kStoreNodeLoss, NanosToSeconds(l.at), fmt::format("store node {} lost", l.node)});
      if (l.detected >= 0) {
        s.markers.push_back({Marker::Kind::kStoreNodeDeclaredDead, NanosToSeconds(l.detected),
                             fmt::format("store node {} declared dead", l.node)});
      }
    }
  }
  s.FinishMarkers();
  return s;
}

}  // namespace myriad::sim
