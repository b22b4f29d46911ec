// The expert-parallel load balancer at the sizes it must handle: run build/release/myriad_bench
// --benchmark_filter=Eplb. Targets: DeepSeek-V3's 61 layers x 256 experts -> 288 replicas on 32
// GPUs within 1 ms; 1,024 experts on 1,024 GPUs within 20 ms.
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "policy/eplb.h"

namespace myriad {
namespace {

// Skewed loads, as token counts per expert look in practice.
std::vector<double> Loads(int layers, int experts, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> w(static_cast<size_t>(layers) * static_cast<size_t>(experts));
  for (double& x : w) x = std::floor(rng.LogNormal(8, 1));
  return w;
}

// args: layers, logical experts, replicas, groups, nodes, GPUs.
void BM_EplbRebalance(benchmark::State& state) {
  const auto layers = static_cast<int>(state.range(0));
  const auto logical = static_cast<int>(state.range(1));
  const auto replicas = static_cast<int>(state.range(2));
  const auto groups = static_cast<int>(state.range(3));
  const auto nodes = static_cast<int>(state.range(4));
  const auto gpus = static_cast<int>(state.range(5));
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

}  // namespace
}  // namespace myriad
