#include "sim/prefix_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "sim/event_queue.h"

namespace myriad::sim {
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

TEST(EventQueue, OrdersByTimeThenScheduling) {
  EventQueue q;
  std::vector<int> order;
  q.At(20, [&] { order.push_back(3); });
  q.At(10, [&] { order.push_back(1); });
  q.At(10, [&] { order.push_back(2); q.After(0, [&] { order.push_back(4); }); });
  q.At(30, [&] { order.push_back(5); });
  q.RunUntil(25);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 4, 3}));
  EXPECT_EQ(q.now(), 20);
  EXPECT_EQ(q.pending(), 1u);
  q.At(5, [&] { order.push_back(6); });  // the past is clamped to now
  q.RunUntil(100);
  EXPECT_EQ(order.back(), 5);
  EXPECT_EQ(order[4], 6);
}

}  // namespace
}  // namespace myriad::sim
