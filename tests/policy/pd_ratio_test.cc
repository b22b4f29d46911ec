#include "policy/pd_ratio.h"

#include <gtest/gtest.h>

#include "core/rng.h"

namespace myriad::policy {
namespace {

constexpr Nanos kTick = 15 * kSecond;

PoolSignals Busy(double u, int units = 10) { return {.units = units, .utilisation = u}; }

TEST(PdRatioTest, SustainedImbalanceSwitchesAfterConfirmation) {
  PdRatioController c({.confirm = 2 * kMinute, .dwell = 5 * kMinute});
  Nanos first = -1;
  for (Nanos t = 0; t <= 10 * kMinute && first < 0; t += kTick) {
    if (auto s = c.Decide(Busy(0.95), Busy(0.3), t)) {
      EXPECT_EQ(s->from, PdSide::kDecode);
      EXPECT_EQ(s->to, PdSide::kPrefill);
      EXPECT_NE(s->reason.find("prefill pressure 0.95"), std::string::npos) << s->reason;
      first = t;
    }
  }
  EXPECT_EQ(first, 2 * kMinute);
}

TEST(PdRatioTest, DwellSpacesSwitches) {
  PdRatioController c({.confirm = kMinute, .dwell = 5 * kMinute});
  std::vector<Nanos> at;
  for (Nanos t = 0; t <= 20 * kMinute; t += kTick) {
    if (c.Decide(Busy(0.3), Busy(0.99), t)) at.push_back(t);
  }
  ASSERT_GE(at.size(), 2u);
  for (size_t i = 1; i < at.size(); ++i) EXPECT_GE(at[i] - at[i - 1], 5 * kMinute);
}

TEST(PdRatioTest, NoiseAroundTheThresholdsNeverFlaps) {
  // Both pools hover around the thresholds: each dip back resets the confirmation clock, so
  // noise of a tick's length never adds up to a switch.
  PdRatioController c({.high = 0.85, .low = 0.5, .confirm = 2 * kMinute, .dwell = 5 * kMinute});
  Rng rng(7);
  int switches = 0;
  for (Nanos t = 0; t <= 6 * kHour; t += kTick) {
    const double p = 0.8 + 0.1 * rng.Uniform();  // crosses 0.85 about half the time
    const double d = 0.45 + 0.1 * rng.Uniform();  // crosses 0.5 about half the time
    if (c.Decide(Busy(p), Busy(d), t)) ++switches;
  }
  EXPECT_EQ(switches, 0);
}

TEST(PdRatioTest, LatencyAndQueueCountAsPressureAndMinUnitsHolds) {
  PdRatioOptions o{.queue_high = 4, .confirm = 0, .dwell = 0, .min_units = 2};
  EXPECT_DOUBLE_EQ(Pressure({.units = 1, .utilisation = 0.2, .queue_per_unit = 8}, o), 2.0);
  EXPECT_DOUBLE_EQ(Pressure({.units = 1, .utilisation = 0.2, .latency_over_slo = 1.5}, o), 1.5);
  PdRatioController c(o);
  const PoolSignals pressed{.units = 4, .utilisation = 0.2, .latency_over_slo = 1.4};
  c.Decide(pressed, Busy(0.1, 2), 0);
  EXPECT_FALSE(c.Decide(pressed, Busy(0.1, 2), kTick)) << "decode already at min_units";
  c.Decide(pressed, Busy(0.1, 3), 2 * kTick);
  EXPECT_TRUE(c.Decide(pressed, Busy(0.1, 3), 3 * kTick));
}

}  // namespace
}  // namespace myriad::policy
