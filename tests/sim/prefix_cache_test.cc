#include "sim/prefix_cache.h"

#include <gtest/gtest.h>

#include <vector>

#include "sim/event_queue.h"

namespace myriad::sim {
namespace {

TEST(PrefixCache, MatchesLeadingBlocksAndEvictsLeastRecentlyUsed) {
  PrefixCache c;
  std::vector<BlockKey> a = {1, 2, 3}, b = {1, 2, 9}, d = {7, 8};
  c.Insert(a, 4);
  EXPECT_EQ(c.MatchAndTouch(b), 2u);  // stops at the first missing block
  c.Insert(d, 4);                     // 5 blocks > 4: the LRU block (3) goes
  EXPECT_EQ(c.size(), 4u);
  EXPECT_EQ(c.MatchAndTouch(a), 2u);
  EXPECT_EQ(c.evictions(), 1u);
  c.Shrink(1);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(c.MatchAndTouch(std::vector<BlockKey>{2}), 1u) << "the most recently used survives";
  c.Insert(a, 0);
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
