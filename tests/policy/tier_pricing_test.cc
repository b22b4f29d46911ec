// The three-way price of a prompt on a unit (HBM hit, store-tier load, recompute), the router
// ranking candidates by it, the indexer's reach holder that tells the router what a unit's
// store tier adds to its HBM, and the recompute limiter's one unit.
#include "policy/tier_pricing.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "core/block_hash.h"
#include "policy/kv_event_indexer.h"
#include "policy/recompute_limiter.h"
#include "policy/router.h"

namespace myriad::policy {
namespace {

// 10 ms fixed, 0.1 ms per uncached token, cached tokens free, 100 kB of KV per token.
PrefillCost Cost() { return PrefillCost::Linear(0.01, 1e-4, 0, 1e-4, 1e5); }

TEST(TierPricing, WithoutAStorePathItIsHbmAndRecompute) {
  const PrefillCost c = Cost();
  const TierPrice p = PriceTiers(c, 0.5, 10'000, 2'000, 8'000, StorePath{});
  EXPECT_DOUBLE_EQ(p.ttft_s, 0.5 + c.PrefillSeconds(8'000, 2'000));
  EXPECT_EQ(p.hbm_tokens, 2'000);
  EXPECT_EQ(p.store_tokens, 0);
}

TEST(TierPricing, LoadsFromTheStoreWhenTheBytesAreCheaperThanRecompute) {
  const PrefillCost c = Cost();
  // 6,000 tokens x 100 kB = 600 MB over 10 GB/s: 60 ms + 1 ms, against 600 ms of recompute.
  const StorePath fast{.bytes_per_s = 1e10, .latency = kMillisecond};
  const TierPrice p = PriceTiers(c, 0, 10'000, 2'000, 8'000, fast);
  EXPECT_EQ(p.hbm_tokens, 2'000);
  EXPECT_EQ(p.store_tokens, 6'000);
  EXPECT_NEAR(p.ttft_s, 0.061 + c.PrefillSeconds(2'000, 8'000), 1e-9);
  EXPECT_LT(p.ttft_s, c.PrefillSeconds(8'000, 2'000));
  // Over 0.5 GB/s the same bytes take 1.2 s: recompute wins.
  const TierPrice slow = PriceTiers(c, 0, 10'000, 2'000, 8'000, StorePath{.bytes_per_s = 5e8});
  EXPECT_EQ(slow.store_tokens, 0);
  EXPECT_DOUBLE_EQ(slow.ttft_s, c.PrefillSeconds(8'000, 2'000));
  // Nothing past the HBM prefix in the store: nothing to load.
  EXPECT_EQ(PriceTiers(c, 0, 10'000, 2'000, 2'000, fast).store_tokens, 0);
}

class TierRouterTest : public ::testing::Test {
 protected:
  TierRouterTest() : cost_(Cost()) {
    for (BlockKey k = 0; k < 16; ++k) blocks_.push_back(5000 + k);
  }
  std::vector<Candidate> Units() {
    // Unit 0: GPU holder 0, reach 1; unit 1: GPU holder 2, reach 3.
    return {Candidate{.holder = 0, .store_holder = 1, .load = {}, .cost = &cost_},
            Candidate{.holder = 2, .store_holder = 3, .load = {}, .cost = &cost_}};
  }
  RouteRequest Req() { return RouteRequest{.blocks = blocks_, .input_tokens = 16 * 512 + 100, .now = 0}; }
  RouterOptions Options(double bytes_per_s) {
    return RouterOptions{.policy = RoutingPolicy::kKvAware, .block_tokens = 512,
                         .store = StorePath{.bytes_per_s = bytes_per_s, .latency = kMillisecond}};
  }

  PrefillCost cost_;
  std::vector<BlockKey> blocks_;
  PrefixIndex index_;
  Rng rng_{1};
};

TEST_F(TierRouterTest, PrefersTheUnitWhoseStoreTierHoldsThePrefixOverAColdOne) {
  index_.Stored(3, 0, blocks_, 0);  // unit 1's store tier holds the whole prompt
  Router fast(Options(1e10), &index_);
  RouteDecision d = fast.Route(Req(), Units(), {}, rng_);
  EXPECT_EQ(d.entry, 1);
  EXPECT_EQ(d.expected_cached_tokens, 16 * 512);
  EXPECT_EQ(d.expected_store_tokens, 16 * 512);
  // Over a path too slow to beat recompute, the store tier is worth nothing.
  Router slow(Options(1e8), &index_);
  d = slow.Route(Req(), Units(), {}, rng_);
  EXPECT_EQ(d.expected_store_tokens, 0);
  EXPECT_EQ(d.expected_cached_tokens, 0);
  // Its blocks gone from the index, the two units are equal again.
  index_.Removed(3, blocks_);
  d = fast.Route(Req(), Units(), {}, rng_);
  EXPECT_EQ(d.expected_store_tokens, 0);
  EXPECT_EQ(d.expected_cached_tokens, 0);
}

TEST_F(TierRouterTest, HbmBeatsTheStoreAndTheStoreExtendsHbm) {
  // Unit 0 has the first 8 blocks in HBM; unit 1 the whole prompt in its store tier.
  index_.Stored(0, 0, std::span<const BlockKey>(blocks_).first(8), 0);
  index_.Stored(1, 0, std::span<const BlockKey>(blocks_).first(8), 0);
  index_.Stored(3, 0, blocks_, 0);
  Router r(Options(1e10), &index_);
  RouteDecision d = r.Route(Req(), Units(), {}, rng_);
  // 16 blocks loaded (8,192 tokens, 819 MB: 83 ms) beat 8 in HBM and 4,196 tokens recomputed.
  EXPECT_EQ(d.entry, 1);
  EXPECT_EQ(d.expected_store_tokens, 16 * 512);
  // Unit 0's store tier now holds the rest of it too: HBM part plus the loaded rest wins.
  index_.Stored(1, 0, blocks_, 0);
  d = r.Route(Req(), Units(), {}, rng_);
  EXPECT_EQ(d.entry, 0);
  EXPECT_EQ(d.expected_cached_tokens, 16 * 512);
  EXPECT_EQ(d.expected_store_tokens, 8 * 512);
}

// The simulator's store: one for the cluster, every unit loads from it (SharedStoreView).
class FakeSharedStore : public SharedStoreView {
 public:
  absl::flat_hash_set<BlockKey> keys;
  mutable int lookups = 0;
  size_t Covered(std::span<const BlockKey> blocks) const override {
    ++lookups;
    size_t n = 0;
    while (n < blocks.size() && keys.contains(blocks[n])) ++n;
    return n;
  }
};

// The router prices a shared store's run past each unit's own HBM prefix with the same
// three-way price (PriceTiers), over each unit's own path (Candidate::store_path).
TEST_F(TierRouterTest, ASharedStoreExtendsEachUnitsOwnPrefixOverItsOwnPath) {
  index_.Stored(2, 0, std::span<const BlockKey>(blocks_).first(8), 0);  // unit 1: blocks 0-7 in HBM
  FakeSharedStore store;
  for (size_t b = 8; b < blocks_.size(); ++b) store.keys.insert(blocks_[b]);  // blocks 8-15
  const StorePath fast{.bytes_per_s = 1e10, .latency = kMillisecond};
  std::vector<Candidate> units = {Candidate{.holder = 0, .load = {}, .cost = &cost_, .store_path = &fast},
                                  Candidate{.holder = 2, .load = {}, .cost = &cost_, .store_path = &fast}};
  Router r(Options(1e8), &index_);  // the options' path is too slow: each unit's own is used
  RouteDecision d = r.Route(Req(), units, {}, rng_);
  EXPECT_EQ(d.expected_store_tokens, 0);  // no shared store yet
  EXPECT_EQ(d.expected_cached_tokens, 8 * 512);
  const double hbm_only = d.estimated_ttft_s;
  r.UseSharedStore(&store);
  d = r.Route(Req(), units, {}, rng_);
  EXPECT_EQ(d.entry, 1);
  EXPECT_EQ(d.expected_cached_tokens, 16 * 512);
  EXPECT_EQ(d.expected_store_tokens, 8 * 512);
  EXPECT_LT(d.estimated_ttft_s, hbm_only);
  // Unit 0 holds nothing and the store lacks block 0: nothing to load there. Both units'
  // lookups were made, one per distinct own prefix.
  EXPECT_EQ(store.lookups, 2);
  // Over the options' slow path (no path of its own) the store's run is not worth loading.
  units[1].store_path = nullptr;
  d = r.Route(Req(), units, {}, rng_);
  EXPECT_EQ(d.expected_store_tokens, 0);
}

// An engine's HBM holds the first blocks, its store tier the next: the reach holder has the
// whole run, and keeps a block as long as either medium does.
TEST(TierIndexer, ReachIsTheUnionOfTheEnginesMedia) {
  constexpr uint32_t kBs = 16;
  constexpr HolderId kGpu = 0, kReach = 1;
  PrefixIndex index;
  KvEventIndexer indexer(&index, KvEventIndexerOptions{.block_size = kBs});
  ASSERT_TRUE(indexer.AddPublisher(0, {{{"GPU", kGpu}, {"CPU", kUnindexedHolder}}, kReach}).ok());
  EXPECT_FALSE(indexer.AddPublisher(1, {{{"GPU", 5}}, 5}).ok());  // a reach apart from its media
  std::vector<uint32_t> tokens(4 * kBs);
  std::iota(tokens.begin(), tokens.end(), 100);
  auto slice = [&](size_t first, size_t n) {
    return std::vector<uint32_t>(tokens.begin() + static_cast<ptrdiff_t>(first * kBs),
                                 tokens.begin() + static_cast<ptrdiff_t>((first + n) * kBs));
  };
  auto h = [](int i) { return 0xE000000000000000ULL + static_cast<uint64_t>(i); };
  uint64_t seq = 0;
  auto apply = [&](KvEvent e) {
    KvEventBatch b;
    b.events.push_back(std::move(e));
    ASSERT_TRUE(indexer.Apply(0, seq++, b, 0).ok());
  };
  auto matched = [&](HolderId holder) -> uint32_t {
    std::vector<PrefixMatch> m;
    index.Match(HashTokenBlocks(tokens, kBs), 0, &m);
    for (const PrefixMatch& x : m) {
      if (x.holder == holder) return x.matched_blocks;
    }
    return 0;
  };
  apply(BlockStored{.block_hashes = {h(0), h(1)}, .token_ids = slice(0, 2), .block_size = kBs, .medium = "GPU"});
  apply(BlockStored{.block_hashes = {h(2), h(3)}, .parent_block_hash = h(1), .token_ids = slice(2, 2),
                    .block_size = kBs, .medium = "CPU"});
  EXPECT_EQ(matched(kGpu), 2u);
  EXPECT_EQ(matched(kReach), 4u);
  EXPECT_EQ(index.entries(), 6u);  // CPU blocks are not indexed on their own
  // Blocks 0-1 offloaded too, then evicted from HBM: still within reach.
  apply(BlockStored{.block_hashes = {h(0), h(1)}, .token_ids = slice(0, 2), .block_size = kBs, .medium = "CPU"});
  apply(BlockRemoved{.block_hashes = {h(0), h(1)}, .medium = "GPU"});
  EXPECT_EQ(matched(kGpu), 0u);
  EXPECT_EQ(matched(kReach), 4u);
  // The store loses block 2 (its node died): the reach ends before it, at once.
  apply(BlockRemoved{.block_hashes = {h(2)}, .medium = "CPU"});
  EXPECT_EQ(matched(kReach), 2u);
  apply(AllBlocksCleared{});
  EXPECT_EQ(matched(kReach), 0u);
  EXPECT_EQ(index.entries(), 0u);
}

TEST(RecomputeLimiterUnit, AFractionOfTheEntryUnitsNominalThroughput) {
  const PrefillCost c = Cost();  // 10,000 tokens/s at full load
  const std::vector<const PrefillCost*> two = {&c, &c};
  EXPECT_DOUBLE_EQ(RecomputeTokensPerSecond(0.5, two), 0.5 * 2 * c.ThroughputTokensPerSecond());
  // The gateway's fleet grows from nothing: the new capacity comes with a full bucket.
  RecomputeLimiter l(RecomputeLimiterOptions{.burst_seconds = 1});
  EXPECT_FALSE(l.enabled());
  l.SetRate(0, 1000);
  EXPECT_TRUE(l.enabled());
  EXPECT_DOUBLE_EQ(l.level(), 1000);
  EXPECT_TRUE(l.Admit(0, 900, 0));
  l.SetRate(0, 2000);  // one more unit: its share arrives full
  EXPECT_DOUBLE_EQ(l.level(), 1100);
  l.SetRate(0, 500);  // units gone: what is left cannot exceed the smaller bucket
  EXPECT_DOUBLE_EQ(l.level(), 500);
}

}  // namespace
}  // namespace myriad::policy
