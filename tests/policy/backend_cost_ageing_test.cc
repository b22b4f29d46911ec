// A backend the router stops choosing sends no samples: its learned price must not freeze on
// the sample that priced it out (BackendCostModel::Age, BackendCostModelOptions::stale_after).
#include <gtest/gtest.h>

#include <vector>

#include "policy/backend_cost_model.h"
#include "policy/router.h"

namespace myriad::policy {
namespace {

// What both backends really take: llama.cpp-like, 0.75 ms a prompt token.
const PrefillCost kTruth = PrefillCost::Linear(0.02, 7.5e-4, 1e-5, 7.5e-4, 0);
// The configured model: ten times faster than the truth (a GPU-ish guess), the same shape.
const PrefillCost kPrior = PrefillCost::Linear(0.002, 7.5e-5, 1e-6, 7.5e-5, 0);

CostSample Sample(int64_t uncached, double seconds) { return {.uncached = uncached, .seconds = seconds}; }

TEST(BackendCostAgeing, AStaleFitDriftsToThePriorAndANewSampleOutweighsTheOldOnes) {
  BackendCostModel m(kPrior);
  m.Observe(Sample(2048, 50), 0);  // one stall: 30x the truth
  EXPECT_NEAR(m.cost().PrefillSeconds(2048, 0), 50, 1);
  m.Age(30 * kSecond);
  EXPECT_NEAR(m.cost().PrefillSeconds(2048, 0), 50, 1) << "fresh for stale_after";
  m.Age(30 * kSecond + 5 * 30 * kSecond);  // five half-lives: 1/32 of the fit left
  const double drifted = m.cost().PrefillSeconds(2048, 0);
  EXPECT_NEAR(drifted, 50.0 / 32 + kPrior.PrefillSeconds(2048, 0) * 31 / 32, 0.1);
  EXPECT_NEAR(m.coefficients().per_uncached_s, 50.0 / 2048, 1e-3) << "the fit itself is kept";
  // The backend is tried again and answers at its true speed: the stall now counts 1/32.
  const double truth = kTruth.PrefillSeconds(2048, 0);
  m.Observe(Sample(2048, truth), 180 * kSecond);
  EXPECT_LT(m.cost().PrefillSeconds(2048, 0), 4.0) << "without ageing: the mean of 50 s and 1.6 s";
  for (int i = 1; i <= 5; ++i) m.Observe(Sample(2048, truth), 180 * kSecond + i * kSecond);
  EXPECT_NEAR(m.cost().PrefillSeconds(2048, 0), truth, 0.15 * truth);
  // Fresh again: Age leaves the fit alone.
  const double fitted = m.cost().PrefillSeconds(2048, 0);
  m.Age(190 * kSecond);
  EXPECT_EQ(m.cost().PrefillSeconds(2048, 0), fitted);
}

TEST(BackendCostAgeing, OffWhenStaleAfterIsZeroAndBeforeTheFirstSample) {
  BackendCostModel never(kPrior, {.stale_after = 0});
  never.Observe(Sample(2048, 50), 0);
  never.Age(3600 * kSecond);
  EXPECT_NEAR(never.cost().PrefillSeconds(2048, 0), 50, 1);
  BackendCostModel unseen(kPrior);
  unseen.Age(3600 * kSecond);
  EXPECT_EQ(unseen.cost().PrefillSeconds(2048, 0), kPrior.PrefillSeconds(2048, 0));
  EXPECT_EQ(unseen.Freshness(3600 * kSecond), 1);
}

// The drivers' loop (gateway and simulator alike): age, route, learn from the first token.
// Two equal backends; backend 0's first sample was a stall. Without ageing it is never chosen
// again and its price never corrected; with it, it is tried, re-priced, and shares the load.
TEST(BackendCostAgeing, ARouterTriesAPricedOutBackendAgainAndItsPriceRecovers) {
  std::vector<BackendCostModel> models(2, BackendCostModel(kPrior));
  models[0].Observe(Sample(2048, 50), 0);
  models[1].Observe(Sample(2048, kTruth.PrefillSeconds(2048, 0)), 0);
  PrefixIndex index;
  Router router(RouterOptions{.policy = RoutingPolicy::kKvAware, .block_tokens = 512}, &index);
  Rng rng(7);
  std::vector<Candidate> units(2);
  int late_picks_of_0 = 0;
  const int kRequests = 400;
  for (int i = 0; i < kRequests; ++i) {
    const Nanos now = (i + 1) * 2 * kSecond;  // one conversation start every 2 s: low load
    for (size_t u = 0; u < 2; ++u) {
      models[u].Age(now);
      units[u].holder = static_cast<HolderId>(u);
      units[u].cost = &models[u].cost();
    }
    std::vector<BlockKey> prompt;
    for (BlockKey b = 0; b < 4; ++b) prompt.push_back(static_cast<BlockKey>(i) * 16 + b + 1);
    const RouteDecision d =
        router.Route(RouteRequest{.blocks = prompt, .input_tokens = 2048, .output_tokens = 10, .now = now}, units, {}, rng);
    ASSERT_GE(d.entry, 0);
    const double seconds = kTruth.PrefillSeconds(2048 - d.expected_cached_tokens, d.expected_cached_tokens);
    models[static_cast<size_t>(d.entry)].Observe(
        Sample(2048 - d.expected_cached_tokens, seconds), now + static_cast<Nanos>(seconds * 1e9));
    if (i >= kRequests - 100 && d.entry == 0) ++late_picks_of_0;
  }
  const double truth = kTruth.PrefillSeconds(2048, 0);
  EXPECT_NEAR(models[0].cost().PrefillSeconds(2048, 0), truth, 0.1 * truth);
  EXPECT_GT(late_picks_of_0, 25) << "of the last 100 requests, with both priced alike";
}

}  // namespace
}  // namespace myriad::policy
