// The cluster's MoE units: each pool's rank-by-rank step model, the experts' loads the units
// step with, their drift and the EPLB rebalancing that follows it.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "perf/hardware.h"
#include "perf/model.h"
#include "policy/eplb.h"
#include "sim/cluster.h"
#include "sim/moe_placement.h"

namespace myriad::sim {

absl::StatusOr<std::unique_ptr<perf::MoeStepModel>> Cluster::BuildMoe(size_t p) {
  const PoolConfig& pool = scenario_.pools[p];
  if (!pool.moe.enabled) return std::unique_ptr<perf::MoeStepModel>();
  const perf::StepModel& step = *pool_models_[p];
  const perf::ModelSpec& m = step.model();
  const perf::UnitLayout& lay = pool.layout;
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(fmt::format("pools[{}] ({}).moe: {}", p, pool.name, why));
  };
  if (!m.is_moe()) return fail(fmt::format("{} is not a mixture-of-experts model", m.name));
  if (lay.tp != 1 || lay.ep != lay.dp) return fail("rank-by-rank stepping needs tp = 1 and ep = dp");
  const auto pop = PoolPopularity(scenario_, p);
  perf::ExpertLoad load = perf::ExpertLoad::Balanced(m.moe_layers(), lay.ep);
  auto dyn = std::make_unique<MoeDynamics>();
  dyn->pool = p;
  dyn->popularity = pop;
  dyn->physical = m.experts + lay.redundant_experts;
  dyn->rng = Rng(scenario_.seed).Fork(0x6472696674 + p);  // "drift"
  if (pool.moe.placement == "contiguous") {
    load = perf::ExpertLoad::Contiguous(pop, lay.ep);
  } else if (pool.moe.placement == "eplb") {
    // With elastic EP on, min_copies copies of every expert spread over the nodes.
    auto placed = PlacePoolExperts(scenario_, p);
    if (!placed.ok()) return placed.status();
    auto l = perf::ExpertLoad::FromPlacement(pop, placed->placement.phy2log, dyn->physical, lay.ep);
    if (!l.ok()) return fail(std::string(l.status().message()));
    load = std::move(*l);
    dyn->placement = std::move(placed->placement);
    dyn->swaps = placed->swaps;
    if (pool.moe.rebalance_interval > 0) {
      const ElasticEpConfig& el = scenario_.faults.elastic_ep;
      const bool spread = scenario_.faults.enabled && el.enabled && el.spread && lay.ep % lay.nodes == 0;
      auto r = policy::EplbRebalancer::Create(
          policy::EplbLayout{.layers = pop.layers, .logical_experts = pop.experts, .physical_experts = dyn->physical,
                             .groups = m.expert_groups, .nodes = lay.nodes, .gpus = lay.ep},
          policy::RebalancerOptions{.interval = pool.moe.rebalance_interval,
                                    .expert_bytes = m.ExpertParams() * m.weight_bytes,
                                    .fetch_bytes_per_s = NicFetchBytesPerS(scenario_),
                                    .min_copies = placed->min_copies,
                                    .spread_gpus_per_domain = spread ? lay.ep / lay.nodes : 0,
                                    .mode = *policy::ParseReplaceMode(pool.moe.rebalance_mode),
                                    .tolerance = pool.moe.rebalance_tolerance},
          placed->weights);
      if (!r.ok()) return fail(std::string(r.status().message()));
      dyn->rebalancer = std::make_unique<policy::EplbRebalancer>(std::move(*r));
    }
  } else if (pool.moe.rebalance_interval > 0) {
    return fail("rebalance_interval needs placement: eplb");
  }
  moe_dynamics_.push_back(std::move(dyn));
  return std::make_unique<perf::MoeStepModel>(
      step, std::move(load),
      perf::MoeOptions{.dp_padding = pool.moe.dp_padding, .two_batch_overlap = pool.moe.two_batch_overlap,
                       .spine_oversubscription = scenario_.hardware.spine_oversubscription});
}

void Cluster::RefreshLoad(MoeDynamics& d) {
  const PoolConfig& pool = scenario_.pools[d.pool];
  perf::MoeStepModel& model = *pool_moe_[d.pool];
  if (pool.moe.placement == "contiguous") {
    model.set_load(perf::ExpertLoad::Contiguous(d.popularity, pool.layout.ep));
  } else if (!d.placement.phy2log.empty()) {
    auto l = perf::ExpertLoad::FromPlacement(d.popularity, d.placement.phy2log, d.physical, pool.layout.ep);
    if (l.ok()) model.set_load(std::move(*l));
  }
  if (failures_) failures_->MoeLoadChanged(static_cast<int>(d.pool));
}

MoePoolView Cluster::MoePool(int pool) const {
  MoePoolView v;
  const auto p = static_cast<size_t>(pool);
  if (p >= pool_moe_.size() || !pool_moe_[p]) return v;
  v.model = pool_moe_[p].get();
  for (const auto& d : moe_dynamics_) {
    if (d->pool != p) continue;
    v.popularity = &d->popularity;
    if (!d->placement.phy2log.empty()) v.placement = &d->placement;
    v.swaps = d->swaps;
  }
  return v;
}

void Cluster::DriftExperts(MoeDynamics& d) {
  // Some experts trade places in the popularity order: yesterday's hot expert cools down.
  perf::ExpertPopularity& pop = d.popularity;
  const auto swaps = static_cast<uint64_t>(scenario_.pools[d.pool].moe.drift_fraction * pop.experts / 2);
  for (int l = 0; l < pop.layers; ++l) {
    double* row = pop.p.data() + static_cast<size_t>(l) * pop.experts;
    for (uint64_t i = 0; i < swaps; ++i) {
      std::swap(row[d.rng.Below(static_cast<uint64_t>(pop.experts))], row[d.rng.Below(static_cast<uint64_t>(pop.experts))]);
    }
  }
  ++d.drifts;
  if (d.rebalancer) {
    d.rebalancer->Observe(EplbWeights(pop));
  }
  RefreshLoad(d);
}

void Cluster::RebalanceExperts(MoeDynamics& d) {
  auto r = d.rebalancer->MaybeRebalance(events_.now());
  if (!r) return;
  d.placement = std::move(r->placement);
  ++d.rebalances;
  d.moved_slots += r->moved_slots;
  d.moved_bytes += r->bytes;
  d.pause += r->pause;
  d.imbalance_after_sum += r->imbalance_after;
  d.imbalance_fresh_sum += r->imbalance_fresh;
  RefreshLoad(d);
  for (const auto& u : units_) {
    if (u->config().pool == static_cast<int>(d.pool)) u->PauseUntil(events_.now() + r->pause);
  }
}

}  // namespace myriad::sim
