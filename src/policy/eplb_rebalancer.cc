#include "policy/eplb_rebalancer.h"

#include <fmt/format.h>

#include <algorithm>

#include "policy/elastic_ep.h"

namespace myriad::policy {

absl::StatusOr<EplbRebalancer> EplbRebalancer::Create(EplbLayout layout, RebalancerOptions options,
                                                       std::span<const double> initial_loads) {
  if (initial_loads.size() != static_cast<size_t>(layout.layers) * layout.logical_experts) {
    return absl::InvalidArgumentError(fmt::format("rebalancer: expected {} x {} loads, got {}", layout.layers,
                                                  layout.logical_experts, initial_loads.size()));
  }
  if (!(options.ema_weight > 0 && options.ema_weight <= 1)) {
    return absl::InvalidArgumentError("rebalancer: ema_weight must be in (0, 1]");
  }
  EplbRebalancer r(layout, options);
  r.ema_.assign(initial_loads.begin(), initial_loads.end());
  auto p = r.Place();
  if (!p.ok()) return p.status();
  r.placement_ = std::move(*p);
  return r;
}

absl::StatusOr<EplbPlacement> EplbRebalancer::Place() const {
  auto p = RebalanceExperts(ema_, layout_.layers, layout_.logical_experts, layout_.physical_experts, layout_.groups,
                            layout_.nodes, layout_.gpus, EplbTies::kStable, options_.min_copies);
  if (!p.ok() || options_.spread_gpus_per_domain <= 0) return p;
  auto swaps = SpreadReplicas(ema_, options_.spread_gpus_per_domain, &*p);
  if (!swaps.ok()) return swaps.status();
  return p;
}

void EplbRebalancer::Observe(std::span<const double> loads) {
  if (loads.size() != ema_.size()) return;
  const double w = options_.ema_weight;
  for (size_t i = 0; i < ema_.size(); ++i) ema_[i] = (1 - w) * ema_[i] + w * loads[i];
}

double EplbRebalancer::MeanImbalance(const EplbPlacement& p) const {
  auto m = MeasureImbalance(ema_, p);
  return m.ok() ? m->mean_after : 0.0;
}

std::optional<Rebalance> EplbRebalancer::MaybeRebalance(Nanos now) {
  if (now - last_ < options_.interval) return std::nullopt;
  last_ = now;
  auto next = Place();
  if (!next.ok()) return std::nullopt;
  Rebalance r;
  r.imbalance_before = MeanImbalance(placement_);
  r.imbalance_after = MeanImbalance(*next);
  if (r.imbalance_before - r.imbalance_after < options_.min_gain) return std::nullopt;
  // A GPU fetches the experts it gains; one it already held (in any of its slots) stays.
  const int per_gpu = next->experts_per_gpu();
  std::vector<int64_t> incoming(static_cast<size_t>(layout_.gpus), 0);
  for (int l = 0; l < layout_.layers; ++l) {
    for (int g = 0; g < layout_.gpus; ++g) {
      for (int s = 0; s < per_gpu; ++s) {
        const int32_t e = next->Phy2Log(l, g * per_gpu + s);
        bool held = false;
        for (int t = 0; t < per_gpu && !held; ++t) held = placement_.Phy2Log(l, g * per_gpu + t) == e;
        if (!held) {
          ++r.moved_slots;
          ++incoming[static_cast<size_t>(g)];
        }
      }
    }
  }
  r.bytes = static_cast<double>(r.moved_slots) * options_.expert_bytes;
  const int64_t worst = *std::max_element(incoming.begin(), incoming.end());
  r.pause = SecondsToNanos(static_cast<double>(worst) * options_.expert_bytes / options_.fetch_bytes_per_s);
  placement_ = *next;
  r.placement = std::move(*next);
  return r;
}

}  // namespace myriad::policy
