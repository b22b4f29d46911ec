#include "sim/moe_placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "core/rng.h"
#include "perf/model.h"
#include "policy/elastic_ep.h"

namespace myriad::sim {

std::vector<double> EplbWeights(const perf::ExpertPopularity& pop) {
  std::vector<double> w(pop.p.begin(), pop.p.end());
  for (double& x : w) x *= 1e6;
  return w;
}

double NicFetchBytesPerS(const Scenario& s) { return s.hardware.nic_gbps / 8 * 1e9 * 0.8; }

perf::ExpertPopularity PoolPopularity(const Scenario& s, size_t pool) {
  auto m = perf::FindModel(s.model);
  if (!m.ok() || !m->is_moe()) return {};
  return perf::ExpertPopularity::Zipf(m->moe_layers(), m->experts, s.pools[pool].moe.expert_skew,
                                      Rng(s.seed).Fork(0x6d6f65 + pool).Next());
}

absl::StatusOr<PoolPlacement> PlacePoolExperts(const Scenario& s, size_t pool) {
  const PoolConfig& pc = s.pools[pool];
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(fmt::format("pools[{}] ({}): {}", pool, pc.name, why));
  };
  auto m = perf::FindModel(s.model);
  if (!m.ok()) return m.status();
  if (!m->is_moe()) return fail(fmt::format("{} is not a mixture-of-experts model", m->name));
  const perf::UnitLayout& lay = pc.layout;
  const ElasticEpConfig& el = s.faults.elastic_ep;
  const bool elastic = s.faults.enabled && el.enabled;
  PoolPlacement out;
  out.popularity = PoolPopularity(s, pool);
  out.weights = EplbWeights(out.popularity);
  const int physical = m->experts + lay.redundant_experts;
  out.min_copies = elastic ? std::clamp(physical / m->experts, 1, el.min_copies) : 1;
  auto placed = policy::RebalanceExperts(out.weights, out.popularity.layers, out.popularity.experts, physical,
                                         m->expert_groups, lay.nodes, lay.ep, policy::EplbTies::kStable,
                                         out.min_copies);
  if (!placed.ok()) return fail(std::string(placed.status().message()));
  out.placement = std::move(*placed);
  if (elastic && el.spread && lay.ep % lay.nodes == 0) {
    auto swaps = policy::SpreadReplicas(out.weights, lay.ep / lay.nodes, &out.placement);
    if (!swaps.ok()) return fail(std::string(swaps.status().message()));
    out.swaps = *swaps;
  }
  return out;
}

}  // namespace myriad::sim
