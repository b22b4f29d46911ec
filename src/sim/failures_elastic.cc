// Elastic EP in the failure model: which lost node or GPU each pool's expert placement survives,
// the degraded unit serving with fewer ranks while its rebuild goes on, and the report.
#include <fmt/format.h>

#include <algorithm>

#include "perf/expert_load.h"
#include "policy/elastic_ep.h"
#include "policy/eplb.h"
#include "sim/failures.h"
#include "sim/moe_placement.h"

namespace myriad::sim {

namespace {

// The degraded unit's step-time factor: its expert-parallel part is paced by the hottest GPU,
// which now also carries the lost GPUs' experts' load on their surviving copies, for a batch
// shrunk with the ranks; attention and the dense layers per rank are unchanged.
double DegradedFactor(const perf::ExpertPopularity& pop, const policy::EplbPlacement& placed,
                      const perf::ExpertLoad& healthy, std::span<const int> dead, bool* survives) {
  auto v = policy::CheckElasticEp(placed, dead);
  *survives = v.ok() && v->survives;
  if (!*survives) return 1;
  auto load = perf::ExpertLoad::FromPlacement(pop, v->phy2log, placed.physical_experts, placed.num_gpus);
  if (!load.ok()) {
    *survives = false;
    return 1;
  }
  const double live = static_cast<double>(v->live_gpus) / placed.num_gpus;
  return std::max(1.0, load->mean_imbalance() / healthy.mean_imbalance() * live);
}

}  // namespace

void FailureModel::RecordLosses(ElasticPool& e, int gpus, const LossVerdict& verdict) {
  std::vector<int> dead;
  bool ok = false;
  for (int n = 0; n < gpus / e.gpus_per_node; ++n) {
    dead.clear();
    for (int g = 0; g < e.gpus_per_node; ++g) dead.push_back(n * e.gpus_per_node + g);
    e.node_slow.push_back(verdict(dead, &ok));
    e.node_ok.push_back(ok ? 1 : 0);
  }
  for (int g = 0; g < gpus; ++g) {
    dead.assign(1, g);
    e.gpu_slow.push_back(verdict(dead, &ok));
    e.gpu_ok.push_back(ok ? 1 : 0);
  }
}

absl::Status FailureModel::BuildElastic() {
  const ElasticEpConfig& c = cfg_.elastic_ep;
  if (!c.enabled) return absl::OkStatus();
  elastic_.resize(s_.pools.size());
  for (size_t p = 0; p < s_.pools.size(); ++p) {
    const PoolConfig& pool = s_.pools[p];
    const Unit* unit = nullptr;
    for (const auto& u : units_) {
      if (u->config().pool == static_cast<int>(p)) unit = u.get();
    }
    const perf::UnitLayout& lay = pool.layout;
    if (unit == nullptr || lay.ep < 2 || lay.redundant_experts < 1 || lay.ep % lay.nodes != 0) continue;
    if (!unit->model().model().is_moe()) continue;
    ElasticPool& e = elastic_[p];
    e.gpus_per_node = lay.ep / lay.nodes;
    if (pool.moe.enabled) {
      if (absl::Status st = BuildElasticMoe(p, e); !st.ok()) return st;
      continue;
    }
    e.applies = true;
    // The pool's popularity as the simulator's MoE stepping draws it, then EPLB (+ spreading).
    auto placed = PlacePoolExperts(s_, p);
    if (!placed.ok()) {
      return absl::InvalidArgumentError(fmt::format("faults.elastic_ep: {}", std::string(placed.status().message())));
    }
    e.swaps = placed->swaps;
    const perf::ExpertPopularity& pop = placed->popularity;
    const policy::EplbPlacement& placement = placed->placement;
    auto healthy = perf::ExpertLoad::FromPlacement(pop, placement.phy2log, placement.physical_experts, lay.ep);
    if (!healthy.ok()) return healthy.status();
    RecordLosses(e, lay.ep, [&](std::span<const int> dead, bool* ok) {
      return DegradedFactor(pop, placement, *healthy, dead, ok);
    });
  }
  return absl::OkStatus();
}

bool FailureModel::MaybeDegrade(int u, bool node_lost) {
  if (elastic_.empty()) return false;
  UnitState& st = state_[static_cast<size_t>(u)];
  if (st.fault < 0 || st.nodes_needed > 1) return false;
  const FaultRecord& f = faults_[static_cast<size_t>(st.fault)];
  switch (f.kind) {
    case FaultKind::kCrash:
    case FaultKind::kSoftwareCrash:
    case FaultKind::kHang:
    case FaultKind::kNic:
    case FaultKind::kNetwork:
      break;
    default:
      return false;  // a leaf switch takes several nodes; corruption and drains are not rank losses
  }
  const ElasticPool& e = elastic_[static_cast<size_t>(PoolOf(u))];
  if (!e.applies) return false;
  const int gpus = units_[static_cast<size_t>(u)]->model().layout().gpus();
  const auto ep = static_cast<int>(e.gpu_ok.size());
  const int g = std::clamp(f.rank, 0, gpus - 1) * ep / gpus;
  const auto i = static_cast<size_t>(node_lost ? g / e.gpus_per_node : g);
  bool ok = false;
  if (e.moe) {
    // On the placement the unit runs now (it may have been rebalanced since the start).
    std::vector<int> dead;
    if (node_lost) {
      for (int k = 0; k < e.gpus_per_node; ++k) dead.push_back(static_cast<int>(i) * e.gpus_per_node + k);
    } else {
      dead.push_back(g);
    }
    ok = PrepareDegradedMoe(u, dead, faults_[static_cast<size_t>(st.fault)]);
  } else {
    ok = node_lost ? e.node_ok[i] != 0 : e.gpu_ok[i] != 0;
  }
  if (!ok) {
    ++elastic_stopped_;
    return false;
  }
  st.elastic = true;
  // A `moe:` unit's own model paces its steps by its hottest live GPU: no blanket factor.
  st.elastic_slow = e.moe ? 1.0 : node_lost ? e.node_slow[i] : e.gpu_slow[i];
  st.elastic_live = 1.0 - (node_lost ? static_cast<double>(e.gpus_per_node) : 1.0) / ep;
  st.elastic_node = node_lost;
  const int fi = st.fault;
  // Re-placed copies are fetched once the communicator is rebuilt, before serving.
  const Nanos pause = faults_[static_cast<size_t>(fi)].replace_pause;
  events_.After(cfg_.elastic_ep.reconfigure + pause, [this, u, fi] { ResumeDegraded(u, fi); });
  return true;
}

void FailureModel::ResumeDegraded(int u, int fi) {
  UnitState& st = state_[static_cast<size_t>(u)];
  if (st.fault != fi || !st.rebuilding || !st.elastic || st.degraded) return;
  const Nanos now = events_.now();
  Unit& unit = *units_[static_cast<size_t>(u)];
  st.degraded = true;
  st.degraded_since = now;
  faults_[static_cast<size_t>(fi)].resumed = now;
  ++elastic_kept_;
  if (st.moe) unit.set_moe(st.moe.get());
  unit.set_capacity_fraction(st.elastic_live);
  ApplySlowdown(u);
  unit.Resume();
  unit.set_routable(true);
  if (!st.down.empty() && st.down.back().second < 0) st.down.back().second = now;
}

void FailureModel::EndDegraded(int u) {
  UnitState& st = state_[static_cast<size_t>(u)];
  if (st.degraded) st.degraded_total += events_.now() - st.degraded_since;
  st.degraded = st.elastic = false;
  st.elastic_slow = 1;
  units_[static_cast<size_t>(u)]->set_moe(nullptr);  // the pool's model and placement again
  st.moe.reset();
  st.moe_phy2log.clear();
  units_[static_cast<size_t>(u)]->set_capacity_fraction(1);
  ApplySlowdown(u);
}

void FailureModel::ApplySlowdown(int u) {
  const UnitState& st = state_[static_cast<size_t>(u)];
  units_[static_cast<size_t>(u)]->set_slowdown(st.slow * st.elastic_slow);
}

nlohmann::ordered_json FailureModel::ElasticReport(Nanos end) const {
  using nlohmann::ordered_json;
  if (elastic_.empty()) return {{"enabled", false}};
  Nanos degraded = 0;
  for (const UnitState& st : state_) {
    degraded += st.degraded_total + (st.degraded ? std::max<Nanos>(0, end - st.degraded_since) : 0);
  }
  ordered_json pools = ordered_json::object();
  for (size_t p = 0; p < elastic_.size(); ++p) {
    const ElasticPool& e = elastic_[p];
    if (!e.applies) {
      pools[s_.pools[p].name] = {{"applies", false}};
      continue;
    }
    const auto count = [](const std::vector<uint8_t>& v) { return std::count(v.begin(), v.end(), uint8_t{1}); };
    double worst = 1;
    for (size_t n = 0; n < e.node_ok.size(); ++n) {
      if (e.node_ok[n]) worst = std::max(worst, e.node_slow[n]);
    }
    // `moe:` pools: of the initial placement; the hottest live GPU's expert load (x GPUs).
    pools[s_.pools[p].name] = {{"applies", true},
                               {"stepped", e.moe ? "rank_by_rank" : "evenly_loaded"},
                               {"node_losses_survivable", fmt::format("{}/{}", count(e.node_ok), e.node_ok.size())},
                               {"gpu_losses_survivable", fmt::format("{}/{}", count(e.gpu_ok), e.gpu_ok.size())},
                               {"anti_affinity_swaps", e.swaps},
                               {e.moe ? "worst_degraded_expert_imbalance" : "worst_degraded_step_factor", worst}};
  }
  return {{"enabled", true},
          {"faults_ridden_out_degraded", elastic_kept_},
          {"faults_stopping_the_unit_orphaned_experts", elastic_stopped_},
          {"degraded_unit_hours", NanosToSeconds(degraded) / 3600.0},
          {"re_placements", {{"enabled", cfg_.elastic_ep.rebalance},
                             {"mode", cfg_.elastic_ep.rebalance_mode},
                             {"count", replacements_},
                             {"moved_gigabytes", replaced_bytes_ / 1e9},
                             {"pause_s", NanosToSeconds(replace_pause_)}}},
          {"pools", pools}};
}

}  // namespace myriad::sim
