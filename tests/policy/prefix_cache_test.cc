#include "policy/prefix_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "core/rng.h"


namespace myriad::policy {
namespace {

TEST(PrefixCache, MatchesLeadingBlocks) {
  PrefixCache c;
  std::vector<BlockKey> a = {1, 2, 3}, b = {1, 2, 9};
  EXPECT_EQ(c.Insert(a, 10), 0u);
  EXPECT_EQ(c.MatchAndTouch(b), 2u);  // stops at the first missing block
  EXPECT_EQ(c.Count(std::vector<BlockKey>{9, 1}), 0u);
  EXPECT_EQ(c.Insert(b, 10), 2u) << "position of the first block not already cached";
  EXPECT_EQ(c.Insert(b, 10), 3u);
  EXPECT_EQ(c.size(), 4u);
}

TEST(PrefixCache, ClockKeepsRecentlyUsedBlocksOverIdleOnes) {
  PrefixCache c;
  std::vector<BlockKey> hot = {1, 2}, cold = {10, 11, 12, 13};
  c.Insert(hot, 6);
  c.Insert(cold, 6);
  std::vector<BlockKey> evicted;
  // Keep touching the hot blocks while new blocks stream through a full cache.
  for (BlockKey k = 100; k < 140; ++k) {
    EXPECT_EQ(c.MatchAndTouch(hot), 2u) << "a block touched every round is never the victim";
    c.Insert(std::vector<BlockKey>{k}, 6, &evicted);
    EXPECT_EQ(c.size(), 6u);
  }
  for (BlockKey k : cold) EXPECT_NE(std::find(evicted.begin(), evicted.end(), k), evicted.end()) << k;
  EXPECT_EQ(c.evictions(), evicted.size());
  c.Shrink(1, &evicted);
  EXPECT_EQ(c.size(), 1u);
  c.Insert(hot, 0, &evicted);
  EXPECT_EQ(c.size(), 0u);
}

// Random prompts through a cache whose capacity moves: what the cache reports must be exactly
// what was inserted and not yet evicted (exercises growth, probe runs and the backward shift
// of erase), and a prompt's blocks stay findable while the cache has room for them.
TEST(PrefixCache, ContentsMatchInsertsLessEvictions) {
  PrefixCache c;
  Rng rng(7);
  std::set<BlockKey> present;
  std::vector<BlockKey> evicted;
  for (int round = 0; round < 20000; ++round) {
    std::vector<BlockKey> prompt;
    const auto len = 1 + rng.Below(12);
    const BlockKey base = rng.Below(3000) * 100;  // shared prefixes: keys base+1, base+2, ...
    for (uint64_t i = 0; i < len; ++i) prompt.push_back(base + i + 1);
    const size_t capacity = 200 + rng.Below(1800);
    evicted.clear();
    const size_t first_new = c.Insert(prompt, capacity, &evicted);
    for (size_t i = 0; i < prompt.size(); ++i) {
      if (present.insert(prompt[i]).second) {
        EXPECT_GE(i, first_new);
      }
    }
    // A block evicted to make room for an earlier block of the same prompt comes back when
    // its own turn comes.
    const auto is_back = [&](BlockKey k) {
      return std::find(prompt.begin(), prompt.end(), k) != prompt.end() &&
             c.Count(std::vector<BlockKey>{k}) == 1;
    };
    for (BlockKey k : std::set<BlockKey>(evicted.begin(), evicted.end())) {
      if (is_back(k)) continue;
      ASSERT_EQ(present.erase(k), 1u) << "evicted a block it did not hold: " << k;
      EXPECT_EQ(c.Count(std::vector<BlockKey>{k}), 0u) << k;
    }
    ASSERT_EQ(c.size(), present.size());
    if (!evicted.empty()) {  // Insert evicts only to make room for new blocks
      ASSERT_LE(c.size(), capacity);
    }
    if (round % 1000 == 0) {
      for (BlockKey k : present) ASSERT_EQ(c.Count(std::vector<BlockKey>{k}), 1u) << k;
    }
  }
  evicted.clear();
  c.Clear(&evicted);
  EXPECT_EQ(std::set<BlockKey>(evicted.begin(), evicted.end()), present);
  EXPECT_TRUE(std::is_sorted(evicted.begin(), evicted.end()));
  EXPECT_EQ(c.size(), 0u);
}

// A slot keeps 61 bits of the key's hash (key * M) and gets the top three back from where the
// block sits. Keys whose hashes differ only in those three bits must stay distinct: they are
// found, counted and evicted as themselves, through growth and backward shifts.
TEST(PrefixCache, KeysWhoseHashesShareTheLow61BitsStayDistinct) {
  constexpr uint64_t kMix = 0x9E3779B97F4A7C15ull;  // the cache's multiplier
  uint64_t inverse = kMix;
  for (int i = 0; i < 5; ++i) inverse *= 2 - kMix * inverse;
  ASSERT_EQ(kMix * inverse, 1u);
  Rng rng(3);
  PrefixCache c;
  std::set<BlockKey> present;
  std::vector<BlockKey> evicted;
  for (int round = 0; round < 3000; ++round) {
    // Eight keys whose hashes differ only in the top three bits, and a few ordinary ones.
    const uint64_t low = rng.Next() >> 3;
    std::vector<BlockKey> keys;
    for (uint64_t top = 0; top < 8; ++top) keys.push_back(((top << 61) | low) * inverse);
    for (int i = 0; i < 4; ++i) keys.push_back(rng.Next());
    const size_t capacity = 100 + rng.Below(4000);
    for (BlockKey k : keys) {
      evicted.clear();
      c.Insert(std::vector<BlockKey>{k}, capacity, &evicted);
      present.insert(k);
      for (BlockKey e : evicted) ASSERT_EQ(present.erase(e), 1u) << "evicted a block it did not hold: " << e;
      ASSERT_EQ(c.size(), present.size());
    }
    for (BlockKey k : keys) EXPECT_EQ(c.Count(std::vector<BlockKey>{k}), present.count(k)) << k;
  }
  evicted.clear();
  c.Clear(&evicted);
  EXPECT_EQ(std::set<BlockKey>(evicted.begin(), evicted.end()), present);
  EXPECT_EQ(evicted.size(), present.size());
}

}  // namespace
}  // namespace myriad::policy
