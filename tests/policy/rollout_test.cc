#include "policy/rollout.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

namespace myriad::policy {
namespace {

VersionWindow Window(int64_t requests, int64_t slo_met, int64_t errors = 0) {
  return VersionWindow{.requests = requests, .slo_met = slo_met, .errors = errors};
}

TEST(RolloutSplitTest, ShareHoldsOverManyKeysAndAKeyKeepsItsArm) {
  for (double share : {0.01, 0.05, 0.25, 0.5}) {
    int canary = 0;
    constexpr int kKeys = 100'000;
    for (int i = 0; i < kKeys; ++i) canary += PickArm(fmt::format("user-{}", i), share) == RolloutArm::kCanary;
    EXPECT_NEAR(static_cast<double>(canary) / kKeys, share, 0.01) << share;
  }
  EXPECT_EQ(PickArm("conversation-7", 0.3), PickArm("conversation-7", 0.3));
  EXPECT_EQ(PickArm("anything", 0), RolloutArm::kStable);
  EXPECT_EQ(PickArm("anything", 1), RolloutArm::kCanary);
}

TEST(RolloutSplitTest, RaisingTheShareNeverMovesACanaryKeyBack) {
  for (int i = 0; i < 10'000; ++i) {
    const std::string key = fmt::format("k{}", i);
    if (PickArm(key, 0.05) == RolloutArm::kCanary) {
      EXPECT_EQ(PickArm(key, 0.25), RolloutArm::kCanary) << key;
    }
  }
}

TEST(RolloutJudgeTest, HoldsUntilBothVersionsHaveTheMinimumSamples) {
  JudgeOptions o;
  o.min_requests = 100;
  const Judgement j = Judge(o, 0.05, Window(1000, 990), Window(99, 99));
  EXPECT_EQ(j.verdict, Verdict::kHold);
  EXPECT_EQ(j.share, 0.05);
  EXPECT_NE(j.reason.find("waiting"), std::string::npos) << j.reason;
}

TEST(RolloutJudgeTest, AHealthyCanaryClimbsTheLadderThenIsPromoted) {
  JudgeOptions o;
  o.min_requests = 10;
  double share = 0.01;
  std::vector<double> seen;
  for (int i = 0; i < 10; ++i) {
    const Judgement j = Judge(o, share, Window(100, 95, 1), Window(100, 94, 1));
    if (j.verdict == Verdict::kPromote) {
      EXPECT_EQ(j.share, 1);
      break;
    }
    ASSERT_EQ(j.verdict, Verdict::kStep) << j.reason;
    share = j.share;
    seen.push_back(share);
  }
  EXPECT_EQ(seen, (std::vector<double>{0.05, 0.25, 0.5}));
  // A share between rungs steps to the next rung above it.
  EXPECT_EQ(Judge(o, 0.1, Window(100, 95), Window(100, 95)).share, 0.25);
}

TEST(RolloutJudgeTest, RollsBackPastTheSloOrErrorMarginOnly) {
  JudgeOptions o;
  o.min_requests = 10;
  o.max_slo_drop = 0.05;
  o.max_error_increase = 0.01;
  // 4 points worse: within the margin.
  EXPECT_EQ(Judge(o, 0.25, Window(100, 95), Window(100, 91)).verdict, Verdict::kStep);
  const Judgement slo = Judge(o, 0.25, Window(100, 95), Window(100, 89));
  EXPECT_EQ(slo.verdict, Verdict::kRollback);
  EXPECT_EQ(slo.share, 0);
  EXPECT_NE(slo.reason.find("SLO"), std::string::npos) << slo.reason;
  const Judgement err = Judge(o, 0.25, Window(1000, 950, 1), Window(1000, 950, 13));
  EXPECT_EQ(err.verdict, Verdict::kRollback);
  EXPECT_NE(err.reason.find("error rate"), std::string::npos) << err.reason;
  // A canary better than stable is never rolled back for it.
  EXPECT_EQ(Judge(o, 0.25, Window(100, 50, 20), Window(100, 100)).verdict, Verdict::kStep);
}

TEST(RolloutJudgeTest, AnyProbeMismatchRollsBackAtOnceWithoutSamples) {
  JudgeOptions o;
  VersionWindow canary = Window(1, 1);
  canary.probes = 3;
  canary.probe_mismatches = 1;
  const Judgement j = Judge(o, 0.01, Window(0, 0), canary);
  EXPECT_EQ(j.verdict, Verdict::kRollback);
  EXPECT_EQ(j.share, 0);
  EXPECT_NE(j.reason.find("1 of 3 known-answer probes"), std::string::npos) << j.reason;
}

TEST(RolloutJudgeTest, ZeroShareHoldsAndOptionsAreChecked) {
  EXPECT_EQ(Judge(JudgeOptions{}, 0, Window(1000, 1000), Window(0, 0)).verdict, Verdict::kHold);
  EXPECT_TRUE(ValidateJudgeOptions(JudgeOptions{}).ok());
  JudgeOptions bad;
  bad.ladder = {0.1, 0.05, 1};
  EXPECT_NE(ValidateJudgeOptions(bad).message().find("ladder[1]"), std::string::npos);
  bad.ladder = {0.1, 0.5};
  EXPECT_NE(ValidateJudgeOptions(bad).message().find("last step must be 1"), std::string::npos);
  bad = JudgeOptions{};
  bad.max_slo_drop = 1.5;
  EXPECT_NE(ValidateJudgeOptions(bad).message().find("max_slo_drop"), std::string::npos);
  bad = JudgeOptions{};
  bad.min_requests = 0;
  EXPECT_NE(ValidateJudgeOptions(bad).message().find("min_requests"), std::string::npos);
}

TEST(RolloutRestartTest, TakesAtMostMaxOutAndKeepsTheServingBuffer) {
  using U = UnitState;
  RestartOptions o{.max_out = 2, .min_serving_fraction = 0};
  EXPECT_EQ(NextToRestart(o, {U::kOld, U::kOld, U::kOld, U::kOld}), (std::vector<size_t>{0, 1}));
  // One already out: one more.
  EXPECT_EQ(NextToRestart(o, {U::kDone, U::kOut, U::kOld, U::kOld}), (std::vector<size_t>{2}));
  EXPECT_TRUE(NextToRestart(o, {U::kOut, U::kOut, U::kOld, U::kOld}).empty());
  // 80% of 10 must serve: 2 out at once even with max_out 5.
  o = {.max_out = 5, .min_serving_fraction = 0.8};
  std::vector<U> ten(10, U::kOld);
  EXPECT_EQ(NextToRestart(o, ten).size(), 2u);
  // 90% of 5 rounds up to all 5: none may go.
  o = {.max_out = 1, .min_serving_fraction = 0.9};
  EXPECT_TRUE(NextToRestart(o, std::vector<U>(5, U::kOld)).empty());
  // All done: nothing left.
  EXPECT_TRUE(NextToRestart({}, {U::kDone, U::kDone}).empty());
  EXPECT_FALSE(ValidateRestartOptions({.max_out = 0}).ok());
  EXPECT_FALSE(ValidateRestartOptions({.max_out = 1, .min_serving_fraction = 1}).ok());
}

// The window both drivers keep: counts since the rollout last changed, whoever changed it.
TEST(RolloutWindowTest, RestartsWhenTheRolloutChangesAndCountsFromThere) {
  RolloutWindow w;
  EXPECT_EQ(w.canary().requests, 0);
  w.Observe("v1/v2/0.01", Window(1000, 990, 3), Window(10, 10));
  EXPECT_EQ(w.stable().requests, 0) << "the first observation is the baseline";
  w.Observe("v1/v2/0.01", Window(1300, 1280, 4), Window(40, 30, 1));
  EXPECT_EQ(w.stable().requests, 300);
  EXPECT_EQ(w.stable().slo_met, 290);
  EXPECT_EQ(w.stable().errors, 1);
  EXPECT_EQ(w.canary().requests, 30);
  EXPECT_EQ(w.canary().slo_met, 20);
  EXPECT_EQ(w.canary().errors, 1);
  // The share stepped up: the 5% rung is not judged on what the canary did at 1%.
  w.Observe("v1/v2/0.05", Window(1400, 1380, 4), Window(50, 40, 1));
  EXPECT_EQ(w.stable().requests, 0);
  EXPECT_EQ(w.canary().requests, 0);
  w.Observe("v1/v2/0.05", Window(1500, 1470, 4), Window(70, 58, 2));
  EXPECT_EQ(w.stable().requests, 100);
  EXPECT_EQ(w.stable().slo_met, 90);
  EXPECT_EQ(w.canary().requests, 20);
  EXPECT_EQ(w.canary().slo_met, 18);
  EXPECT_EQ(w.canary().errors, 1);
  // A change back to an earlier configuration is a change too.
  w.Observe("v1/v2/0.01", Window(1600, 1570, 4), Window(80, 68, 2));
  EXPECT_EQ(w.canary().requests, 0);
}

TEST(RolloutVersionTest, VersionNamesAreBoundedPrintableLabels) {
  EXPECT_TRUE(ValidateVersionName("v2.1-canary").ok());
  EXPECT_FALSE(ValidateVersionName("").ok());
  EXPECT_FALSE(ValidateVersionName(std::string(kMaxRolloutVersionBytes + 1, 'v')).ok());
  EXPECT_FALSE(ValidateVersionName("v 2").ok());
  EXPECT_FALSE(ValidateVersionName("v\"2").ok());
}

}  // namespace
}  // namespace myriad::policy
