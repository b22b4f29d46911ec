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
  r.imbalance_fresh = MeanImbalance(*next);
  if (options_.mode == ReplaceMode::kIncremental) {
    auto inc = ReplaceIncrementally(ema_, placement_, {}, *next,
                                    IncrementalOptions{.tolerance = options_.tolerance,
                                                       .min_copies = options_.min_copies,
                                                       .gpus_per_domain = options_.spread_gpus_per_domain});
    if (!inc.ok()) return std::nullopt;
    *next = std::move(inc->placement);
  }
  r.imbalance_after = options_.mode == ReplaceMode::kIncremental ? MeanImbalance(*next) : r.imbalance_fresh;
  if (r.imbalance_before - r.imbalance_after < options_.min_gain) return std::nullopt;
  // A GPU fetches the experts it gains; one it already held (in any of its slots) stays.
  std::vector<int64_t> incoming;
  r.moved_slots = CountFetchedSlots(placement_, *next, &incoming);
  r.bytes = static_cast<double>(r.moved_slots) * options_.expert_bytes;
  const int64_t worst = incoming.empty() ? 0 : *std::max_element(incoming.begin(), incoming.end());
  r.pause = SecondsToNanos(static_cast<double>(worst) * options_.expert_bytes / options_.fetch_bytes_per_s);
  placement_ = *next;
  r.placement = std::move(*next);
  return r;
}

}  // namespace myriad::policy
