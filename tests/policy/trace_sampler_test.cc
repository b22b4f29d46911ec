#include "policy/trace_sampler.h"

#include <gtest/gtest.h>

#include "core/rng.h"

namespace myriad::policy {
namespace {

TEST(TraceSamplerTest, HeadFollowsTheParentsFlagElseTheRatioOfTraceIds) {
  TraceSampler half(TraceSamplerOptions{.sample_ratio = 0.5});
  EXPECT_TRUE(half.Head(true, ~uint64_t{0}));
  EXPECT_FALSE(half.Head(false, 0));
  int kept = 0;
  for (uint64_t i = 0; i < 10000; ++i) kept += half.Head(std::nullopt, Mix64(i));
  EXPECT_NEAR(kept, 5000, 300);
  // The same id gets the same answer every time (every process agrees).
  EXPECT_EQ(half.Head(std::nullopt, Mix64(7)), half.Head(std::nullopt, Mix64(7)));
  TraceSampler none(TraceSamplerOptions{.sample_ratio = 0});
  TraceSampler all(TraceSamplerOptions{.sample_ratio = 1});
  for (uint64_t i = 0; i < 1000; ++i) {
    EXPECT_FALSE(none.Head(std::nullopt, Mix64(i)));
    EXPECT_TRUE(all.Head(std::nullopt, Mix64(i)));
  }
  EXPECT_TRUE(all.Head(std::nullopt, ~uint64_t{0}));
}

TEST(TraceSamplerTest, ErrorsSlowRequestsAndOptionallyRejectionsAreKeptWhateverTheHeadSaid) {
  TraceSampler s(TraceSamplerOptions{.sample_ratio = 0, .slow_threshold = 100 * kMillisecond});
  EXPECT_EQ(s.Keep(false, 200, 10 * kMillisecond, 50 * kMillisecond), SampleReason::kDropped);
  EXPECT_EQ(s.Keep(true, 200, 10 * kMillisecond, 50 * kMillisecond), SampleReason::kHead);
  EXPECT_EQ(s.Keep(false, 502, -1, kMillisecond), SampleReason::kError);
  EXPECT_EQ(s.Keep(false, 504, -1, kMillisecond), SampleReason::kError);
  EXPECT_EQ(s.Keep(false, 429, -1, kMillisecond), SampleReason::kDropped);
  EXPECT_EQ(s.Keep(false, 200, 150 * kMillisecond, 200 * kMillisecond), SampleReason::kSlow);
  EXPECT_EQ(s.Keep(false, 200, 10 * kMillisecond, 101 * kMillisecond), SampleReason::kSlow);
  EXPECT_EQ(s.Keep(false, 400, -1, kMillisecond), SampleReason::kDropped);
  TraceSampler rejections(TraceSamplerOptions{.sample_ratio = 0, .keep_rejected = true});
  EXPECT_EQ(rejections.Keep(false, 429, -1, kMillisecond), SampleReason::kRejected);
  // No threshold: nothing is slow.
  EXPECT_EQ(rejections.Keep(false, 200, 3600 * kSecond, 3600 * kSecond), SampleReason::kDropped);
}

}  // namespace
}  // namespace myriad::policy
