// Micro-benchmarks of the simulator's hot paths: run build/release/myriad_bench.
#include <benchmark/benchmark.h>

#include <vector>

#include "core/rng.h"
#include "perf/moe_step.h"
#include "perf/step_model.h"
#include "sim/event_queue.h"
#include "policy/prefix_cache.h"
#include "sim/synthetic_workload.h"

namespace myriad {
namespace {

// A prompt of 10 blocks, the first 4 shared among 100 prefixes, into a cache of 1M blocks.
void BM_PrefixCacheMatchInsert(benchmark::State& state) {
  policy::PrefixCache cache;
  Rng rng(1);
  std::vector<BlockKey> blocks(10);
  uint64_t unique = 1'000'000;
  for (auto _ : state) {
    const uint64_t prefix = rng.Below(100);
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = i < 4 ? prefix * 16 + i : ++unique;
    benchmark::DoNotOptimize(cache.MatchAndTouch(blocks));
    cache.Insert(blocks, 1'000'000);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PrefixCacheMatchInsert);

void BM_DecodeStepTime(benchmark::State& state) {
  auto m = perf::StepModel::Create(*perf::FindGpu("H200"), *perf::FindModel("DeepSeek-V3"),
                                   {.tp = 1, .dp = 144, .ep = 144, .nodes = 18}, perf::Fabric{});
  perf::BatchShape b{.decode_seqs = 144 * 100, .decode_context = 144 * 100 * 5000};
  for (auto _ : state) {
    ++b.decode_context;
    benchmark::DoNotOptimize(m->StepTime(b));
  }
}
BENCHMARK(BM_DecodeStepTime);

// The target: a decode step of an EP320 unit evaluated in at most 50 us.
void BM_MoeDecodeStepEp320(benchmark::State& state) {
  auto unit = perf::StepModel::Create(*perf::FindGpu("H800"), *perf::FindModel("DeepSeek-V3"),
                                      {.tp = 1, .dp = 320, .ep = 320, .nodes = 40, .redundant_experts = 64},
                                      perf::Fabric{});
  const auto pop = perf::ExpertPopularity::Zipf(58, 256, 0.5, 1);
  perf::MoeStepModel model(*unit, perf::ExpertLoad::Contiguous(pop, 320), {.two_batch_overlap = true});
  std::vector<perf::BatchShape> ranks(320);
  Rng rng(3);
  for (auto& r : ranks) {
    r.decode_seqs = 64 + static_cast<int64_t>(rng.Below(64));
    r.decode_context = r.decode_seqs * 4000;
  }
  for (auto _ : state) {
    ++ranks[0].decode_context;
    benchmark::DoNotOptimize(model.Step(ranks));
  }
}
BENCHMARK(BM_MoeDecodeStepEp320);

void BM_EventQueue(benchmark::State& state) {
  sim::EventQueue q;
  Rng rng(2);
  int64_t sink = 0;
  for (int i = 0; i < 10000; ++i) q.After(static_cast<Nanos>(rng.Below(1'000'000)), [&sink] { ++sink; });
  for (auto _ : state) {
    q.After(static_cast<Nanos>(rng.Below(1'000'000)), [&sink] { ++sink; });
    q.Step();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EventQueue);

void BM_SyntheticWorkload(benchmark::State& state) {
  sim::SyntheticOptions o;
  o.rate = 2500;
  o.input = {2500, 1.0, 16, 65536};
  o.output = {2500, 1.0, 1, 16384};
  o.block_tokens = 512;
  o.system_prompt_fraction = 0.8;
  o.system_prompt_tokens = 2000;
  o.session_fraction = 0.15;
  o.turns_mean = 3;
  o.think_time_mean = 60 * kSecond;
  o.system_prompts = 400;
  o.system_prompt_zipf = 1.1;
  o.turn_tokens = {300, 1.0, 1, 8192};
  o.arrival = "gamma";  // as scenarios/failures.yaml
  o.burst_cv = 1.5;
  o.diurnal_amplitude = 0.2;
  o.diurnal_period = SecondsToNanos(86400);
  auto w = sim::MakeSyntheticWorkload(o);
  for (auto _ : state) benchmark::DoNotOptimize((*w)->Next());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SyntheticWorkload);

}  // namespace
}  // namespace myriad
