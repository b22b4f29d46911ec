#include "policy/diagnose.h"

#include <gtest/gtest.h>

namespace myriad::policy {
namespace {

std::vector<double> Ranks(int n, double step_s) { return std::vector<double>(static_cast<size_t>(n), step_s); }

TEST(Diagnose, OneSlowRankIsAStragglerNamedFirst) {
  DiagnoseInput in;
  in.units.push_back({.name = "engine a", .rank_step_s = Ranks(8, 0.020)});
  in.units[0].rank_step_s[5] = 0.032;
  in.units.push_back({.name = "engine b", .rank_step_s = Ranks(8, 0.020), .expert_imbalance = 1.1});
  in.requests = 1000;
  in.rejections = {{"tenant_quota", 20}};
  const auto f = Diagnose(in);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].suspicion, "straggler");
  EXPECT_EQ(f[0].unit, "engine a");
  EXPECT_EQ(f[0].rank, 5);
  EXPECT_NEAR(f[0].impact, 0.375, 1e-9);  // 1 - 20/32: the unit runs at the slow rank's pace
  EXPECT_EQ(f[1].suspicion, "admission");
  EXPECT_NE(f[1].evidence.find("tenant_quota 20"), std::string::npos) << f[1].evidence;
}

// The runbook's split: one or two ranks slow is a straggler, a wide spread is imbalance.
TEST(Diagnose, ManySlowRanksAreDpImbalanceNotStragglers) {
  DiagnoseInput in;
  DiagnoseUnit u{.name = "unit 0"};
  for (int r = 0; r < 16; ++r) u.rank_step_s.push_back(r % 2 == 0 ? 0.020 : 0.030);
  in.units.push_back(u);
  const auto f = Diagnose(in);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].suspicion, "dp_imbalance");
  EXPECT_NEAR(f[0].impact, 1 - 0.025 / 0.030, 1e-9);
}

TEST(Diagnose, ExpertImbalanceOutranksASmallerDpImbalanceAndNamesThePlacement) {
  DiagnoseInput in;
  in.units.push_back({.name = "unit 4 (decode)", .rank_busy_max_over_mean = 1.2, .expert_imbalance = 5.0,
                      .expert_placement = "contiguous"});
  const auto f = Diagnose(in);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].suspicion, "expert_imbalance");
  EXPECT_NEAR(f[0].impact, 0.8, 1e-9);
  EXPECT_NE(f[0].action.find("EPLB"), std::string::npos);
  EXPECT_EQ(f[1].suspicion, "dp_imbalance");
}

TEST(Diagnose, RadarStragglerNetworkRoutingAndKvPressure) {
  DiagnoseInput in;
  in.radar = {{"unit 4 (decode)", 17, 0.5}, {"unit 4 (decode)", 12, 0.04}};
  in.router = "least-loaded";
  in.prefix_hit_rate = 0.1;
  in.kv_transfer_p99_s = 0.1;
  in.ttft_p99_s = 0.25;
  in.requests = 100;
  in.preempted = 5;
  const auto f = Diagnose(in);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].suspicion, "network");  // 0.4
  EXPECT_EQ(f[1].suspicion, "straggler");  // 0.5 / 1.5; the 4% rank is under the bar
  EXPECT_EQ(f[1].rank, 17);
  EXPECT_EQ(f[2].suspicion, "routing");  // 0.3 - 0.1
  EXPECT_EQ(f[3].suspicion, "kv_pressure");
  in.router = "kv-aware";  // a prefix-aware router is not suspected for a low hit rate
  for (const Finding& x : Diagnose(in)) EXPECT_NE(x.suspicion, "routing");
}

TEST(Diagnose, NothingKnownNothingFound) { EXPECT_TRUE(Diagnose(DiagnoseInput{}).empty()); }

}  // namespace
}  // namespace myriad::policy
