#include "policy/unit_sleep.h"

#include <gtest/gtest.h>

namespace myriad::policy {
namespace {

TEST(UnitSleepTest, SleepsUpToTheCapAndReleasesTheRest) {
  const SleepOptions o{.mode = SleepMode::kHost, .max_sleeping = 5};
  EXPECT_EQ(UnitsToSleep(3, 0, o), 3);
  EXPECT_EQ(UnitsToSleep(3, 4, o), 1);
  EXPECT_EQ(UnitsToSleep(3, 5, o), 0);
  EXPECT_EQ(UnitsToSleep(3, 0, SleepOptions{.mode = SleepMode::kOff, .max_sleeping = 5}), 0);
}

TEST(UnitSleepTest, ScaleOutWakesSleepersFirst) {
  EXPECT_EQ(UnitsToWake(4, 6), 4);
  EXPECT_EQ(UnitsToWake(4, 1), 1);
  EXPECT_EQ(UnitsToWake(4, 0), 0);
}

TEST(UnitSleepTest, WakeIsAPcieReloadPlusWarmupNotAColdStart) {
  // DeepSeek-V3 FP8 on 32 GPUs: about 21 GB a GPU, back over 25 GB/s of PCIe in 0.85 s.
  const SleepOptions host{.mode = SleepMode::kHost, .pcie_bytes_per_s = 25e9, .warmup = 60 * kSecond,
                          .readiness = 5 * kSecond};
  EXPECT_EQ(WakeTime(21.25e9, host), SecondsToNanos(0.85) + 65 * kSecond);
  EXPECT_FALSE(SleepHoldsGpus(host));
  // Weights kept on the GPU: nothing to reload, but the GPUs stay held (and paid) asleep.
  SleepOptions gpu = host;
  gpu.mode = SleepMode::kGpu;
  EXPECT_EQ(WakeTime(21.25e9, gpu), 65 * kSecond);
  EXPECT_TRUE(SleepHoldsGpus(gpu));
}

}  // namespace
}  // namespace myriad::policy
