#include "policy/engine_cache_model.h"

#include <gtest/gtest.h>

#include <vector>

namespace myriad::policy {
namespace {

constexpr Nanos kLong = 3600 * kSecond;

// Given an index whose entries are the router's provisional guesses (long TTL) and a model of
// the holder's cache, when requests are served, the index keeps what the engine keeps.
struct World {
  PrefixIndex index{PrefixIndexOptions{.provisional_ttl = kLong}};
  EngineCacheModel model{&index};
  Nanos now = kSecond;

  void Serve(HolderId h, const std::vector<BlockKey>& blocks, int64_t block_tokens = 16) {
    index.AddProvisional(h, 0, blocks, now);
    model.Served(h, blocks, block_tokens);
  }
  uint32_t Held(HolderId h, const std::vector<BlockKey>& blocks) {
    std::vector<PrefixMatch> out;
    index.Match(blocks, now, &out);
    for (const auto& m : out) {
      if (m.holder == h) return m.matched_blocks;
    }
    return 0;
  }
};

std::vector<BlockKey> Chain(BlockKey first, int n, BlockKey parent = kRootBlockKey) {
  std::vector<BlockKey> out;
  for (int i = 0; i < n; ++i) {
    parent = HashContentBlock(parent, first + static_cast<BlockKey>(i));
    out.push_back(parent);
  }
  return out;
}

TEST(EngineCacheModel, SlotCacheForgetsThePromptOfTheSlotATakenOver) {
  World w;
  w.model.SetCapacity(0, {.kind = EngineCacheKind::kSlots, .slots = 2, .tokens = 4096, .source = CapacitySource::kEngine});
  const auto a = Chain(100, 4), b = Chain(200, 4), c = Chain(300, 4);
  w.Serve(0, a);
  w.Serve(0, b);
  EXPECT_EQ(w.Held(0, a), 4u);
  EXPECT_EQ(w.Held(0, b), 4u);
  w.Serve(0, c);  // both slots hold unrelated prompts: the least recently used (a's) goes
  EXPECT_EQ(w.Held(0, a), 0u);
  EXPECT_EQ(w.Held(0, b), 4u);
  EXPECT_EQ(w.Held(0, c), 4u);
  const EngineCacheOccupancy o = w.model.Occupancy(0);
  EXPECT_EQ(o.used_slots, 2);
  EXPECT_EQ(o.tokens, 8 * 16);
  EXPECT_EQ(o.evictions, 4u);
}

TEST(EngineCacheModel, AContinuationReusesItsSlotAndKeepsTheOthers) {
  World w;
  w.model.SetCapacity(0, {.kind = EngineCacheKind::kSlots, .slots = 2});
  const auto a = Chain(100, 4), b = Chain(200, 4);
  w.Serve(0, a);
  w.Serve(0, b);
  // Turns two and three of a's conversation go to a's slot, the similar one: by recency alone
  // turn three would take b's.
  auto a2 = a;
  for (BlockKey k : Chain(7, 2, a.back())) a2.push_back(k);
  w.Serve(0, a2);
  auto a3 = a2;
  for (BlockKey k : Chain(9, 2, a2.back())) a3.push_back(k);
  w.Serve(0, a3);
  EXPECT_EQ(w.Held(0, b), 4u) << "b's slot was not the similar one";
  EXPECT_EQ(w.Held(0, a3), 8u);
}

TEST(EngineCacheModel, SharedPrefixStaysWhileAnotherSlotHoldsIt) {
  World w;
  w.model.SetCapacity(0, {.kind = EngineCacheKind::kSlots, .slots = 2});
  const auto sys = Chain(1, 2);
  auto a = sys, b = sys, c = sys;
  for (BlockKey k : Chain(100, 6, sys.back())) a.push_back(k);
  for (BlockKey k : Chain(200, 6, sys.back())) b.push_back(k);
  for (BlockKey k : Chain(300, 6, sys.back())) c.push_back(k);
  w.Serve(0, a);
  w.Serve(0, b);  // 2 of its 8 blocks (25% > 10%) in common with a's slot: b takes it over
  EXPECT_EQ(w.Held(0, a), 2u) << "the system prompt stays: b's prompt begins with it";
  EXPECT_EQ(w.Held(0, b), 8u);
  w.Serve(0, c);
  EXPECT_EQ(w.Held(0, b), 2u);
  EXPECT_EQ(w.Held(0, c), 8u);
  EXPECT_EQ(w.model.Occupancy(0).used_slots, 1) << "llama-server's rule: one slot serves them all";
}

TEST(EngineCacheModel, SlotContextBoundsWhatAPromptLeaves) {
  World w;
  w.model.SetCapacity(0, {.kind = EngineCacheKind::kSlots, .slots = 1, .tokens = 3 * 16});
  const auto a = Chain(100, 5);
  w.Serve(0, a);
  EXPECT_EQ(w.model.Occupancy(0).tokens, 3 * 16);
}

// A paged pool evicts by the CLOCK the simulated and emulated engines use (prefix_cache.h, an
// approximate LRU); whatever it evicts leaves the index, so the index holds what the pool does.
TEST(EngineCacheModel, PagedCacheEvictsBeyondCapacityAndTheIndexFollows) {
  World w;
  w.model.SetCapacity(1, {.kind = EngineCacheKind::kPaged, .tokens = 8 * 16, .source = CapacitySource::kConfig});
  const auto a = Chain(100, 4), b = Chain(200, 4), c = Chain(300, 4);
  w.Serve(1, a);
  w.Serve(1, b);
  EXPECT_EQ(w.Held(1, a), 4u);
  EXPECT_EQ(w.model.Occupancy(1).evictions, 0u) << "8 blocks fit";
  w.Serve(1, a);
  w.Serve(1, c);
  EXPECT_EQ(w.Held(1, c), 4u) << "the newest prompt stays";
  EXPECT_EQ(w.model.Occupancy(1).tokens, 8 * 16);
  EXPECT_EQ(w.model.Occupancy(1).evictions, 4u);
  EXPECT_EQ(w.index.entries(), 8u) << "12 blocks served, 4 evicted: the index forgot those 4";
}

TEST(EngineCacheModel, UnknownCapacityLeavesTheIndexToItsTtl) {
  World w;
  const auto a = Chain(100, 4), b = Chain(200, 4), c = Chain(300, 4);
  w.Serve(2, a);
  w.Serve(2, b);
  w.Serve(2, c);
  EXPECT_EQ(w.Held(2, a), 4u);
  EXPECT_EQ(w.model.Occupancy(2).capacity.kind, EngineCacheKind::kUnknown);
  // A zero-sized capacity is no capacity, and a bound is applied to what is set.
  w.model.SetCapacity(2, {.kind = EngineCacheKind::kSlots, .slots = 0});
  EXPECT_EQ(w.model.Occupancy(2).capacity.kind, EngineCacheKind::kUnknown);
  w.model.SetCapacity(2, {.kind = EngineCacheKind::kSlots, .slots = 1 << 20});
  EXPECT_EQ(w.model.Occupancy(2).capacity.slots, kMaxEngineSlots);
}

TEST(EngineCacheModel, ANewShapeStartsEmptyAndTheSameShapeKeepsTheModel) {
  World w;
  const EngineCacheCapacity two{.kind = EngineCacheKind::kSlots, .slots = 2, .source = CapacitySource::kConfig};
  w.model.SetCapacity(0, two);
  w.Serve(0, Chain(100, 4));
  EngineCacheCapacity from_engine = two;
  from_engine.source = CapacitySource::kEngine;
  w.model.SetCapacity(0, from_engine);
  EXPECT_EQ(w.model.Occupancy(0).used_slots, 1);
  EXPECT_EQ(w.model.Occupancy(0).capacity.source, CapacitySource::kEngine);
  w.model.SetCapacity(0, {.kind = EngineCacheKind::kSlots, .slots = 4, .source = CapacitySource::kEngine});
  EXPECT_EQ(w.model.Occupancy(0).used_slots, 0);
  w.model.Forget(0);
  EXPECT_EQ(w.model.Occupancy(0).capacity.kind, EngineCacheKind::kUnknown);
}

}  // namespace
}  // namespace myriad::policy
