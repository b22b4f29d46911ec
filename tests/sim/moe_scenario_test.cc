// Units stepped rank by rank inside the simulator: the MoE remedies change what users see.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/runner.h"

namespace myriad::sim {
namespace {

nlohmann::ordered_json RunMoe(const std::vector<std::string>& overrides) {
  std::vector<std::string> all = {"duration=3m"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  auto s = LoadScenario(std::string(MYRIAD_SOURCE_DIR) + "/scenarios/moe_units.yaml", all);
  EXPECT_TRUE(s.ok()) << s.status();
  auto r = RunScenario(*s);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

double Tpot(const nlohmann::ordered_json& r) { return r["latency_s"]["tpot"]["p50"].get<double>(); }

TEST(MoeScenario, EplbAndTwoBatchOverlapShortenDecodeSteps) {
  auto eplb = RunMoe({});
  auto contiguous = RunMoe({"pools.1.moe.placement=contiguous"});
  auto tbo = RunMoe({"pools.1.moe.two_batch_overlap=true"});
  const auto& moe = eplb["pools"][1]["moe"];
  EXPECT_LT(moe["expert_imbalance"].get<double>(), contiguous["pools"][1]["moe"]["expert_imbalance"].get<double>());
  EXPECT_GT(moe["rank_busy_max_over_mean"].get<double>(), 1.0) << "uneven DP ranks are visible";
  EXPECT_LT(Tpot(eplb) * 2, Tpot(contiguous)) << "hot experts set the pace without EPLB";
  EXPECT_LT(Tpot(tbo), Tpot(eplb)) << "at ~30 sequences per GPU overlap pays";
  EXPECT_EQ(eplb["requests"]["arrived"], eplb["requests"]["completed"]);
}

TEST(MoeScenario, MoeSectionErrorsNameThePool) {
  auto bad = LoadScenario(std::string(MYRIAD_SOURCE_DIR) + "/scenarios/moe_units.yaml",
                          {"pools.1.moe.placement=random"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("pools[1].moe.placement"), std::string::npos) << bad.status();
  auto dense = LoadScenario(std::string(MYRIAD_SOURCE_DIR) + "/scenarios/moe_units.yaml", {"model=Llama-3.1-70B"});
  ASSERT_TRUE(dense.ok()) << dense.status();
  auto r = RunScenario(*dense);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("pools["), std::string::npos) << r.status();
  EXPECT_FALSE(LoadScenario(std::string(MYRIAD_SOURCE_DIR) + "/scenarios/moe_units.yaml", {"nonsense"}).ok());
  EXPECT_FALSE(LoadScenario(std::string(MYRIAD_SOURCE_DIR) + "/scenarios/moe_units.yaml", {"pools.7.count=1"}).ok());
}

}  // namespace
}  // namespace myriad::sim

namespace myriad::sim {
namespace {

TEST(MoeScenario, PeriodicRebalancingFollowsDriftingExperts) {
  const std::vector<std::string> drift = {"duration=40m", "workload.rate=80", "pools.1.moe.drift_interval=1m",
                                          "pools.1.moe.drift_fraction=0.02"};
  auto load = [&](const std::string& extra) {
    std::vector<std::string> o = drift;
    o.push_back(extra);
    auto s = LoadScenario(std::string(MYRIAD_SOURCE_DIR) + "/scenarios/moe_units.yaml", o);
    EXPECT_TRUE(s.ok()) << s.status();
    auto r = RunScenario(*s);
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  };
  auto fixed = load("pools.1.moe.rebalance_interval=0");
  auto rebalanced = load("pools.1.moe.rebalance_interval=10m");
  const auto& dyn = rebalanced["pools"][1]["moe"]["dynamics"];
  EXPECT_GE(dyn["rebalances"].get<int>(), 2);
  EXPECT_GT(dyn["moved_gigabytes"].get<double>(), 0);
  EXPECT_GT(dyn["pause_s"].get<double>(), 0) << "moving weights is charged";
  EXPECT_LT(rebalanced["pools"][1]["moe"]["expert_imbalance"].get<double>(),
            fixed["pools"][1]["moe"]["expert_imbalance"].get<double>());
  EXPECT_GT(rebalanced["requests"]["slo_attainment"].get<double>(), fixed["requests"]["slo_attainment"].get<double>());
  EXPECT_EQ(fixed["pools"][1]["moe"]["dynamics"]["rebalances"].get<int>(), 0);
  // The default is incremental; a full rebalance moves to the fresh EPLB placement, re-fetching
  // most slots, for a balance the incremental one comes within its tolerance (2%) of.
  EXPECT_EQ(dyn["rebalance_mode"], "incremental");
  std::vector<std::string> o = drift;
  o.insert(o.end(), {"pools.1.moe.rebalance_interval=10m", "pools.1.moe.rebalance_mode=full"});
  auto s = LoadScenario(std::string(MYRIAD_SOURCE_DIR) + "/scenarios/moe_units.yaml", o);
  ASSERT_TRUE(s.ok()) << s.status();
  auto full = RunScenario(*s);
  ASSERT_TRUE(full.ok()) << full.status();
  const auto& fdyn = (*full)["pools"][1]["moe"]["dynamics"];
  EXPECT_EQ(fdyn["rebalance_mode"], "full");
  EXPECT_LT(dyn["moved_gigabytes"].get<double>(), 0.5 * fdyn["moved_gigabytes"].get<double>());
  EXPECT_LT(dyn["pause_s"].get<double>(), fdyn["pause_s"].get<double>());
  EXPECT_LE(dyn["mean_imbalance_after_rebalance"].get<double>(),
            1.02 * dyn["mean_imbalance_of_fresh_eplb"].get<double>() + 1e-9);
  EXPECT_DOUBLE_EQ(fdyn["mean_imbalance_after_rebalance"].get<double>(), fdyn["mean_imbalance_of_fresh_eplb"].get<double>());
  EXPECT_FALSE(LoadScenario(std::string(MYRIAD_SOURCE_DIR) + "/scenarios/moe_units.yaml",
                            {"pools.1.moe.rebalance_interval=10m", "pools.1.moe.rebalance_mode=fresh"})
                   .ok());
}

}  // namespace
}  // namespace myriad::sim
