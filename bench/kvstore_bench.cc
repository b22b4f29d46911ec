// Benchmarks of kvstore::KvMaster, the KV cache store's metadata core, on one core:
//   BM_KvBatchGet / BM_KvBatchExists: batched lookups of random stored blocks (uniform: the
//     cache-hostile case) on a master holding `objects` runs of `blocks` blocks each;
//     items_per_second counts keys looked up.
//   BM_KvPutCycle: BatchPutStart + BatchPutEnd + BatchRemove of fresh one-block objects on a
//     full master; items_per_second counts objects (three metadata operations each).
//   BM_KvMemory: bytes per object (run) and per block, from the containers' capacities
//     (KvMaster::memory_bytes) and from the process RSS growth while filling. The 50M-object
//     case runs only with MYRIAD_KVSTORE_50M=1 (about 6 GB and a few minutes).
// Keys are generated from (run, block) on the fly, so the benchmark itself holds no key arrays
// and the RSS growth is the master's.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/rng.h"
#include "kvstore_core/master.h"

namespace myriad {
namespace {

using kvstore::GetResult;
using kvstore::KvMaster;
using kvstore::KvMasterOptions;
using kvstore::NamespaceId;
using kvstore::PutRequest;

// Block `block` of run `run`: stand-ins for chain keys, uniform 64-bit like XXH3 output.
BlockKey KeyOf(uint64_t run, uint64_t block) { return Mix64((run << 16) | block); }


KvMasterOptions BenchOptions() {
  KvMasterOptions o;
  // Fill time runs at 1 us per put; the pending-put queue holds one put_timeout of puts.
  o.put_timeout = kSecond;
  o.dead_after = 1000 * kHour;
  return o;
}

// A master with `objects` complete runs of `blocks` blocks, 2 replicas each, on 16 nodes in 4
// racks with room to spare (no eviction).
struct Filled {
  Filled(uint64_t objects, uint32_t blocks) : master(BenchOptions()), objects(objects), blocks(blocks) {
    for (kvstore::NodeId id = 0; id < 16; ++id) {
      (void)master.AddNode(id, "rack-" + std::to_string(id % 4), uint64_t{1} << 50, 0);
    }
    ns = master.CreateNamespace("bench").value();
    rss_before = ProcMiB("VmRSS");
    std::vector<BlockKey> keys(blocks);
    for (uint64_t r = 0; r < objects; ++r) {
      for (uint32_t b = 0; b < blocks; ++b) keys[b] = KeyOf(r, b);
      const PutRequest q{keys.data(), blocks, uint64_t{blocks} << 20, 2, false};
      if (!master.PutStart(ns, q, now).ok() || !master.PutEnd(ns, keys.back()).ok()) std::abort();
      now += kMicrosecond;
      if ((r & 0xffff) == 0) master.Tick(now);
    }
    now += 2 * kSecond;
    master.Tick(now);  // drains the pending-put queue
    rss_after = ProcMiB("VmRSS");
  }
  KvMaster master;
  NamespaceId ns = 0;
  uint64_t objects;
  uint32_t blocks;
  Nanos now = 0;
  double rss_before = 0, rss_after = 0;
};

// One filled master at a time, shared by the lookups of the same shape.
std::unique_ptr<Filled> filled;
Filled& GetFilled(uint64_t objects, uint32_t blocks) {
  if (!filled || filled->objects != objects || filled->blocks != blocks) {
    filled.reset();
    filled = std::make_unique<Filled>(objects, blocks);
  }
  return *filled;
}

// A pool of stored keys to look up: random run, random block in it.
std::vector<BlockKey> QueryPool(const Filled& f, size_t n) {
  Rng rng(42);
  std::vector<BlockKey> pool(n);
  for (BlockKey& k : pool) k = KeyOf(rng.Below(f.objects), rng.Below(f.blocks));
  return pool;
}

void BM_KvBatchGet(benchmark::State& state) {
  Filled& f = GetFilled(static_cast<uint64_t>(state.range(0)), static_cast<uint32_t>(state.range(1)));
  const auto batch = static_cast<size_t>(state.range(2));
  const std::vector<BlockKey> pool = QueryPool(f, size_t{1} << 20);
  std::vector<GetResult> out;
  size_t at = 0, hits = 0;
  for (auto _ : state) {
    if (at + batch > pool.size()) at = 0;
    (void)f.master.BatchGet(f.ns, std::span<const BlockKey>(pool.data() + at, batch), f.now, &out);
    hits += out.back().code == absl::StatusCode::kOk;
    benchmark::DoNotOptimize(out.data());
    at += batch;
  }
  if (hits != static_cast<size_t>(state.iterations())) state.SkipWithError("lookups missed");
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * batch));
}

void BM_KvBatchExists(benchmark::State& state) {
  Filled& f = GetFilled(static_cast<uint64_t>(state.range(0)), static_cast<uint32_t>(state.range(1)));
  const auto batch = static_cast<size_t>(state.range(2));
  std::vector<BlockKey> pool = QueryPool(f, size_t{1} << 20);
  // One probe in four misses, as prefix probing past the cached part does.
  for (size_t i = 0; i < pool.size(); i += 4) pool[i] = Mix64(pool[i]);
  std::vector<uint8_t> out;
  size_t at = 0, found = 0;
  for (auto _ : state) {
    if (at + batch > pool.size()) at = 0;
    (void)f.master.BatchExists(f.ns, std::span<const BlockKey>(pool.data() + at, batch), &out);
    found += out.back();
    benchmark::DoNotOptimize(out.data());
    at += batch;
  }
  benchmark::DoNotOptimize(found);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * batch));
}

void BM_KvPutCycle(benchmark::State& state) {
  Filled& f = GetFilled(static_cast<uint64_t>(state.range(0)), 1);
  const auto batch = static_cast<size_t>(state.range(1));
  std::vector<BlockKey> keys(batch);
  std::vector<PutRequest> puts(batch);
  std::vector<absl::StatusOr<kvstore::ReplicaList>> started;
  std::vector<absl::Status> done;
  uint64_t next = uint64_t{1} << 40;  // runs not in the filled set
  for (auto _ : state) {
    for (size_t i = 0; i < batch; ++i) {
      keys[i] = KeyOf(next++, 0);
      puts[i] = PutRequest{&keys[i], 1, 1 << 20, 2, false};
    }
    (void)f.master.BatchPutStart(f.ns, puts, f.now, &started);
    (void)f.master.BatchPutEnd(f.ns, keys, &done);
    (void)f.master.BatchRemove(f.ns, keys, f.now, &done);
    if (!done.back().ok()) state.SkipWithError(std::string(done.back().message()).c_str());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * batch));
}

void BM_KvMemory(benchmark::State& state) {
  const auto objects = static_cast<uint64_t>(state.range(0));
  const auto blocks = static_cast<uint32_t>(state.range(1));
  filled.reset();  // measure a fresh fill, not one other benchmarks wrote into
  for (auto _ : state) {
    Filled& f = GetFilled(objects, blocks);
    const double bytes = static_cast<double>(f.master.memory_bytes());
    const double rss = (f.rss_after - f.rss_before) * 1024 * 1024;
    const auto n = static_cast<double>(objects);
    state.counters["objects"] = n;
    state.counters["bytes_per_object"] = bytes / n;
    state.counters["bytes_per_block"] = bytes / (n * blocks);
    state.counters["rss_bytes_per_object"] = rss / n;
    state.counters["metadata_GiB"] = bytes / (1 << 30);
  }
}

BENCHMARK(BM_KvBatchGet)
    ->ArgNames({"objects", "blocks", "batch"})
    ->Args({1'000'000, 1, 128})
    ->Args({1'000'000, 1, 1024})
    ->Args({1'000'000, 16, 128});
BENCHMARK(BM_KvBatchExists)
    ->ArgNames({"objects", "blocks", "batch"})
    ->Args({1'000'000, 1, 128})
    ->Args({1'000'000, 1, 1024})
    ->Args({1'000'000, 16, 128});
BENCHMARK(BM_KvPutCycle)->ArgNames({"objects", "batch"})->Args({1'000'000, 128});
BENCHMARK(BM_KvMemory)
    ->ArgNames({"objects", "blocks"})
    ->Args({1'000'000, 1})
    ->Args({1'000'000, 16})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// The 50M-object master: about 6 GB, so only on request.
const bool kBig = [] {
  if (std::getenv("MYRIAD_KVSTORE_50M") == nullptr) return false;
  benchmark::RegisterBenchmark("BM_KvMemory50M", BM_KvMemory)
      ->Args({50'000'000, 1})
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_KvBatchGet50M",
                               BM_KvBatchGet)
      ->Args({50'000'000, 1, 128});
  benchmark::RegisterBenchmark("BM_KvBatchExists50M",
                               BM_KvBatchExists)
      ->Args({50'000'000, 1, 128});
  return true;
}();

}  // namespace
}  // namespace myriad
