// The store-load decision both store tiers take (the emulator's and the simulator's): load the
// store's run only when it beats recomputing it, priced as the router prices it.
#include "policy/store_load.h"

#include <gtest/gtest.h>

namespace myriad::policy {
namespace {

// 10 ms fixed, 0.1 ms per uncached token, cached tokens free, 100 kB of KV per token.
PrefillCost Cost() { return PrefillCost::Linear(0.01, 1e-4, 0, 1e-4, 1e5); }

// 16-token blocks of 1.6 MB; a 1,000-token prompt, 10 blocks in HBM, the next 40 in the store.
StoreLoadQuery Query() {
  return StoreLoadQuery{.input_tokens = 1000, .hbm_blocks = 10, .store_blocks = 40, .block_tokens = 16, .block_bytes = 1.6e6};
}

TEST(StoreLoad, LoadsTheRunWhenTheBytesBeatRecompute) {
  // 64 MB over 10 GB/s + 1 ms = 7.4 ms, against 64 ms of recompute for the same 640 tokens.
  const StorePath fast{.bytes_per_s = 1e10, .latency = kMillisecond};
  const StoreLoad d = DecideStoreLoad(Cost(), fast, Query());
  EXPECT_EQ(d.load_blocks, 40);
  EXPECT_EQ(d.recompute_tokens, 1000 - 160 - 640);
  EXPECT_NEAR(d.seconds, 0.001 + 6.4e7 / 1e10 + Cost().PrefillSeconds(200, 800), 1e-12);
  // The same figure the router ranks by, for the same prompt on an idle unit.
  EXPECT_DOUBLE_EQ(d.seconds, PriceTiers(Cost(), 0, 1000, 160, 800, fast).ttft_s);
}

TEST(StoreLoad, RecomputesWhenThePathIsSlowerThanThePrefill) {
  // 64 MB over 0.5 GB/s: 128 ms, against 64 ms of recompute.
  const StoreLoad d = DecideStoreLoad(Cost(), StorePath{.bytes_per_s = 5e8}, Query());
  EXPECT_EQ(d.load_blocks, 0);
  EXPECT_EQ(d.recompute_tokens, 1000 - 160);
  EXPECT_DOUBLE_EQ(d.seconds, Cost().PrefillSeconds(840, 160));
  // A fixed latency above the whole recompute loses too, however fast the bytes.
  const StorePath far{.bytes_per_s = 1e12, .latency = 100 * kMillisecond};
  EXPECT_EQ(DecideStoreLoad(Cost(), far, Query()).load_blocks, 0);
}

TEST(StoreLoad, TheBytesAreTheStoredBlocksNotTheModelsKv) {
  // Blocks stored at 32 MB each (twenty times the model's KV): the fast path no longer pays.
  StoreLoadQuery q = Query();
  q.block_bytes = 3.2e7;
  EXPECT_EQ(DecideStoreLoad(Cost(), StorePath{.bytes_per_s = 1e10, .latency = kMillisecond}, q).load_blocks, 0);
}

TEST(StoreLoad, NoStorePathNoRunOrARunPastThePromptAreBounded) {
  const StorePath fast{.bytes_per_s = 1e10};
  EXPECT_EQ(DecideStoreLoad(Cost(), StorePath{}, Query()).load_blocks, 0);
  StoreLoadQuery q = Query();
  q.store_blocks = 0;
  EXPECT_EQ(DecideStoreLoad(Cost(), fast, q).load_blocks, 0);
  EXPECT_EQ(DecideStoreLoad(Cost(), fast, q).recompute_tokens, 840);
  // The store holds more than the prompt's full blocks: only those count.
  q.store_blocks = 1000;
  const StoreLoad d = DecideStoreLoad(Cost(), fast, q);
  EXPECT_EQ(d.load_blocks, 1000 / 16 - 10);
  EXPECT_EQ(d.recompute_tokens, 1000 % 16);
  // HBM past the prompt (a preempted request's shorter target): nothing to load or compute.
  q.hbm_blocks = 100;
  EXPECT_EQ(DecideStoreLoad(Cost(), fast, q).load_blocks, 0);
  EXPECT_EQ(DecideStoreLoad(Cost(), fast, q).recompute_tokens, 0);
}

}  // namespace
}  // namespace myriad::policy
