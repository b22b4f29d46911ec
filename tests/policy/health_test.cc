#include <gtest/gtest.h>

#include <vector>

#include "core/rng.h"
#include "policy/health.h"
#include "policy/recompute_limiter.h"
#include "policy/straggler.h"

namespace myriad::policy {
namespace {

std::vector<double> Window(Rng& rng, int ranks, double sigma, int slow_rank, double factor) {
  std::vector<double> t(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) t[static_cast<size_t>(r)] = rng.LogNormal(0, sigma) * (r == slow_rank ? factor : 1.0);
  return t;
}

TEST(Straggler, NoiseAloneIsNeverFlagged) {
  StragglerDetector d(144, StragglerOptions{});
  Rng rng(5);
  int flagged = 0;
  for (int w = 0; w < 5000; ++w) flagged += static_cast<int>(d.Observe(Window(rng, 144, 0.03, -1, 1)).size());
  EXPECT_EQ(flagged, 0);
}

TEST(Straggler, ASlowRankIsFlaggedAfterTheConfiguredWindowsOnce) {
  StragglerOptions o;
  o.windows = 3;
  StragglerDetector d(32, o);
  Rng rng(6);
  for (int w = 1; w <= 10; ++w) {
    const auto f = d.Observe(Window(rng, 32, 0.03, 7, 1.4));
    if (w == 3) {
      ASSERT_EQ(f.size(), 1u);
      EXPECT_EQ(f[0], 7);
    } else {
      EXPECT_TRUE(f.empty()) << "window " << w;  // once per streak
    }
  }
  EXPECT_GT(d.excess(7), 0.3);
  EXPECT_LT(d.excess(0), 0.1);
  d.Reset();
  EXPECT_EQ(d.excess(7), 0);
}

TEST(Straggler, OneNoisyWindowOrASmallExcessIsNotAStraggler) {
  StragglerDetector d(32, StragglerOptions{});
  Rng rng(7);
  std::vector<double> spike = Window(rng, 32, 0.03, 3, 3.0);
  EXPECT_TRUE(d.Observe(spike).empty());
  for (int w = 0; w < 100; ++w) {
    EXPECT_TRUE(d.Observe(Window(rng, 32, 0.03, -1, 1)).empty());
    if (w % 3 == 0) {
      EXPECT_TRUE(d.Observe(spike).empty());  // never three in a row
    }
  }
  // 5% slower, well below the 10% minimum excess: ignored however long it lasts.
  for (int w = 0; w < 100; ++w) EXPECT_TRUE(d.Observe(Window(rng, 32, 0.005, 9, 1.05)).empty());
}

TEST(RecomputeLimiter, ShedsLowPriorityFirstAndRefills) {
  RecomputeLimiter l(RecomputeLimiterOptions{.tokens_per_s = 1000, .burst_seconds = 5});
  ASSERT_EQ(l.depth(), 5000);
  // Two levels below the top must leave half the bucket.
  EXPECT_TRUE(l.Admit(0, 2000, 2));
  EXPECT_FALSE(l.Admit(0, 1000, 2));  // 3000 - 1000 < 2500
  EXPECT_TRUE(l.Admit(0, 1500, 1));   // one level: reserve 1250
  EXPECT_FALSE(l.Admit(0, 1000, 1));
  EXPECT_TRUE(l.Admit(0, 1500, 0));   // the top class may empty it
  EXPECT_FALSE(l.Admit(0, 1, 0));
  EXPECT_EQ(l.shed(), 3u);
  EXPECT_TRUE(l.Admit(3 * kSecond, 400, 2));  // refilled 3000: 3000 - 400 >= 2500
  l.Charge(3 * kSecond, 4000);  // must-do work: into debt
  EXPECT_LT(l.level(), 0);
  EXPECT_FALSE(l.Admit(3 * kSecond, 1, 0));  // even the top class waits for the debt
  RecomputeLimiter off(RecomputeLimiterOptions{});
  EXPECT_TRUE(off.Admit(0, 1e12, 5));
}

}  // namespace
}  // namespace myriad::policy
