// A model rollout in the simulator (elastic.rollout, sim/rollout_driver.h): the split sends a
// canary share to the new version's units and policy/rollout.h's judge, the object the
// controller drives on the real path, steps, promotes or rolls back from the simulated windows.
#include <gtest/gtest.h>

#include <string>

#include "sim/runner.h"
#include "sim/scenario.h"

namespace myriad::sim {
namespace {

nlohmann::ordered_json Simulate(const Scenario& s) {
  auto r = RunScenario(s);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : nlohmann::ordered_json();
}

// Four prefill and four decode units of Llama-3.1-8B, two of each on the new version: at the
// ladder's 50% rung the canary's units carry their share at the stable units' load.
constexpr const char* kRollout = R"(
name: rollout
seed: 11
duration: 12m
drain: 2m
hardware: {gpu: H100, nodes: 1, gpus_per_node: 8, nodes_per_rack: 16}
model: Llama-3.1-8B
pools:
  - {name: prefill, role: prefill, count: 4, layout: {tp: 1}, max_batch_tokens: 8192}
  - {name: decode, role: decode, count: 4, layout: {tp: 1}, max_seqs: 64}
workload:
  type: synthetic
  rate: 20
  input: {mean: 1000, cv: 0.5, min: 16, max: 8192}
  output: {mean: 100, cv: 0.5, min: 2, max: 1024}
  sessions: {fraction: 0}
router: least-loaded
slo: {ttft: 1s, tpot: 50ms}
kv_block_tokens: 16
elastic:
  interval: 15s
  scale_out: {spare_acquire: 10s, comm_init: 5s, warmup: 10s, readiness: 5s}
  rollout:
    start: 1m
    interval: 10s
    canary: [{pool: prefill, units: 2}, {pool: decode, units: 2}]
    ladder: [0.05, 0.25, 0.5, 1]
    min_requests: 30
    max_slo_drop: 0.05
    slowdown: 1
    wrong_answers: 0
)";

Scenario Parse(const std::string& from = "", const std::string& to = "") {
  std::string y = kRollout;
  if (!from.empty()) y.replace(y.find(from), from.size(), to);
  auto s = ParseScenario(y, "rollout.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : Scenario{};
}

std::vector<std::string> Events(const nlohmann::ordered_json& ro) {
  std::vector<std::string> v;
  for (const auto& e : ro["events"]) v.push_back(e["event"].get<std::string>());
  return v;
}

TEST(RolloutScenarioTest, AGoodCanaryClimbsTheLadderAndIsPromoted) {
  const auto r = Simulate(Parse());
  const auto& ro = r["elastic"]["rollout"];
  ASSERT_EQ(ro["outcome"], "promoted") << ro.dump(2);
  EXPECT_EQ(Events(ro), (std::vector<std::string>{"start", "step", "step", "promote"})) << ro.dump(2);
  EXPECT_EQ(ro["rollback_after_s"].get<double>(), -1);
  EXPECT_GT(ro["served_by_canary"].get<int64_t>(), 0);
  EXPECT_EQ(ro["probe_mismatches"].get<int64_t>(), 0);
  // The shares the judge chose, rung by rung.
  EXPECT_EQ(ro["events"][1]["share"].get<double>(), 0.25);
  EXPECT_EQ(ro["events"][2]["share"].get<double>(), 0.5);
}

TEST(RolloutScenarioTest, ASlowCanaryIsRolledBackWithinTheJudgesWindowAndReloaded) {
  const Scenario s = Parse("slowdown: 1", "slowdown: 8");
  const auto r = Simulate(s);
  const auto& ro = r["elastic"]["rollout"];
  ASSERT_EQ(ro["outcome"], "rolled_back") << ro.dump(2);
  const auto events = Events(ro);
  ASSERT_GE(events.size(), 4u) << ro.dump(2);
  EXPECT_EQ(events[events.size() - 3], "rollback");
  EXPECT_EQ(events[events.size() - 2], "reload");
  EXPECT_EQ(events.back(), "stable");
  const auto& rb = ro["events"][events.size() - 3];
  EXPECT_NE(rb["reason"].get<std::string>().find("SLO attainment"), std::string::npos) << rb.dump();
  EXPECT_EQ(rb["share"].get<double>(), 0);
  // At 5% of 20 requests/s the first rung has its 30 requests after about 30 s; the judge rolls
  // back at the first round after that, or at the next rung's.
  const double after = ro["rollback_after_s"].get<double>();
  EXPECT_GE(after, 10);
  EXPECT_LE(after, 90) << ro.dump(2);
  EXPECT_GT(ro["served_by_canary"].get<int64_t>(), 0);
  EXPECT_LT(ro["canary_slo_attainment"].get<double>(), ro["stable_slo_attainment"].get<double>() - 0.05);
  EXPECT_EQ(Simulate(s).dump(), r.dump()) << "same seed, same bytes";
}

TEST(RolloutScenarioTest, AWrongKnownAnswerRollsBackAtTheFirstRound) {
  const auto r = Simulate(Parse("wrong_answers: 0", "wrong_answers: 1"));
  const auto& ro = r["elastic"]["rollout"];
  ASSERT_EQ(ro["outcome"], "rolled_back") << ro.dump(2);
  EXPECT_EQ(ro["rollback_after_s"].get<double>(), 10);  // the first round, before min_requests
  EXPECT_GT(ro["probe_mismatches"].get<int64_t>(), 0);
  EXPECT_NE(ro["events"][1]["reason"].get<std::string>().find("known-answer"), std::string::npos);
}

TEST(RolloutScenarioTest, ErrorsNameTheFileLineAndKey) {
  auto error = [](const std::string& from, const std::string& to) {
    std::string y = kRollout;
    y.replace(y.find(from), from.size(), to);
    auto s = ParseScenario(y, "rollout.yaml");
    EXPECT_FALSE(s.ok()) << to;
    return s.ok() ? std::string() : std::string(s.status().message());
  };
  EXPECT_NE(error("slowdown: 1", "slowdown: 101").find("rollout.yaml:"), std::string::npos);
  EXPECT_NE(error("slowdown: 1", "slowdown: 101").find("elastic.rollout.slowdown: must be between 1 and 100"),
            std::string::npos);
  EXPECT_NE(error("wrong_answers: 0", "wrong_answers: 2").find("elastic.rollout.wrong_answers: must be between 0 and 1"),
            std::string::npos);
  EXPECT_NE(error("{pool: decode, units: 2}", "{pool: decode, units: 4}")
                .find("elastic.rollout.canary[1].units: must be between 1 and the pool's count less one, 3"),
            std::string::npos);
  EXPECT_NE(error(", {pool: decode, units: 2}", "").find("must list every pool"), std::string::npos);
  EXPECT_NE(error("{pool: decode, units: 2}", "{pool: nope, units: 2}").find("'nope' names no pool"), std::string::npos);
  EXPECT_NE(error("ladder: [0.05, 0.25, 0.5, 1]", "ladder: [0.05, 0.5]").find("the last step must be 1"),
            std::string::npos);
  EXPECT_NE(error("min_requests: 30", "min_requests: 0").find("min_requests: 0 is not in [1, 100000000]"),
            std::string::npos);
  EXPECT_NE(error("start: 1m", "start: 200h").find("elastic.rollout.start: must be between 0s and 168h"),
            std::string::npos);
  EXPECT_NE(error("interval: 10s", "interval: 2h").find("elastic.rollout.interval: must be between 1s and 1h"),
            std::string::npos);
}

}  // namespace
}  // namespace myriad::sim
