// A routing decision over 1,000 candidate units (issue target: at most 20 us p99).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/rng.h"
#include "perf/step_model.h"
#include "policy/router.h"

namespace myriad::policy {
namespace {

void BM_RouteKvAware1000(benchmark::State& state) {
  const bool spread = state.range(0) != 0;
  auto model = perf::StepModel::Create(*perf::FindGpu("H200"), *perf::FindModel("DeepSeek-V3"),
                                       {.tp = 1, .dp = 32, .ep = 32, .nodes = 4}, perf::Fabric{});
  PrefillCost cost(*model, 16384);
  PrefixIndex index;
  Rng rng(1);
  constexpr int kUnits = 1000, kPrompts = 512, kBlocks = 16;
  // 512 distinct prompts of 16 blocks, each held (in part) by a few units.
  std::vector<std::vector<BlockKey>> prompts(kPrompts, std::vector<BlockKey>(kBlocks));
  for (int p = 0; p < kPrompts; ++p) {
    BlockKey parent = kRootBlockKey;
    for (int b = 0; b < kBlocks; ++b) prompts[p][b] = parent = HashContentBlock(parent, static_cast<uint64_t>(p * 64 + b));
    for (int h = 0; h < 3; ++h) {
      const auto held = 1 + rng.Below(kBlocks);
      index.Stored(static_cast<HolderId>(rng.Below(kUnits)), 0, std::span<const BlockKey>(prompts[p]).first(held), 0);
    }
  }
  std::vector<Candidate> units(kUnits), decode(200);
  for (int i = 0; i < kUnits; ++i) {
    units[i].holder = static_cast<HolderId>(i);
    units[i].cost = &cost;
    units[i].load.queued_prefill_tokens = static_cast<int64_t>(rng.Below(200000));
  }
  for (auto& d : decode) d.load.running = static_cast<int32_t>(rng.Below(10000));
  Router router(RouterOptions{.policy = RoutingPolicy::kKvAware, .spread_hot_prefixes = spread, .block_tokens = 512}, &index);
  size_t i = 0;
  std::vector<double> us;
  us.reserve(1 << 20);
  for (auto _ : state) {
    const auto& p = prompts[i++ % kPrompts];
    RouteRequest req{.blocks = p, .input_tokens = kBlocks * 512, .output_tokens = 500, .now = 0};
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(router.Route(req, units, decode, rng));
    if (us.size() < us.capacity()) {
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  state.SetItemsProcessed(state.iterations());
  // Per-decision latency percentiles (each timed on its own with steady_clock).
  std::sort(us.begin(), us.end());
  if (!us.empty()) {
    state.counters["p50_us"] = us[us.size() / 2];
    state.counters["p99_us"] = us[us.size() * 99 / 100];
  }
}
BENCHMARK(BM_RouteKvAware1000)->Arg(0)->Arg(1);

}  // namespace
}  // namespace myriad::policy
