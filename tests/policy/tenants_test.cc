#include "policy/tenants.h"

#include <gtest/gtest.h>

#include <cmath>

#include "policy/tenant_fill.h"

namespace myriad::policy {
namespace {

TEST(Tenants, TokenBucketQuota) {
  TenantPolicy p({{.name = "a", .quota_tokens_per_s = 1000, .burst_tokens = 2000}}, {});
  EXPECT_EQ(p.Admit(0, 1500, 0, 0), "");
  EXPECT_EQ(p.Admit(0, 1000, 0, 0), "tenant_quota") << "500 left in the bucket";
  EXPECT_EQ(p.Admit(0, 1000, 0, kSecond / 2), "") << "refilled by 500 tokens in 0.5 s";
  EXPECT_EQ(p.Admit(0, 5000, 0, 10 * kSecond), "") << "larger than the bucket: allowed when it is full";
  EXPECT_EQ(p.Admit(0, 10, 0, 10 * kSecond), "tenant_quota");
}

TEST(Tenants, FairShareShedsTheFloodingTenantOnlyUnderContention) {
  TenantOptions o{.fairness = true, .contention = 0.5, .usage_window = 10 * kSecond};
  TenantPolicy p({{.name = "small"}, {.name = "big"}}, o);
  Nanos t = 0;
  // Uncontended: everyone admitted however much they send.
  for (int i = 0; i < 100; ++i, t += 10 * kMillisecond) {
    EXPECT_EQ(p.Admit(1, 10000, 0.1, t), "");
    if (i % 10 == 0) {
      EXPECT_EQ(p.Admit(0, 1000, 0.1, t), "");
    }
  }
  // Contended: the big tenant is far over half of the recent usage; the small one is not.
  EXPECT_EQ(p.Admit(1, 10000, 0.8, t), "tenant_over_fair_share");
  EXPECT_EQ(p.Admit(0, 1000, 0.8, t), "");
  EXPECT_GT(p.UsageRate(1, t), p.FairShare(1, t));
  EXPECT_LT(p.UsageRate(0, t), p.FairShare(0, t));
}

TEST(Tenants, LowPriorityShedFirstUnderHeavyContention) {
  TenantPolicy p({{.name = "batch", .priority = 0}, {.name = "interactive", .priority = 10}},
                 TenantOptions{.fairness = true, .contention = 0.5});
  EXPECT_EQ(p.Admit(1, 100, 0.1, 0), "");
  EXPECT_EQ(p.Admit(0, 100, 0.1, 0), "");
  EXPECT_EQ(p.Admit(0, 100, 1.5, kMillisecond), "tenant_low_priority");
  EXPECT_NE(p.Admit(1, 100, 1.5, kMillisecond), "tenant_low_priority");
}

TEST(Tenants, WithoutFairnessNothingIsShed) {
  TenantPolicy p({{.name = "a"}, {.name = "b"}}, TenantOptions{.fairness = false});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(p.Admit(1, 100000, 5.0, i * kMillisecond), "");
  EXPECT_EQ(p.size(), 2u);
  EXPECT_EQ(p.config(7).name, "tenant7") << "an unconfigured tenant gets the defaults";
  EXPECT_EQ(p.Admit(7, 100, 0.1, kSecond), "");
  EXPECT_EQ(p.size(), 8u);
}

TEST(Tenants, FillIsAdmittedOnlyIntoHeadroomWithOrWithoutFairness) {
  for (bool fairness : {false, true}) {
    TenantPolicy p({{.name = "interactive"}, {.name = "batch", .priority = kFillPriority}},
                   TenantOptions{.fairness = fairness, .contention = 0.3});
    EXPECT_EQ(p.Admit(1, 1000, 0.2, 0), "") << "idle capacity: fill soaks it up";
    EXPECT_EQ(p.Admit(1, 1000, 0.3, 0), "") << "at the bound";
    EXPECT_EQ(p.Admit(1, 1000, 0.31, 0), kTenantNoHeadroom) << "past the headroom, before any contention";
    EXPECT_EQ(p.Admit(0, 1000, 0.31, 0), "") << "the interactive tenant is untouched there";
    // A refused fill request is not charged: its usage is what was admitted.
    EXPECT_NEAR(p.UsageRate(1, 0), 2000.0 / 10, 1e-9);
  }
}

// The decode side's signal: fill stays out of a decode pool near its TPOT SLO while the prompt
// side has room; no other class reads it.
TEST(Tenants, FillIsRefusedWhenTheDecodeSideIsPressed) {
  TenantPolicy p({{.name = "interactive"}, {.name = "batch", .priority = kFillPriority}},
                 TenantOptions{.contention = 0.5});
  EXPECT_EQ(p.Admit(1, 1000, 0.1, 0, 0.4), "");
  EXPECT_EQ(p.Admit(1, 1000, 0.1, 0, 0.5), "") << "at the bound";
  EXPECT_EQ(p.Admit(1, 1000, 0.1, 0, 0.9), kTenantNoHeadroom) << "TTFT has room, TPOT does not";
  EXPECT_EQ(p.Admit(0, 1000, 0.1, 0, 5.0), "") << "the interactive tenant is untouched";
}

TEST(Tenants, DecodePressureIsTheRecentTpotOverTheSlo) {
  DecodePressure d(100 * kMillisecond, 10 * kSecond);
  EXPECT_EQ(d.Load(0), 0) << "nothing finished yet";
  d.Observe(0, 40 * kMillisecond);
  d.Observe(0, -1);  // a one-token answer has no TPOT
  EXPECT_DOUBLE_EQ(d.Load(0), 0.4);
  d.Observe(0, 80 * kMillisecond);
  EXPECT_DOUBLE_EQ(d.Load(0), 0.6);
  // Newer samples weigh more: one window later, a 100 ms sample counts e times the older two.
  d.Observe(10 * kSecond, 100 * kMillisecond);
  const double e = std::exp(1.0);
  EXPECT_NEAR(d.Load(10 * kSecond), (0.4 + 0.8 + e * 1.0) / (2 + e), 1e-12);
  // Silence: the mean holds while the samples are recent, then nothing is pressed.
  EXPECT_NEAR(d.Load(20 * kSecond), (0.4 + 0.8 + e * 1.0) / (2 + e), 1e-12);
  EXPECT_EQ(d.Load(200 * kSecond), 0);
}

TEST(Tenants, FillIsRefusedBeforeItsQuotaIsSpent) {
  TenantPolicy p({{.name = "batch", .priority = kFillPriority, .quota_tokens_per_s = 1000, .burst_tokens = 1000}},
                 TenantOptions{.contention = 0.5});
  EXPECT_EQ(p.Admit(0, 1000, 0.9, 0), kTenantNoHeadroom);
  EXPECT_EQ(p.Admit(0, 1000, 0.1, 0), "") << "the bucket was left full";
}

}  // namespace
}  // namespace myriad::policy
