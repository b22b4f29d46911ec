// The expert-parallel load balancer at the sizes it must handle: run build/release/myriad_bench
// --benchmark_filter=Eplb. Targets: DeepSeek-V3's 61 layers x 256 experts -> 288 replicas on 32
// GPUs within 1 ms; 1,024 experts on 1,024 GPUs within 20 ms. BM_EplbIncremental: the incremental
// re-placement (policy::ReplaceIncrementally) at the same sizes after a popularity drift.
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "policy/eplb.h"
#include "policy/eplb_incremental.h"

namespace myriad {
namespace {

// Skewed loads, as token counts per expert look in practice.
std::vector<double> Loads(int layers, int experts, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> w(static_cast<size_t>(layers) * static_cast<size_t>(experts));
  for (double& x : w) x = std::floor(rng.LogNormal(8, 1));
  return w;
}

// A placement problem from the first six benchmark arguments.
struct Shape {
  int layers, logical, replicas, groups, nodes, gpus;
};
Shape ShapeOf(const benchmark::State& state) {
  const auto arg = [&](int i) { return static_cast<int>(state.range(i)); };
  return {arg(0), arg(1), arg(2), arg(3), arg(4), arg(5)};
}

// args: layers, logical experts, replicas, groups, nodes, GPUs.
void BM_EplbRebalance(benchmark::State& state) {
  const auto [layers, logical, replicas, groups, nodes, gpus] = ShapeOf(state);
  const std::vector<double> w = Loads(layers, logical, 1);
  for (auto _ : state) {
    auto p = policy::RebalanceExperts(w, layers, logical, replicas, groups, nodes, gpus);
    if (!p.ok()) {
      state.SkipWithError("invalid configuration");
      break;
    }
    benchmark::DoNotOptimize(p->phy2log.data());
  }
  state.SetItemsProcessed(state.iterations() * layers);
}
BENCHMARK(BM_EplbRebalance)
    ->ArgNames({"layers", "experts", "replicas", "groups", "nodes", "gpus"})
    // DeepSeek-V3 on 32 GPUs (4 nodes), hierarchical: target 1 ms.
    ->Args({61, 256, 288, 8, 4, 32})
    // 1,024 experts on 1,024 GPUs (128 nodes); 64 groups do not divide among 128 nodes, so this
    // is the global policy: target 20 ms.
    ->Args({61, 1024, 2048, 64, 128, 1024})
    // The same, hierarchical (one group per node).
    ->Args({61, 1024, 2048, 128, 128, 1024})
    // The same, hierarchical with two groups per node (64 nodes of 16 GPUs).
    ->Args({61, 1024, 2048, 128, 64, 1024})
    ->Unit(benchmark::kMicrosecond);

// Popularity drift as the simulator makes it: `percent`% of each layer's experts trade loads.
std::vector<double> Drifted(std::vector<double> w, int experts, int percent, uint64_t seed) {
  Rng rng(seed);
  const size_t layers = w.size() / static_cast<size_t>(experts);
  const int trades = experts * percent / 200;
  for (size_t l = 0; l < layers; ++l) {
    for (int t = 0; t < trades; ++t) {
      const size_t a = rng.Below(static_cast<uint64_t>(experts)), b = rng.Below(static_cast<uint64_t>(experts));
      std::swap(w[l * static_cast<size_t>(experts) + a], w[l * static_cast<size_t>(experts) + b]);
    }
  }
  return w;
}

// args: layers, logical experts, replicas, groups, nodes, GPUs, drift (% of experts), and
// whether the timing includes the fresh reference placement (1) or only the incremental search
// given it (0). Counters: the slots fetched incrementally and by moving to the fresh placement,
// and both mean max/mean.
void BM_EplbIncremental(benchmark::State& state) {
  const auto [layers, logical, replicas, groups, nodes, gpus] = ShapeOf(state);
  const auto drift = static_cast<int>(state.range(6));
  const bool with_reference = state.range(7) != 0;
  const std::vector<double> w0 = Loads(layers, logical, 1);
  const std::vector<double> w1 = Drifted(w0, logical, drift, 2);
  auto current = policy::RebalanceExperts(w0, layers, logical, replicas, groups, nodes, gpus);
  auto fresh = policy::RebalanceExperts(w1, layers, logical, replicas, groups, nodes, gpus);
  if (!current.ok() || !fresh.ok()) {
    state.SkipWithError("invalid configuration");
    return;
  }
  int64_t moved = 0;
  policy::EplbPlacement last;
  for (auto _ : state) {
    if (with_reference) {
      fresh = policy::RebalanceExperts(w1, layers, logical, replicas, groups, nodes, gpus);
    }
    auto inc = policy::ReplaceIncrementally(w1, *current, {}, *fresh);
    if (!inc.ok()) {
      state.SkipWithError("incremental re-placement failed");
      break;
    }
    moved = inc->moved_slots;
    last = std::move(inc->placement);
    benchmark::DoNotOptimize(last.phy2log.data());
  }
  state.counters["moved_slots"] = static_cast<double>(moved);
  state.counters["full_moved_slots"] = static_cast<double>(policy::CountFetchedSlots(*current, *fresh));
  auto mi = policy::MeasureImbalance(w1, last);
  auto mf = policy::MeasureImbalance(w1, *fresh);
  if (mi.ok() && mf.ok()) {
    state.counters["imbalance"] = mi->mean_after;
    state.counters["fresh_imbalance"] = mf->mean_after;
  }
  state.SetItemsProcessed(state.iterations() * layers);
}
BENCHMARK(BM_EplbIncremental)
    ->ArgNames({"layers", "experts", "replicas", "groups", "nodes", "gpus", "drift", "with_ref"})
    // DeepSeek-V3 on 32 GPUs after 10 minutes of the simulator's drift (2% a minute).
    ->Args({61, 256, 288, 8, 4, 32, 20, 0})
    ->Args({61, 256, 288, 8, 4, 32, 20, 1})
    ->Args({61, 256, 288, 8, 4, 32, 5, 0})
    // 1,024 experts on 1,024 GPUs.
    ->Args({61, 1024, 2048, 64, 128, 1024, 20, 0})
    ->Args({61, 1024, 2048, 64, 128, 1024, 20, 1})
    ->Args({61, 1024, 2048, 64, 128, 1024, 5, 0})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace myriad
