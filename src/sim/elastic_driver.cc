#include "sim/elastic_driver.h"

#include <fmt/format.h>

#include <algorithm>

#include "perf/transfer.h"
#include "policy/recovery.h"

namespace myriad::sim {
namespace {

// The report lists the first actions in full; the rest are counted.
constexpr size_t kMaxReportedActions = 500;

policy::PdSide SideOf(const PdRatioConfig& c, size_t p) {
  return static_cast<int>(p) == c.prefill_index ? policy::PdSide::kPrefill : policy::PdSide::kDecode;
}

}  // namespace

ElasticDriver::ElasticDriver(const Scenario& s, EventQueue& events, const std::vector<std::unique_ptr<Unit>>& units,
                             const RequestMetrics& metrics, bool act)
    : s_(s),
      events_(events),
      units_(units),
      metrics_(metrics),
      act_(act),
      rec_(units.size()),
      pools_(s.pools.size()),
      fabric_(policy::FabricOf(s.elastic.scale_out,
                               s.hardware.nic_gbps / 8 * 1e9 * perf::TransferModel{}.nic_efficiency * s.hardware.gpus_per_node,
                               s.hardware.spine_oversubscription)),
      storage_(events, s.elastic.scale_out.storage_bytes_per_s),
      restarts_(s.elastic.restarts.size()) {
  for (size_t u = 0; u < units.size(); ++u) pools_[static_cast<size_t>(units[u]->config().pool)].units.push_back(static_cast<int>(u));
  const ElasticConfig& e = s.elastic;
  for (const AutoscaleConfig& a : e.autoscale) {
    PoolRec& pr = pools_[static_cast<size_t>(a.pool_index)];
    const PoolConfig& pool = s.pools[static_cast<size_t>(a.pool_index)];
    if (pr.units.empty()) continue;
    const Unit& unit = *units[static_cast<size_t>(pr.units.front())];
    // Planned with a serving peer to load from, as a pool above its floor always has.
    pr.lead = policy::ScaleOutLeadTime({.unit_bytes = unit.model().WeightBytesPerGpu() * pool.layout.gpus(),
                                        .nodes_per_unit = pool.layout.nodes,
                                        .loaded_units = e.scale_out.weights_from_peers ? 1 : 0,
                                        .peers_allowed = e.scale_out.weights_from_peers},
                                       fabric_, e.scale_out);
    policy::ScalerOptions o = a.scaler;
    o.min_units = a.min;
    o.max_units = pool.count;
    o.lead_time = pr.lead;
    pr.scaler = std::make_unique<policy::Autoscaler>(
        o, policy::SeasonalForecast(e.forecast_period, e.forecast_buckets, e.forecast_profile));
  }
  if (e.pd_ratio.enabled) pd_ = std::make_unique<policy::PdRatioController>(e.pd_ratio.options);
}

void ElasticDriver::Init() {
  const ElasticConfig& e = s_.elastic;
  std::vector<int> initial(s_.pools.size());
  for (size_t p = 0; p < s_.pools.size(); ++p) initial[p] = s_.pools[p].count;
  if (act_) {
    for (const AutoscaleConfig& a : e.autoscale) initial[static_cast<size_t>(a.pool_index)] = a.initial;
    if (e.pd_ratio.enabled) {
      initial[static_cast<size_t>(e.pd_ratio.prefill_index)] = e.pd_ratio.prefill_initial;
      initial[static_cast<size_t>(e.pd_ratio.decode_index)] = e.pd_ratio.decode_initial;
    }
  }
  for (size_t p = 0; p < pools_.size(); ++p) {
    PoolRec& pr = pools_[p];
    for (size_t i = 0; i < pr.units.size(); ++i) {
      const int u = pr.units[i];
      UnitRec& r = rec_[static_cast<size_t>(u)];
      if (static_cast<int>(i) < initial[p]) continue;  // serving, allocated from 0
      r.state = State::kOff;
      r.alloc_since = -1;
      units_[static_cast<size_t>(u)]->set_routable(false);
    }
    pr.peak = pr.low = initial[p];
  }
}

void ElasticDriver::Start(Nanos horizon) {
  horizon_ = horizon;
  events_.After(s_.elastic.interval, [this] { Tick(); });
  for (size_t k = 0; k < restarts_.size(); ++k) {
    const Nanos at = s_.elastic.restarts[k].at;
    if (at <= horizon) events_.At(at, [this, k] { BeginRestart(k); });
  }
}

int ElasticDriver::Count(size_t p, State st) const {
  int n = 0;
  for (int u : pools_[p].units) n += rec_[static_cast<size_t>(u)].state == st;
  return n;
}

policy::PoolSignals ElasticDriver::Sample(size_t p, Nanos dt) {
  const PoolConfig& pool = s_.pools[p];
  policy::PoolSignals sig;
  double util = 0, waiting = 0, queued_tokens = 0, busy_s = 0, prefilled = 0, steps = 0, admitted = 0;
  for (int u : pools_[p].units) {
    UnitRec& r = rec_[static_cast<size_t>(u)];
    const Unit& unit = *units_[static_cast<size_t>(u)];
    const UnitStats& st = unit.stats();
    const double db = NanosToSeconds(st.busy - r.last_busy);
    const double ds = static_cast<double>(st.steps - r.last_steps);
    const double dp = static_cast<double>(st.prefill_tokens + st.recompute_tokens - r.last_prefilled);
    r.last_busy = st.busy;
    r.last_steps = st.steps;
    r.last_prefilled = st.prefill_tokens + st.recompute_tokens;
    const double da = static_cast<double>(st.decode_admitted - r.last_admitted);
    r.last_admitted = st.decode_admitted;
    if (r.state != State::kServing) continue;
    admitted += da;
    ++sig.units;
    const policy::UnitLoad l = unit.Load();
    busy_s += db;
    steps += ds;
    prefilled += dp;
    waiting += l.waiting;
    queued_tokens += static_cast<double>(l.queued_prefill_tokens);
    if (pool.role == Role::kDecode) {
      const double seqs = static_cast<double>(l.running) / (static_cast<double>(pool.max_seqs) * pool.layout.dp);
      util += std::max(l.kv_usage, seqs);
    } else {
      util += std::min(1.0, db / std::max(1e-9, NanosToSeconds(dt)));
    }
  }
  if (sig.units == 0) return sig;
  sig.utilisation = util / sig.units;
  sig.queue_per_unit = waiting / sig.units;
  if (pool.role == Role::kDecode) {
    sig.latency_over_slo = policy::DecodeLatencyOverSlo(
        {.busy_s = busy_s, .steps = steps, .waiting = waiting, .admitted = admitted, .window_s = NanosToSeconds(dt)},
        s_.slo.tpot, s_.slo.ttft);
  } else {
    // The queued prompt tokens at the rate the pool computed them: the wait a new prompt faces.
    const double per_unit_rate = busy_s > 0 ? prefilled / busy_s : 0;
    sig.latency_over_slo =
        per_unit_rate > 0 ? queued_tokens / sig.units / per_unit_rate / NanosToSeconds(s_.slo.ttft) : 0;
  }
  return sig;
}

void ElasticDriver::Tick() {
  const Nanos now = events_.now();
  const Nanos dt = now - last_tick_;
  last_tick_ = now;
  const double rate = static_cast<double>(metrics_.arrived - last_arrived_) / std::max(1e-9, NanosToSeconds(dt));
  last_arrived_ = metrics_.arrived;
  // Drained units leave first: what they free is counted before anything is asked for.
  for (size_t u = 0; u < rec_.size(); ++u) {
    UnitRec& r = rec_[u];
    const Unit& unit = *units_[u];
    if (r.state != State::kDraining || !unit.idle() || unit.kv_used() > 0) continue;
    if (r.restart_after) {
      Reload(static_cast<int>(u));
      continue;
    }
    const size_t from = static_cast<size_t>(unit.config().pool);
    if (r.sleep_after) {
      Sleep(static_cast<int>(u));
      ++pools_[from].sleeps;
      continue;
    }
    Free(static_cast<int>(u));
    if (r.switch_to >= 0) {
      const auto to = static_cast<size_t>(r.switch_to);
      r.switch_to = -1;
      for (int v : pools_[to].units) {
        if (rec_[static_cast<size_t>(v)].state != State::kOff) continue;
        // The same GPUs, their weights resident: only the warm-up and the readiness gate.
        Allocate(v);
        rec_[static_cast<size_t>(v)].state = State::kStarting;
        ++pools_[to].switched_in;
        events_.After(s_.elastic.scale_out.warmup + s_.elastic.scale_out.readiness, [this, v] { Serve(v); });
        break;
      }
      ++pools_[from].switched_out;
    }
  }
  for (size_t k = 0; k < restarts_.size(); ++k) RestartRound(k);
  bool over = false;
  for (size_t p = 0; p < pools_.size(); ++p) {
    PoolRec& pr = pools_[p];
    pr.last = Sample(p, dt);
    pr.unit_seconds += pr.last.units * NanosToSeconds(dt);
    over |= pr.last.latency_over_slo > 1;
    if (!act_ || !pr.scaler) continue;
    const auto decision = pr.scaler->Decide({.arrival_rate = rate,
                                             .serving = pr.last.units,
                                             .starting = Count(p, State::kStarting),
                                             .utilisation = pr.last.utilisation,
                                             .latency_over_slo = pr.last.latency_over_slo},
                                            now);
    if (!decision) continue;
    if (decision->delta > 0) ScaleOut(p, decision->delta, decision->reason);
    else ScaleIn(p, -decision->delta, decision->reason);
  }
  if (act_ && pd_) {
    const PdRatioConfig& c = s_.elastic.pd_ratio;
    const auto pi = static_cast<size_t>(c.prefill_index), di = static_cast<size_t>(c.decode_index);
    // A switch in progress settles before the next is considered.
    bool settling = false;
    for (size_t p : {pi, di}) settling |= Count(p, State::kStarting) > 0 || Count(p, State::kDraining) > 0;
    if (!settling) {
      if (auto sw = pd_->Decide(pools_[pi].last, pools_[di].last, now)) {
        const size_t from = sw->from == policy::PdSide::kPrefill ? pi : di, to = from == pi ? di : pi;
        const int u = LeastLoaded(from);
        if (u >= 0 && Count(to, State::kOff) > 0) {
          rec_[static_cast<size_t>(u)].state = State::kDraining;
          rec_[static_cast<size_t>(u)].switch_to = static_cast<int>(to);
          units_[static_cast<size_t>(u)]->set_routable(false);
          Record(from, fmt::format("switch 1 unit to {}", s_.pools[to].name), sw->reason);
        }
      }
    }
  }
  const SyntheticOptions& w = s_.workload.synthetic;
  if (w.burst_factor > 1) {
    const Nanos end = w.burst_start + 2 * w.burst_ramp + w.burst_duration;
    if (now >= w.burst_start && now <= end + 30 * kMinute && over) burst_over_slo_ = now;
  }
  for (size_t p = 0; p < pools_.size(); ++p) {
    const int held = pools_[p].last.units + Count(p, State::kStarting);
    pools_[p].peak = std::max(pools_[p].peak, held);
    pools_[p].low = std::min(pools_[p].low, held);
  }
  if (now + s_.elastic.interval <= horizon_) events_.After(s_.elastic.interval, [this] { Tick(); });
}

void ElasticDriver::Allocate(int u) {
  UnitRec& r = rec_[static_cast<size_t>(u)];
  if (r.alloc_since < 0) r.alloc_since = events_.now();
}

void ElasticDriver::Free(int u) {
  UnitRec& r = rec_[static_cast<size_t>(u)];
  if (r.alloc_since >= 0) r.allocated += events_.now() - r.alloc_since;
  r.alloc_since = -1;
  r.state = State::kOff;
}

void ElasticDriver::ScaleOut(size_t p, int n, const std::string& reason) {
  PoolRec& pr = pools_[p];
  const int loaded = Count(p, State::kServing);
  int started = 0;
  // Units still draining are the fastest capacity there is: they take traffic again at once.
  for (int u : pr.units) {
    if (started == n) break;
    UnitRec& r = rec_[static_cast<size_t>(u)];
    if (r.state != State::kDraining || r.switch_to >= 0 || r.restart_after) continue;
    r.state = State::kServing;
    r.sleep_after = false;
    units_[static_cast<size_t>(u)]->set_routable(true);
    ++started;
  }
  // Then sleepers: their weights are kept.
  int wake = policy::UnitsToWake(n - started, Count(p, State::kSleeping));
  for (int u : pr.units) {
    if (wake == 0) break;
    if (rec_[static_cast<size_t>(u)].state != State::kSleeping) continue;
    Wake(u);
    --wake;
    ++started;
    ++pr.wakes;
  }
  std::vector<int> fresh;
  for (int u : pr.units) {
    if (started == n) break;
    UnitRec& r = rec_[static_cast<size_t>(u)];
    if (r.state != State::kOff) continue;
    Allocate(u);
    r.state = State::kStarting;
    fresh.push_back(u);
    ++started;
  }
  if (started == 0) return;
  if (!fresh.empty()) BringUp(p, std::move(fresh), loaded);
  pr.scale_outs += started;
  Record(p, fmt::format("add {} (ready in {})", started, FormatDuration(pr.lead)), reason);
}

void ElasticDriver::BringUp(size_t p, std::vector<int> units, int loaded) {
  const policy::RecoveryOptions& r = s_.elastic.scale_out;
  const Unit& unit = *units_[static_cast<size_t>(units.front())];
  const PoolConfig& pool = s_.pools[p];
  const policy::WeightLoad load{.unit_bytes = unit.model().WeightBytesPerGpu() * pool.layout.gpus(),
                                .nodes_per_unit = pool.layout.nodes,
                                .units = static_cast<int>(units.size()),
                                .loaded_units = loaded,
                                .peers_allowed = r.weights_from_peers};
  events_.After(r.spare_acquire, [this, load, units = std::move(units)] {
    const policy::RecoveryOptions& ro = s_.elastic.scale_out;
    const Nanos after_load = ro.comm_init + ro.warmup + ro.readiness;
    const policy::WeightPlan plan = policy::PlanWeightLoad(load, fabric_);
    ++plans_[static_cast<int>(plan.kind)];
    if (load.units > largest_load_) {
      largest_load_ = load.units;
      largest_load_time_ = plan.makespan;
      largest_load_storage_time_ = plan.storage_makespan;
    }
    for (size_t i = 0; i < units.size(); ++i) {
      const int u = units[i];
      if (plan.kind != policy::WeightPlanKind::kStorage) {
        events_.After(plan.ready[i] + after_load, [this, u] { Serve(u); });
        continue;
      }
      // Storage is shared with every other load in flight, as the failure model shares it.
      storage_.Start(load.unit_bytes, load.nodes_per_unit, load.nodes_per_unit * ro.storage_per_node_bytes_per_s,
                     [this, u, after_load] { events_.After(after_load, [this, u] { Serve(u); }); });
    }
  });
}

void ElasticDriver::Sleep(int u) {
  UnitRec& r = rec_[static_cast<size_t>(u)];
  r.sleep_after = false;
  if (!policy::SleepHoldsGpus(s_.elastic.sleep)) Free(u);
  r.state = State::kSleeping;
  r.asleep_since = events_.now();
}

void ElasticDriver::Wake(int u) {
  UnitRec& r = rec_[static_cast<size_t>(u)];
  r.slept += events_.now() - r.asleep_since;
  Allocate(u);
  r.state = State::kStarting;
  events_.After(policy::WakeTime(units_[static_cast<size_t>(u)]->model().WeightBytesPerGpu(), s_.elastic.sleep),
                [this, u] { Serve(u); });
}

void ElasticDriver::Serve(int u) {
  UnitRec& r = rec_[static_cast<size_t>(u)];
  if (r.state != State::kStarting) return;
  r.state = State::kServing;
  units_[static_cast<size_t>(u)]->set_routable(true);
}

int ElasticDriver::LeastLoaded(size_t p) const {
  int best = -1;
  int64_t best_load = 0;
  for (int u : pools_[p].units) {
    if (rec_[static_cast<size_t>(u)].state != State::kServing) continue;
    if (pinned_ && (*pinned_)[static_cast<size_t>(u)]) continue;
    const policy::UnitLoad l = units_[static_cast<size_t>(u)]->Load();
    const int64_t load = int64_t{l.running} + l.waiting;
    if (best < 0 || load <= best_load) {
      best = u;
      best_load = load;
    }
  }
  return best;
}

Nanos ElasticDriver::ReloadTime(int u) const {
  const Unit& unit = *units_[static_cast<size_t>(u)];
  const PoolConfig& pool = s_.pools[static_cast<size_t>(unit.config().pool)];
  const policy::RecoveryOptions& r = s_.elastic.scale_out;
  return policy::ScaleOutLeadTime({.unit_bytes = unit.model().WeightBytesPerGpu() * pool.layout.gpus(),
                                   .nodes_per_unit = pool.layout.nodes,
                                   .loaded_units = r.weights_from_peers ? 1 : 0,
                                   .peers_allowed = r.weights_from_peers},
                                  fabric_, r) -
         r.spare_acquire;
}

void ElasticDriver::ScaleIn(size_t p, int n, const std::string& reason) {
  int asleep = Count(p, State::kSleeping);
  for (int u : pools_[p].units) asleep += rec_[static_cast<size_t>(u)].sleep_after;
  const int to_sleep = policy::UnitsToSleep(n, asleep, s_.elastic.sleep);
  int drained = 0;
  for (; drained < n; ++drained) {
    const int u = LeastLoaded(p);
    if (u < 0) break;
    rec_[static_cast<size_t>(u)].state = State::kDraining;
    rec_[static_cast<size_t>(u)].sleep_after = drained < to_sleep;
    units_[static_cast<size_t>(u)]->set_routable(false);
  }
  if (drained == 0) return;
  pools_[p].scale_ins += drained;
  Record(p, to_sleep > 0 ? fmt::format("drain {} ({} to sleep)", drained, std::min(drained, to_sleep)) : fmt::format("drain {}", drained),
         reason);
}

void ElasticDriver::Record(size_t p, std::string what, std::string reason) {
  ++actions_total_;
  if (actions_.size() < kMaxReportedActions) {
    actions_.push_back({events_.now(), s_.pools[p].name, std::move(what), std::move(reason)});
  }
}

double ElasticDriver::PoolGpuHours(size_t p, Nanos end) const {
  Nanos total = 0;
  for (int u : pools_[p].units) {
    const UnitRec& r = rec_[static_cast<size_t>(u)];
    total += r.allocated + (r.alloc_since >= 0 ? std::max<Nanos>(0, end - r.alloc_since) : 0);
  }
  return NanosToSeconds(total) * s_.pools[p].layout.gpus() / 3600.0;
}

nlohmann::ordered_json ElasticDriver::Report(Nanos end) const {
  using nlohmann::ordered_json;
  ordered_json pools = ordered_json::array();
  double hours = 0;
  for (size_t p = 0; p < pools_.size(); ++p) {
    const PoolRec& pr = pools_[p];
    const double h = PoolGpuHours(p, end);
    hours += h;
    ordered_json j = {{"name", s_.pools[p].name},
                      {"gpu", s_.PoolGpu(p)},
                      {"gpu_hour_price", s_.PoolPrice(p)},
                      {"max_units", s_.pools[p].count},
                      {"units_low", pr.low},
                      {"units_peak", pr.peak},
                      {"mean_serving_units", NanosToSeconds(end) > 0 ? pr.unit_seconds / NanosToSeconds(end) : 0},
                      {"gpu_hours", h},
                      {"dollars", PoolDollars(p, end)}};
    if (pr.scaler) {
      j["autoscaled"] = {{"lead_time_s", NanosToSeconds(pr.lead)},
                         {"scale_outs", pr.scale_outs},
                         {"scale_ins", pr.scale_ins},
                         {"learned_unit_capacity_per_s", pr.scaler->unit_capacity()},
                         {"forecast_buckets_learned", pr.scaler->forecast().learned_buckets()}};
    }
    if (s_.elastic.sleep.mode != policy::SleepMode::kOff) {
      Nanos slept = 0;
      for (int u : pr.units) {
        const UnitRec& r = rec_[static_cast<size_t>(u)];
        slept += r.slept + (r.state == State::kSleeping ? std::max<Nanos>(0, end - r.asleep_since) : 0);
      }
      j["sleep"] = {{"sleeps", pr.sleeps}, {"wakes", pr.wakes}, {"sleeping_unit_hours", NanosToSeconds(slept) / 3600}};
    }
    if (pd_ && (static_cast<int>(p) == s_.elastic.pd_ratio.prefill_index ||
                static_cast<int>(p) == s_.elastic.pd_ratio.decode_index)) {
      j["pd_ratio"] = {{"side", SideOf(s_.elastic.pd_ratio, p) == policy::PdSide::kPrefill ? "prefill" : "decode"},
                       {"switched_in", pr.switched_in},
                       {"switched_out", pr.switched_out}};
    }
    pools.push_back(std::move(j));
  }
  ordered_json actions = ordered_json::array();
  for (const ActionRec& a : actions_) {
    actions.push_back({{"t_s", NanosToSeconds(a.at)}, {"pool", a.pool}, {"action", a.what}, {"reason", a.reason}});
  }
  ordered_json j = {{"acting", act_}, {"interval_s", NanosToSeconds(s_.elastic.interval)}, {"gpu_hours", hours}};
  const SyntheticOptions& w = s_.workload.synthetic;
  if (w.burst_factor > 1) {
    // From the burst's start to the last tick a pool's latency signal was over its SLO.
    j["burst"] = {{"start_s", NanosToSeconds(w.burst_start)},
                  {"absorbed_after_s", burst_over_slo_ < 0 ? 0.0 : NanosToSeconds(burst_over_slo_ + s_.elastic.interval - w.burst_start)}};
  }
  j["weights"] = {{"plans", {{"storage", plans_[0]}, {"chain", plans_[1]}, {"tree", plans_[2]}}},
                  {"largest_load_units", largest_load_},
                  {"largest_load_s", NanosToSeconds(largest_load_time_)},
                  {"largest_load_from_storage_s", NanosToSeconds(largest_load_storage_time_)}};
  j["pools"] = std::move(pools);
  if (!restarts_.empty()) j["restarts"] = RestartReport();
  j["actions_total"] = actions_total_;
  j["actions"] = std::move(actions);
  return j;
}

}  // namespace myriad::sim
