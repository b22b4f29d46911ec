#include "core/log_throttle.h"

#include <gtest/gtest.h>

namespace myriad {
namespace {

TEST(LogThrottle, OneLinePerKeyPerIntervalAndTheHeldBackCountWithTheNext) {
  LogThrottle t(10 * kSecond);
  uint64_t held = 99;
  ASSERT_TRUE(t.Admit(1, 5 * kSecond, &held));
  EXPECT_EQ(held, 0u);
  EXPECT_FALSE(t.Admit(1, 6 * kSecond, &held));
  EXPECT_FALSE(t.Admit(1, 15 * kSecond - 1, &held));
  ASSERT_TRUE(t.Admit(2, 6 * kSecond, &held));  // another key has its own budget
  EXPECT_EQ(held, 0u);
  ASSERT_TRUE(t.Admit(1, 15 * kSecond, &held));
  EXPECT_EQ(held, 2u);
  ASSERT_TRUE(t.Admit(1, 40 * kSecond, &held));
  EXPECT_EQ(held, 0u);
}

}  // namespace
}  // namespace myriad
