// The simulator's router prices each pool with the cost model the gateway learns per backend
// (policy/backend_cost_model.h), fed with the simulated first tokens.
#include <gtest/gtest.h>

#include <string>

#include "sim/runner.h"

namespace myriad::sim {
namespace {

nlohmann::ordered_json RunSmall(bool learn) {
  auto s = LoadScenario(std::string(MYRIAD_SOURCE_DIR) + "/scenarios/small.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  s->router.policy = "kv-aware";
  s->router.learn_cost = learn;
  s->duration = 2 * kMinute;
  auto r = RunScenario(*s);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

TEST(SimLearnedCost, EachPoolLearnsFromItsPrefillsDeterministically) {
  const auto a = RunSmall(true);
  ASSERT_TRUE(a["router"].contains("learned_cost")) << a["router"].dump();
  const auto& prefill = a["router"]["learned_cost"][0];
  EXPECT_EQ(prefill["pool"], "prefill");
  // Every admitted request's prefill is a sample.
  EXPECT_GT(prefill["samples"].get<uint64_t>(), 1000u);
  EXPECT_EQ(a["router"]["learned_cost"][1]["samples"], 0u);  // decode units never prefill here
  // A line that says something: a positive speed, and the outliers (prefills that waited
  // behind a burst) a minority.
  EXPECT_GT(prefill["per_uncached_token_s"].get<double>(), 0) << prefill.dump();
  EXPECT_GT(prefill["fixed_s"].get<double>(), 0) << prefill.dump();
  EXPECT_LT(prefill["clipped"].get<uint64_t>(), prefill["samples"].get<uint64_t>() / 4) << prefill.dump();
  EXPECT_EQ(RunSmall(true).dump(), a.dump());
  EXPECT_FALSE(RunSmall(false)["router"].contains("learned_cost"));
}

}  // namespace
}  // namespace myriad::sim
