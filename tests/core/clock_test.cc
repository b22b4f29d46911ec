// The clock seam: a ManualClock moves only when told and wakes exactly the sleepers whose
// deadline it passed; the RealClock sleeps in real time and wakes early on Wake().
#include "core/clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace myriad {
namespace {

TEST(ManualClock, MovesOnlyWhenAdvancedAndNeverBack) {
  ManualClock clock(5 * kSecond);
  EXPECT_EQ(clock.Now(), 5 * kSecond);
  clock.Advance(250 * kMillisecond);
  EXPECT_EQ(clock.Now(), 5250 * kMillisecond);
  clock.Advance(-kSecond);
  EXPECT_EQ(clock.Now(), 5250 * kMillisecond);
  clock.Advance(kNanosInfinite);  // saturates instead of wrapping
  EXPECT_EQ(clock.Now(), kNanosInfinite);
}

TEST(ManualClock, AdvanceWakesOnlySleepersWhoseDeadlinePassed) {
  ManualClock clock(0);
  auto early = clock.NewSleeper(), late = clock.NewSleeper();
  std::atomic<int> woke_early{-1}, woke_late{-1};
  std::thread a([&] { woke_early = early->SleepUntil(2 * kSecond); });
  std::thread b([&] { woke_late = late->SleepFor(5 * kSecond); });
  ASSERT_TRUE(clock.AwaitSleepers(2));
  clock.Advance(2 * kSecond);
  // Uncounted synchronously by Advance: the count never shows a woken loop as still asleep.
  EXPECT_EQ(clock.sleepers_asleep(), 1);
  a.join();
  EXPECT_EQ(woke_early.load(), 0);  // the deadline, not a Wake
  EXPECT_EQ(woke_late.load(), -1);
  clock.Advance(2999 * kMillisecond);
  EXPECT_EQ(clock.sleepers_asleep(), 1);
  EXPECT_EQ(woke_late.load(), -1);
  clock.Advance(1 * kMillisecond);
  b.join();
  EXPECT_EQ(woke_late.load(), 0);
  EXPECT_EQ(clock.sleepers_asleep(), 0);
}

TEST(ManualClock, WakeEndsASleepAndIsNeverLost) {
  ManualClock clock;
  auto s = clock.NewSleeper();
  s->Wake();  // before the sleep: the sleep that follows returns at once
  EXPECT_TRUE(s->SleepFor(kHour));
  EXPECT_FALSE(s->SleepUntil(clock.Now()));  // consumed; a deadline already reached returns
  std::atomic<bool> woken{false};
  std::thread t([&] { woken = s->SleepFor(kNanosInfinite); });
  ASSERT_TRUE(clock.AwaitSleepers(1));
  s->Wake();
  t.join();
  EXPECT_TRUE(woken.load());
  EXPECT_EQ(clock.sleepers_asleep(), 0);
}

TEST(ManualClock, AwaitSleepersGivesUpAfterItsRealLimit) {
  ManualClock clock;
  EXPECT_FALSE(clock.AwaitSleepers(1, 20 * kMillisecond));
}

TEST(RealClock, SleepsInRealTimeAndWakesEarly) {
  RealClock clock;
  auto s = clock.NewSleeper();
  const Nanos start = clock.Now();
  EXPECT_FALSE(s->SleepFor(20 * kMillisecond));
  EXPECT_GE(clock.Now() - start, 20 * kMillisecond);
  std::thread waker([&] { s->Wake(); });
  EXPECT_TRUE(s->SleepFor(kNanosInfinite));
  waker.join();
  EXPECT_EQ(OrDefaultClock(nullptr), DefaultClock());
}

}  // namespace
}  // namespace myriad
