// The admission pipeline on hand-made states: the order of its steps, what a rejection at each
// leaves untouched, and how retries differ from new requests.
#include "policy/admission.h"

#include <gtest/gtest.h>

#include <vector>

#include "perf/step_model.h"

namespace myriad::policy {
namespace {

class AdmissionTest : public ::testing::Test {
 protected:
  AdmissionTest()
      : model_(*perf::StepModel::Create(*perf::FindGpu("H200"), *perf::FindModel("DeepSeek-V3"),
                                        {.tp = 1, .dp = 32, .ep = 32, .nodes = 4}, perf::Fabric{})),
        cost_(model_, 16384),
        router_(RouterOptions{.policy = RoutingPolicy::kKvAware, .block_tokens = 512}, &index_) {
    blocks_.resize(4);
    for (size_t i = 0; i < blocks_.size(); ++i) blocks_[i] = 5000 + i;
  }

  std::vector<Candidate> Units(int n, HolderId first = 0) {
    std::vector<Candidate> c(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      c[static_cast<size_t>(i)].holder = first + static_cast<HolderId>(i);
      c[static_cast<size_t>(i)].cost = &cost_;
    }
    return c;
  }

  AdmissionRequest Req(uint32_t tenant = 0, bool retry = false) {
    return AdmissionRequest{.blocks = blocks_, .input_tokens = 4 * 512, .output_tokens = 100, .tenant = tenant,
                            .tenant_tokens = 4 * 512 + 100, .now = kSecond, .retry = retry};
  }

  // A tenant whose bucket holds one request of Req()'s size, then nothing for a long while.
  static TenantPolicy OneRequestTenant() {
    return TenantPolicy({TenantConfig{.name = "small", .quota_tokens_per_s = 1e-3, .burst_tokens = 4 * 512 + 100}},
                        TenantOptions{});
  }

  // Whether `holder` has a (provisional) entry for the prompt's first block.
  bool Holds(HolderId holder) {
    std::vector<PrefixMatch> m;
    index_.Match(blocks_, kSecond, &m);
    for (const PrefixMatch& p : m) {
      if (p.holder == holder) return true;
    }
    return false;
  }

  perf::StepModel model_;
  PrefillCost cost_;
  std::vector<BlockKey> blocks_;
  PrefixIndex index_;
  Router router_;
  Rng rng_{1};
};

TEST_F(AdmissionTest, AdmittedRequestGetsAProvisionalEntryOnItsEntryUnitOnly) {
  TenantPolicy tenants({}, TenantOptions{});
  AdmissionPipeline p(&router_, &tenants, &index_, nullptr);
  const auto entry = Units(2), decode = Units(2, 10);
  const Admission a = p.Admit(Req(), entry, decode, rng_);
  ASSERT_TRUE(a.admitted()) << a.reason;
  ASSERT_GE(a.route.entry, 0);
  ASSERT_GE(a.route.decode, 0);
  EXPECT_TRUE(Holds(entry[static_cast<size_t>(a.route.entry)].holder));
  // The decode side of the P/D pair: no prediction (its engine's events say what it keeps).
  EXPECT_FALSE(Holds(decode[static_cast<size_t>(a.route.decode)].holder));
  EXPECT_EQ(index_.entries(), blocks_.size());
  EXPECT_GT(tenants.UsageRate(0, kSecond), 0) << "the tenant was charged";
}

TEST_F(AdmissionTest, RequestTheRouterRejectsNeverChargesTheTenant) {
  TenantPolicy tenants = OneRequestTenant();
  AdmissionPipeline p(&router_, &tenants, &index_, nullptr);
  auto down = Units(2);
  for (Candidate& c : down) c.load.available = false;
  const Admission a = p.Admit(Req(), down, {}, rng_);
  EXPECT_EQ(a.reason, "no_available_unit");
  EXPECT_EQ(a.ReasonText(), "no_available_unit");
  EXPECT_EQ(tenants.UsageRate(0, kSecond), 0);
  EXPECT_EQ(index_.entries(), 0u);
  // The tenant's one request is still in its bucket.
  EXPECT_TRUE(p.Admit(Req(), Units(2), {}, rng_).admitted());
}

TEST_F(AdmissionTest, TargetRefusalComesBeforeTheTenantAndLeavesNothingBehind) {
  struct Full : AdmissionTargets {
    std::string_view Refuses(const AdmissionRequest&, const RouteDecision&) override { return "queue_full"; }
    int64_t CachedTokens(const AdmissionRequest&, const RouteDecision&) override { return 0; }
  } full;
  TenantPolicy tenants = OneRequestTenant();
  RecomputeLimiter limiter(RecomputeLimiterOptions{.tokens_per_s = 1000});
  AdmissionPipeline p(&router_, &tenants, &index_, &limiter);
  const Admission a = p.Admit(Req(), Units(2), {}, rng_, &full);
  EXPECT_EQ(a.reason, "queue_full");
  EXPECT_EQ(tenants.UsageRate(0, kSecond), 0);
  EXPECT_EQ(limiter.level(), limiter.depth());
  EXPECT_EQ(index_.entries(), 0u);
  EXPECT_EQ(p.Admit(Req(0, true), Units(2), {}, rng_, &full).ReasonText(), "retry_queue_full");
}

TEST_F(AdmissionTest, TenantRejectionLeavesNoProvisionalEntryAndNoLimiterCharge) {
  TenantPolicy tenants = OneRequestTenant();
  RecomputeLimiter limiter(RecomputeLimiterOptions{.tokens_per_s = 1e6});
  AdmissionPipeline p(&router_, &tenants, &index_, &limiter);
  ASSERT_TRUE(p.Admit(Req(), Units(2), {}, rng_).admitted());
  index_.Cleared(0);
  index_.Cleared(1);
  const double level = limiter.level();
  const Admission a = p.Admit(Req(), Units(2), {}, rng_);
  EXPECT_EQ(a.reason, "tenant_quota");
  EXPECT_EQ(index_.entries(), 0u);
  EXPECT_EQ(limiter.level(), level);
}

TEST_F(AdmissionTest, RetrySkipsTheTenant) {
  TenantPolicy tenants = OneRequestTenant();
  AdmissionPipeline p(&router_, &tenants, &index_, nullptr);
  ASSERT_TRUE(p.Admit(Req(), Units(2), {}, rng_).admitted());
  const double usage = tenants.UsageRate(0, kSecond);
  ASSERT_EQ(p.Admit(Req(), Units(2), {}, rng_).reason, "tenant_quota");
  const Admission retry = p.Admit(Req(0, true), Units(2), {}, rng_);
  EXPECT_TRUE(retry.admitted()) << retry.reason;
  EXPECT_EQ(tenants.UsageRate(0, kSecond), usage) << "a retry is not charged again";
}

TEST_F(AdmissionTest, LimiterShedsNewWorkButChargesRetries) {
  TenantPolicy tenants({}, TenantOptions{});
  // A bucket of 3000 tokens: room for one 2048-token prompt.
  RecomputeLimiter limiter(RecomputeLimiterOptions{.tokens_per_s = 100, .burst_seconds = 30});
  AdmissionPipeline p(&router_, &tenants, &index_, &limiter);
  ASSERT_TRUE(p.Admit(Req(), Units(2), {}, rng_).admitted());
  index_.Cleared(0);
  index_.Cleared(1);
  const Admission shed = p.Admit(Req(), Units(2), {}, rng_);
  EXPECT_EQ(shed.reason, "recompute_limited");
  EXPECT_EQ(index_.entries(), 0u) << "shed work leaves no provisional entry";
  EXPECT_EQ(limiter.shed(), 1u);
  const double level = limiter.level();
  const Admission retry = p.Admit(Req(0, true), Units(2), {}, rng_);
  EXPECT_TRUE(retry.admitted()) << retry.reason;
  EXPECT_EQ(limiter.shed(), 1u);
  EXPECT_LT(limiter.level(), level) << "the retry's recompute is charged";
}

TEST_F(AdmissionTest, LimiterChargesOnlyWhatTheTargetMustCompute) {
  struct Holds : AdmissionTargets {
    std::string_view Refuses(const AdmissionRequest&, const RouteDecision&) override { return {}; }
    int64_t CachedTokens(const AdmissionRequest&, const RouteDecision&) override { return 3 * 512; }
  } holds;
  TenantPolicy tenants({}, TenantOptions{});
  RecomputeLimiter limiter(RecomputeLimiterOptions{.tokens_per_s = 1000});
  AdmissionPipeline p(&router_, &tenants, &index_, &limiter);
  const double full = limiter.level();
  ASSERT_TRUE(p.Admit(Req(), Units(2), {}, rng_, &holds).admitted());
  EXPECT_DOUBLE_EQ(full - limiter.level(), 512) << "one block of four left to prefill";
}

}  // namespace
}  // namespace myriad::policy
