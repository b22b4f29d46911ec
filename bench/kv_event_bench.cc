// Decoding of vLLM KV-event batches: 64 BlockStored events of one 16-token block each, in the
// array (older vLLM) and map (newer) encodings. Reports events/s.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "net/kv_events.h"

namespace myriad::net {
namespace {

std::vector<uint8_t> Payload(KvEventEncoding encoding) {
  KvEventBatch batch;
  batch.ts = 1750000000.25;
  batch.dp_rank = 0;
  uint64_t h = 0x9E3779B97F4A7C15ULL;
  for (uint32_t i = 0; i < 64; ++i) {
    BlockStored e;
    const uint64_t parent = h;
    h = h * 6364136223846793005ULL + 1442695040888963407ULL;  // engine hashes span 64 bits
    e.block_hashes = {h};
    if (i > 0) e.parent_block_hash = parent;
    for (uint32_t t = 0; t < 16; ++t) e.token_ids.push_back(1000 + i * 16 + t * 977);
    e.block_size = 16;
    e.medium = "GPU";
    batch.events.push_back(std::move(e));
  }
  return EncodeKvEventBatch(batch, encoding);
}

void BM_DecodeKvEventBatch(benchmark::State& state) {
  const auto payload = Payload(static_cast<KvEventEncoding>(state.range(0)));
  for (auto _ : state) {
    auto b = DecodeKvEventBatch(payload);
    benchmark::DoNotOptimize(b);
  }
  state.SetItemsProcessed(state.iterations() * 64);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(payload.size()));
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * 64), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DecodeKvEventBatch)
    ->Arg(static_cast<int>(KvEventEncoding::kArray))
    ->Arg(static_cast<int>(KvEventEncoding::kMap));

}  // namespace
}  // namespace myriad::net
