// llama-server's slot choice and prompt reuse on their own: the decisions the emulator's
// llama-server profile asks policy::SlotCache for.
#include "policy/slot_cache.h"

#include <gtest/gtest.h>

#include <vector>

namespace myriad::policy {
namespace {

std::vector<uint32_t> Seq(uint32_t first, int n) {
  std::vector<uint32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(first + static_cast<uint32_t>(i));
  return v;
}

TEST(SlotCacheTest, FreshSlotsGoLastFirstAsLlamaServersLeastRecentlyUsedTie) {
  SlotCache c(2, 0.5);
  // Both never used (t_last_used -1): llama-server's `<=` keeps the later slot.
  EXPECT_EQ(c.Pick(Seq(1, 10)), 1);
  c.Start(1, Seq(1, 10));
  EXPECT_EQ(c.Pick(Seq(100, 10)), 0);
  c.Start(0, Seq(100, 10));
  EXPECT_FALSE(c.Pick(Seq(200, 10)).has_value()) << "every slot busy: the request is deferred";
}

TEST(SlotCacheTest, SimilarPromptTakesTheSlotHoldingItsPrefix) {
  SlotCache c(3, 0.5);
  c.Start(0, Seq(1, 10));
  c.Release(0, Seq(1, 10), 5);
  c.Start(1, Seq(50, 10));
  c.Release(1, Seq(50, 10), 6);
  // 8 of 12 tokens shared with slot 0 (0.67 > 0.5), though slot 2 was never used.
  std::vector<uint32_t> p = Seq(1, 8);
  p.push_back(900);
  p.push_back(901);
  p.push_back(902);
  p.push_back(903);
  ASSERT_EQ(c.Pick(p), 0);
  EXPECT_EQ(c.Start(0, p), 8);
  EXPECT_TRUE(c.processing(0));
}

TEST(SlotCacheTest, BelowTheSimilarityTheLeastRecentlyReleasedSlotIsOverwritten) {
  SlotCache c(2, 0.5);
  c.Start(1, Seq(1, 10));
  c.Release(1, Seq(1, 10), 10);
  c.Start(0, Seq(100, 10));
  c.Release(0, Seq(100, 10), 20);
  // Shares 4 of 10 with slot 1: not above 0.5, so the older slot (1, released at 10) goes.
  std::vector<uint32_t> p = Seq(1, 4);
  for (uint32_t t = 500; t < 506; ++t) p.push_back(t);
  ASSERT_EQ(c.Pick(p), 1);
  EXPECT_EQ(c.Start(1, p), 4) << "the common prefix is still reused";
  c.Release(1, p, 30);
  EXPECT_EQ(c.Pick(Seq(1, 10)), 0) << "slot 0 is now the least recently used";
}

TEST(SlotCacheTest, ZeroSimilarityPicksByAgeOnly) {
  SlotCache c(2, 0.0);
  c.Start(1, Seq(1, 10));
  c.Release(1, Seq(1, 10), 10);
  c.Start(0, Seq(100, 10));
  c.Release(0, Seq(100, 10), 20);
  EXPECT_EQ(c.Pick(Seq(100, 10)), 1) << "slot 0 holds the prompt, but slot 1 is older";
}

TEST(SlotCacheTest, AWholePromptHitStillComputesItsLastToken) {
  SlotCache c(1, 0.5);
  std::vector<uint32_t> held = Seq(1, 10);
  held.push_back(77);  // the output the slot also keeps
  c.Start(0, Seq(1, 10));
  c.Release(0, held, 1);
  EXPECT_EQ(c.Start(0, Seq(1, 10)), 9);
  c.Release(0, Seq(1, 10), 2);
  c.ClearIdle();
  EXPECT_TRUE(c.tokens(0).empty());
  EXPECT_EQ(c.Start(0, Seq(1, 10)), 0);
}

}  // namespace
}  // namespace myriad::policy
