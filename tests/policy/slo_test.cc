#include "policy/slo.h"

#include <gtest/gtest.h>

namespace myriad::policy {
namespace {

// One verdict for the simulator's metrics and the gateway's rollout windows.
TEST(SloTest, WithinTheSloIsTtftAndTpotBoth) {
  const SloTargets slo{.ttft = 2 * kSecond, .tpot = 100 * kMillisecond};
  // 11 tokens over 1 s after the first: 100 ms each.
  EXPECT_EQ(TimePerOutputToken(kSecond, 11), 100 * kMillisecond);
  EXPECT_EQ(TimePerOutputToken(kSecond, 1), -1) << "one token: no gap to time";
  EXPECT_EQ(TimePerOutputToken(kSecond, -1), -1) << "an unknown count";
  EXPECT_TRUE(MeetsSlo(slo, 2 * kSecond, 100 * kMillisecond)) << "both at the bound";
  EXPECT_FALSE(MeetsSlo(slo, 2 * kSecond + 1, 10 * kMillisecond)) << "late first token";
  EXPECT_FALSE(MeetsSlo(slo, kSecond, 100 * kMillisecond + 1)) << "a fast first token, a slow stream";
  EXPECT_TRUE(MeetsSlo(slo, kSecond, -1)) << "one token: TTFT alone";
}

}  // namespace
}  // namespace myriad::policy
