// Benchmarks of policy::PrefixIndex at cluster scale: ingest rate of engine block events, Match
// latency of a 128-block prompt on an index of millions of blocks, and memory per entry with
// the 23M (block, holder) entries of the default 10,240-GPU cluster at 512-token granularity.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench_util.h"
#include "core/rng.h"
#include "policy/prefix_index.h"

namespace myriad {
namespace {

using policy::HolderId;
using policy::PrefixIndex;
using policy::PrefixMatch;

// Random 64-bit keys, as the chained XXH3 keys look to the index.
struct KeySource {
  uint64_t state;
  BlockKey Next() {
    const uint64_t x = state;
    state += 0x9e3779b97f4a7c15ULL;
    return Mix64(x);
  }
};


// 10,240 GPUs x ~80 GB free HBM / (70,272 B/token x 512 tokens) = ~23M (block, holder) entries.
// Arg 1: every block on one holder (the worst case per entry); arg 2: shared prefixes, a
// third of the chains also on a second holder and a tenth on a third.
void BM_PrefixIndexMemory23M(benchmark::State& state) {
  constexpr size_t kTarget = 23'000'000;
  for (auto _ : state) {
    const double rss0 = ProcMiB("VmRSS");
    PrefixIndex index({.max_entries = size_t{32} << 20, .index_every = 32});
    KeySource keys{11};
    Rng rng(12);
    std::vector<BlockKey> chain(32 * 32);  // 32 indexed blocks of 32 engine blocks
    while (index.entries() < kTarget) {
      for (size_t i = 31; i < chain.size(); i += 32) chain[i] = keys.Next();
      index.Stored(static_cast<HolderId>(rng.Below(10'240)), 0, chain, 0);
      if (state.range(0) == 2) {
        const double u = rng.Uniform();
        if (u < 0.33) index.Stored(static_cast<HolderId>(rng.Below(10'240)), 0, chain, 0);
        if (u < 0.10) index.Stored(static_cast<HolderId>(rng.Below(10'240)), 0, chain, 0);
      }
    }
    const double entries = static_cast<double>(index.entries());
    state.counters["entries_M"] = entries / 1e6;
    state.counters["blocks_M"] = static_cast<double>(index.blocks()) / 1e6;
    state.counters["bytes_per_entry"] = static_cast<double>(index.memory_bytes()) / entries;
    state.counters["memory_MiB"] = static_cast<double>(index.memory_bytes()) / (1 << 20);
    state.counters["rss_delta_MiB"] = ProcMiB("VmRSS") - rss0;
    state.counters["peak_rss_MiB"] = ProcMiB("VmHWM");
  }
}
BENCHMARK(BM_PrefixIndexMemory23M)->Arg(1)->Arg(2)->Iterations(1)->Unit(benchmark::kMillisecond);

// Engine events into an index of 4M entries kept at its bound, so each new block also evicts
// one: a quarter of the events re-store a recent chain on another holder (shared prefixes),
// the rest are new chains. Arg: blocks per event.
void BM_PrefixIndexIngest(benchmark::State& state) {
  const size_t per_event = static_cast<size_t>(state.range(0));
  constexpr size_t kEntries = size_t{4} << 20;
  PrefixIndex index({.max_entries = kEntries});
  KeySource keys{1};
  Rng rng(2);
  std::vector<BlockKey> chain(per_event);
  std::vector<std::vector<BlockKey>> recent(1024, std::vector<BlockKey>(per_event));
  size_t next_recent = 0;
  while (index.entries() < kEntries) {
    for (BlockKey& k : chain) k = keys.Next();
    index.Stored(static_cast<HolderId>(rng.Below(256)), 0, chain, 0);
  }
  Nanos now = 0;
  for (auto _ : state) {
    now += kMicrosecond;
    const HolderId holder = static_cast<HolderId>(rng.Below(256));
    if (rng.Below(4) == 0) {
      index.Stored(holder, 0, recent[rng.Below(recent.size())], now);
    } else {
      std::vector<BlockKey>& c = recent[next_recent++ % recent.size()];
      for (BlockKey& k : c) k = keys.Next();
      index.Stored(holder, 0, c, now);
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * per_event));
  state.counters["entries"] = static_cast<double>(index.entries());

  state.counters["bytes_per_entry"] =
      static_cast<double>(index.memory_bytes()) / static_cast<double>(index.entries());
}
BENCHMARK(BM_PrefixIndexIngest)->Arg(8)->Arg(16)->Arg(32)->Unit(benchmark::kNanosecond);

// 40,960 prompts of 128 blocks (5.2M blocks), each held by 1-3 of 64 holders, the first in
// full and the others to a random depth of at least half: about 10M entries.
struct MatchFixture {
  static constexpr size_t kLen = 128;
  size_t prompt_count = 40'960;
  PrefixIndex index{{.max_entries = size_t{64} << 20}};
  std::vector<BlockKey> prompts;

  explicit MatchFixture(size_t prompts_count = 40'960) : prompt_count(prompts_count) {
    KeySource keys{7};
    Rng rng(8);
    prompts.resize(prompt_count * kLen);
    for (BlockKey& k : prompts) k = keys.Next();
    for (size_t p = 0; p < prompt_count; ++p) {
      const std::span<const BlockKey> chain(&prompts[p * kLen], kLen);
      const uint64_t holders = 1 + rng.Below(3);
      for (uint64_t h = 0; h < holders; ++h) {
        const size_t len = h == 0 ? kLen : kLen / 2 + rng.Below(kLen / 2);
        index.Stored(static_cast<HolderId>(rng.Below(64)), 0, chain.first(len), 0);
      }
    }
  }
  std::span<const BlockKey> Prompt(size_t p) const {
    return std::span<const BlockKey>(&prompts[p * kLen], kLen);
  }
};

// Times Match alone: the router hashes the prompt just before matching, so the query's keys
// are copied into a hot buffer outside the timed region (manual timing).
// Arg: prompts in the index; 40,960 (5.2 M blocks, far beyond the caches) is the target's case,
// 16 (2,048 blocks, in cache) shows what Match costs without waiting for memory.
void BM_PrefixIndexMatch128(benchmark::State& state) {
  static MatchFixture* big = new MatchFixture();  // built once for all repetitions
  static MatchFixture* small = new MatchFixture(16);
  MatchFixture* fx = state.range(0) == 16 ? small : big;
  Rng rng(9);
  std::vector<PrefixMatch> out;
  std::vector<BlockKey> query(MatchFixture::kLen);
  std::vector<double> us;
  size_t matched = 0;
  for (auto _ : state) {
    const auto prompt = fx->Prompt(rng.Below(fx->prompt_count));
    std::copy(prompt.begin(), prompt.end(), query.begin());
    const auto t0 = std::chrono::steady_clock::now();
    fx->index.Match(query, 0, &out);
    const auto t1 = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(s);
    us.push_back(s * 1e6);
    matched += out.size();
  }
  std::sort(us.begin(), us.end());
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[us.size() * 99 / 100];
  state.counters["holders_per_query"] =
      static_cast<double>(matched) / static_cast<double>(state.iterations());
  state.counters["index_entries"] = static_cast<double>(fx->index.entries());
  state.counters["index_blocks"] = static_cast<double>(fx->index.blocks());
}
BENCHMARK(BM_PrefixIndexMatch128)
    ->Arg(40'960)
    ->Arg(16)
    ->UseManualTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true)
    ->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace myriad
