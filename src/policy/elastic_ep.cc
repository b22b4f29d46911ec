#include "policy/elastic_ep.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "policy/eplb_incremental.h"

namespace myriad::policy {

absl::StatusOr<ElasticVerdict> CheckElasticEp(const EplbPlacement& placement, std::span<const int> failed_gpus) {
  const int gpus = placement.num_gpus;
  const int per_gpu = placement.experts_per_gpu();
  if (gpus < 1 || per_gpu < 1 ||
      placement.phy2log.size() != static_cast<size_t>(placement.layers) * placement.physical_experts) {
    return absl::InvalidArgumentError("elastic EP: the placement is empty or inconsistent");
  }
  std::vector<bool> dead(static_cast<size_t>(gpus), false);
  for (int g : failed_gpus) {
    if (g < 0 || g >= gpus) {
      return absl::InvalidArgumentError(fmt::format("elastic EP: failed GPU {} is not in [0, {})", g, gpus));
    }
    dead[static_cast<size_t>(g)] = true;
  }
  ElasticVerdict v;
  v.phy2log = placement.phy2log;
  for (bool d : dead) v.live_gpus += d ? 0 : 1;
  std::vector<int> live_copies(static_cast<size_t>(placement.logical_experts));
  for (int l = 0; l < placement.layers; ++l) {
    std::fill(live_copies.begin(), live_copies.end(), 0);
    for (int p = 0; p < placement.physical_experts; ++p) {
      int32_t& e = v.phy2log[static_cast<size_t>(l) * placement.physical_experts + p];
      if (dead[static_cast<size_t>(p / per_gpu)]) {
        e = -1;
      } else if (e >= 0 && e < placement.logical_experts) {
        ++live_copies[static_cast<size_t>(e)];
      }
    }
    for (int e = 0; e < placement.logical_experts; ++e) {
      if (live_copies[static_cast<size_t>(e)] == 0) v.orphaned.push_back(int64_t{l} * placement.logical_experts + e);
    }
  }
  v.survives = v.orphaned.empty() && v.live_gpus > 0;
  return v;
}


absl::StatusOr<int> SpreadReplicas(std::span<const double> weight, int gpus_per_domain,
                                   EplbPlacement* placement) {
  EplbPlacement& p = *placement;
  const int per_gpu = p.experts_per_gpu();
  if (p.num_gpus < 1 || per_gpu < 1 || p.physical_experts != per_gpu * p.num_gpus ||
      p.phy2log.size() != static_cast<size_t>(p.layers) * static_cast<size_t>(p.physical_experts)) {
    return absl::InvalidArgumentError("spread replicas: the placement is empty or inconsistent");
  }
  if (gpus_per_domain < 1 || p.num_gpus % gpus_per_domain != 0) {
    return absl::InvalidArgumentError(fmt::format(
        "spread replicas: gpus_per_domain {} must be positive and divide the {} GPUs", gpus_per_domain, p.num_gpus));
  }
  const auto logical = static_cast<size_t>(p.logical_experts);
  if (weight.size() != static_cast<size_t>(p.layers) * logical) {
    return absl::InvalidArgumentError(fmt::format("spread replicas: {} loads for {} layers x {} experts",
                                                  weight.size(), p.layers, p.logical_experts));
  }
  const int domains = p.num_gpus / gpus_per_domain;
  const auto physical = static_cast<size_t>(p.physical_experts);
  const auto domain_of = [&](size_t q) { return static_cast<int>(q) / per_gpu / gpus_per_domain; };
  std::vector<int> count(logical * static_cast<size_t>(domains));  // copies of e in domain d
  std::vector<int> copies(logical);
  int swaps = 0;
  for (size_t l = 0; l < static_cast<size_t>(p.layers); ++l) {
    int32_t* row = &p.phy2log[l * physical];
    std::fill(count.begin(), count.end(), 0);
    std::fill(copies.begin(), copies.end(), 0);
    for (size_t q = 0; q < physical; ++q) {
      if (row[q] < 0 || static_cast<size_t>(row[q]) >= logical) {
        return absl::InvalidArgumentError(
            fmt::format("spread replicas: layer {} slot {} holds expert {}", l, q, row[q]));
      }
      ++count[static_cast<size_t>(row[q]) * domains + static_cast<size_t>(domain_of(q))];
      ++copies[static_cast<size_t>(row[q])];
    }
    const auto load = [&](int32_t e) { return weight[l * logical + static_cast<size_t>(e)] / copies[static_cast<size_t>(e)]; };
    const auto at = [&](int32_t e, int d) -> int& { return count[static_cast<size_t>(e) * domains + static_cast<size_t>(d)]; };
    // An expert's fair share of one domain: its copies spread as evenly as the domains allow.
    const auto cap = [&](int32_t e) { return (copies[static_cast<size_t>(e)] + domains - 1) / domains; };
    for (size_t q = 0; q < physical; ++q) {
      const int32_t e = row[q];
      const int d = domain_of(q);
      if (at(e, d) <= cap(e)) continue;
      size_t best = physical;
      double best_gap = std::numeric_limits<double>::infinity();
      for (size_t r = 0; r < physical; ++r) {
        const int32_t f = row[r];
        const int d2 = domain_of(r);
        if (d2 == d || f == e || at(e, d2) >= cap(e) || at(f, d) >= cap(f)) continue;
        const double gap = std::fabs(load(e) - load(f));
        if (gap < best_gap) best_gap = gap, best = r;
      }
      if (best == physical) continue;
      const int32_t f = row[best];
      const int d2 = domain_of(best);
      --at(e, d), ++at(e, d2), --at(f, d2), ++at(f, d);
      row[q] = f;
      row[best] = e;
      ++swaps;
    }
  }
  RebuildLog2Phy(&p);
  return swaps;
}

absl::StatusOr<ElasticReplacement> ReplaceOnLiveGpus(std::span<const double> weight, const EplbPlacement& current,
                                                     std::span<const int> failed_gpus, int num_groups,
                                                     double expert_bytes, double fetch_bytes_per_s, ReplaceMode mode,
                                                     double tolerance) {
  auto verdict = CheckElasticEp(current, failed_gpus);
  if (!verdict.ok()) return verdict.status();
  const int per_gpu = current.experts_per_gpu();
  const int gpus = current.num_gpus;
  std::vector<int> live;
  std::vector<bool> dead(static_cast<size_t>(gpus), false);
  for (int g : failed_gpus) dead[static_cast<size_t>(g)] = true;
  for (int g = 0; g < gpus; ++g) {
    if (!dead[static_cast<size_t>(g)]) live.push_back(g);
  }
  if (live.empty()) return absl::InvalidArgumentError("elastic EP re-placement: no live GPU");
  if (fetch_bytes_per_s <= 0) return absl::InvalidArgumentError("elastic EP re-placement: fetch_bytes_per_s must be positive");
  const int n = static_cast<int>(live.size());
  if (int64_t{n} * per_gpu < current.logical_experts) {
    return absl::InvalidArgumentError(fmt::format("elastic EP re-placement: {} live GPUs of {} slots cannot hold {} experts",
                                                  n, per_gpu, current.logical_experts));
  }
  // One node: the global policy, with nothing tying an expert's copies to a node.
  auto fresh = RebalanceExperts(weight, current.layers, current.logical_experts, n * per_gpu, num_groups, 1, n);
  if (!fresh.ok()) return fresh.status();
  ElasticReplacement out;
  EplbPlacement& p = out.placement;
  p = current;
  std::fill(p.phy2log.begin(), p.phy2log.end(), -1);
  std::vector<int64_t> incoming(static_cast<size_t>(n), 0);
  const auto physical = static_cast<size_t>(current.physical_experts);
  const auto un = static_cast<size_t>(n), per = static_cast<size_t>(per_gpu);
  // EPLB's GPUs are interchangeable packs: each layer's pack goes to the live GPU already
  // holding most of its experts (greedy, largest overlap first), which moves far fewer weights.
  std::vector<int> overlap(un * un);
  std::vector<size_t> gpu_of(un);  // pack -> index into `live`
  std::vector<bool> pack_done(un), gpu_done(un);
  const auto held = [&](size_t l, size_t g, int32_t e) {
    const int32_t* before = &current.phy2log[l * physical + g * per];
    return std::find(before, before + per_gpu, e) != before + per_gpu;
  };
  for (size_t l = 0; l < static_cast<size_t>(current.layers); ++l) {
    for (size_t i = 0; i < un; ++i) {
      for (size_t j = 0; j < un; ++j) {
        int c = 0;
        for (size_t s = 0; s < per; ++s) {
          c += held(l, static_cast<size_t>(live[j]), fresh->Phy2Log(static_cast<int>(l), static_cast<int>(i * per + s))) ? 1 : 0;
        }
        overlap[i * un + j] = c;
      }
    }
    std::fill(pack_done.begin(), pack_done.end(), false);
    std::fill(gpu_done.begin(), gpu_done.end(), false);
    for (size_t k = 0; k < un; ++k) {
      size_t bi = un, bj = un;
      for (size_t i = 0; i < un; ++i) {
        for (size_t j = 0; j < un && !pack_done[i]; ++j) {
          if (!gpu_done[j] && (bi == un || overlap[i * un + j] > overlap[bi * un + bj])) bi = i, bj = j;
        }
      }
      pack_done[bi] = gpu_done[bj] = true;
      gpu_of[bi] = bj;
    }
    for (size_t i = 0; i < un; ++i) {
      const auto g = static_cast<size_t>(live[gpu_of[i]]);
      for (size_t s = 0; s < per; ++s) {
        const int32_t e = fresh->Phy2Log(static_cast<int>(l), static_cast<int>(i * per + s));
        p.phy2log[l * physical + g * per + s] = e;
        if (!held(l, g, e)) {
          ++out.moved_slots;
          ++incoming[gpu_of[i]];
        }
      }
    }
  }
  RebuildLog2Phy(&p);
  if (mode == ReplaceMode::kIncremental) {
    // The fresh placement is the incremental one's reference: what its balance must come near.
    auto inc = ReplaceIncrementally(weight, current, failed_gpus, p, IncrementalOptions{.tolerance = tolerance});
    if (!inc.ok()) return inc.status();
    p = std::move(inc->placement);
    out.moved_slots = inc->moved_slots;
    incoming.clear();
    for (int g : live) incoming.push_back(inc->incoming[static_cast<size_t>(g)]);
  }
  out.bytes = static_cast<double>(out.moved_slots) * expert_bytes;
  const int64_t worst = *std::max_element(incoming.begin(), incoming.end());
  out.pause = SecondsToNanos(static_cast<double>(worst) * expert_bytes / fetch_bytes_per_s);
  return out;
}

}  // namespace myriad::policy
