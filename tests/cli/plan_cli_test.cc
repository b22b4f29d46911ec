// `myriad plan` as a user runs it: a small spec in, the frontier and the chosen plan out, and a
// scenario `myriad sim` runs.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "run_myriad.h"
#include "../test_util/read_file.h"

namespace {

using myriad::test::ReadFile;

using myriad::testing::RunMyriad;
using myriad::testing::TestTempDir;
using myriad::testing::WriteTempFile;
using nlohmann::json;

// A tiny cluster: at most 16 one-GPU Llama-3.1-8B units, colocated or split, for a minute.
constexpr const char* kSpec = R"(name: tiny-plan
seed: 5
duration: 1m
drain: 1m
model: Llama-3.1-8B
hardware: {gpus_per_node: 8, nodes_per_rack: 2}
workload: {type: synthetic, rate: 40, input: {mean: 800, max: 4096}, output: {mean: 150, max: 1024},
           system_prompts: {count: 10, tokens: 400, fraction: 0.8}}
slo: {ttft: 500ms, tpot: 40ms, attainment: 0.95}
search:
  max_gpus: 16
  gpus: [{type: H100, price: 2.5}, {type: H200, price: 3.0}]
  routers: [least-loaded, kv-aware]
  prefill: {layouts: [{tp: 1, dp: 1}], units: [1, 2]}
  decode: {layouts: [{tp: 1, dp: 1}], max_seqs: [128]}
  colocated: {layouts: [{tp: 1, dp: 1}], max_seqs: [32, 256]}
)";

// A deployment in the spec's space that a user might run today: four colocated H200 units,
// kv-aware. It meets the SLO with room to spare, at a price a working search beats by far (the
// chosen plan is about 0.4 of it; its largest deployments cost four times as much).
constexpr const char* kGiven = R"(name: given
seed: 5
duration: 1m
drain: 1m
model: Llama-3.1-8B
hardware: {gpu: H200, nodes: 1, gpus_per_node: 8, nodes_per_rack: 2}
pools:
  - {name: colocated, role: colocated, count: 4, layout: {tp: 1, dp: 1}, max_seqs: 256, gpu_hour_price: 3.0}
workload: {type: synthetic, rate: 40, input: {mean: 800, max: 4096}, output: {mean: 150, max: 1024},
           system_prompts: {count: 10, tokens: 400, fraction: 0.8}}
router: kv-aware
slo: {ttft: 500ms, tpot: 40ms}
)";

TEST(PlanCli, SmallSpecChoosesTheCheapestWithinSloAndWritesAScenarioSimRuns) {
  const std::string spec = WriteTempFile("tiny_plan.yaml", kSpec);
  const std::string given = WriteTempFile("given.yaml", kGiven);
  const std::string dir = TestTempDir().string();
  auto run = [&](const std::string& tag) {
    return RunMyriad("plan " + spec + " --confirm --baseline " + given + " --out " + dir + "/plan" + tag + ".yaml -o " +
                         dir + "/plan" + tag + ".json",
                     "", 120);
  };
  auto r = run("1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("frontier (dollars per hour against SLO attainment"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chosen: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("failures per day"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GPUs lost per failure"), std::string::npos) << r.out;

  const json j = json::parse(ReadFile(dir + "/plan1.json"));
  const auto& cands = j["candidates"];
  ASSERT_GE(cands.size(), 4u);
  ASSERT_FALSE(j["chosen"].is_null()) << j.dump(2);
  const size_t chosen = j["chosen"].get<size_t>();
  const double target = j["attainment_target"].get<double>();
  // Cheapest among the candidates' own scores that reach the target.
  const auto& c = cands[chosen];
  EXPECT_GE(c["slo_attainment"].get<double>(), target);
  for (const auto& other : cands) {
    if (other["slo_attainment"].get<double>() < target || other["cost_per_million_tokens_within_slo"].is_null()) continue;
    EXPECT_LE(c["cost_per_million_tokens_within_slo"].get<double>(),
              other["cost_per_million_tokens_within_slo"].get<double>())
        << other.dump();
  }
  // Every frontier point is a candidate, and the frontier rises in both cost and attainment.
  double last_cost = -1, last_att = -1;
  for (const auto& f : j["frontier"]) {
    const auto& p = cands[f.get<size_t>()];
    EXPECT_GE(p["dollars_per_hour"].get<double>(), last_cost);
    EXPECT_GT(p["slo_attainment"].get<double>(), last_att);
    last_cost = p["dollars_per_hour"].get<double>();
    last_att = p["slo_attainment"].get<double>();
  }
  EXPECT_GE(j["frontier"].size(), 2u) << "the search should span cheap failing and dear passing deployments";

  // Cheaper than the given deployment at no less attainment, on its slice and on the whole
  // cluster --confirm ran.
  const auto& base = j["baseline"];
  ASSERT_TRUE(base.is_object()) << j.dump(2);
  EXPECT_GE(base["slo_attainment"].get<double>(), target) << base.dump();
  EXPECT_GE(j["confirm"]["slo_attainment"].get<double>(), target) << j["confirm"].dump();
  EXPECT_LT(base["chosen_slice_cost_ratio"].get<double>(), 0.75) << base.dump();
  EXPECT_LT(base["chosen_whole_cost_ratio"].get<double>(), 0.75) << base.dump();
  EXPECT_NEAR(base["chosen_whole_cost_ratio"].get<double>(),
              j["confirm"]["cost_per_million_tokens_within_slo"].get<double>() /
                  base["cost_per_million_tokens_within_slo"].get<double>(),
              1e-12);
  EXPECT_NE(r.out.find("the chosen plan's cost per token within the SLO against it: slice -"), std::string::npos) << r.out;

  // The written plan is a scenario `myriad sim` runs, with the chosen shape's GPU.
  const std::string plan_yaml = ReadFile(dir + "/plan1.yaml");
  auto sim = RunMyriad("sim " + dir + "/plan1.yaml -q -o " + dir + "/sim.json", "", 120);
  ASSERT_EQ(sim.code, 0) << sim.out << "\n" << plan_yaml;
  const json report = json::parse(ReadFile(dir + "/sim.json"));
  EXPECT_GT(report["requests"]["completed"].get<double>(), 0);
  EXPECT_EQ(report["scenario"]["gpu"].get<std::string>(), c["shape"].get<std::string>().substr(0, 4));

  // Same spec, same bytes: stdout, the JSON and the plan.
  auto again = run("2");
  ASSERT_EQ(again.code, 0) << again.out;
  auto stdout_only = [](const std::string& out) { return out.substr(0, out.find("searched in")); };
  EXPECT_EQ(stdout_only(r.out), stdout_only(again.out));
  EXPECT_EQ(ReadFile(dir + "/plan1.json"), ReadFile(dir + "/plan2.json"));
  EXPECT_EQ(plan_yaml, ReadFile(dir + "/plan2.yaml"));
  // One job gives the same answer as two.
  auto serial = RunMyriad("plan " + spec + " --confirm --baseline " + given + " --jobs 1 -o " + dir + "/plan3.json", "", 120);
  ASSERT_EQ(serial.code, 0) << serial.out;
  EXPECT_EQ(ReadFile(dir + "/plan1.json"), ReadFile(dir + "/plan3.json"));
}

TEST(PlanCli, NoCandidateWithinTheSloIsAFailedRunThatSaysSo) {
  std::string text = kSpec;
  text.replace(text.find("ttft: 500ms"), 11, "ttft: 1ms");
  auto r = RunMyriad("plan " + WriteTempFile("unreachable.yaml", text), "", 120);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("no candidate reached 95% within the SLO"), std::string::npos) << r.out;
}

TEST(PlanCli, BadInputExitsTwoNamingFileLineAndKey) {
  std::string text = kSpec;
  text.replace(text.find("price: 2.5"), 10, "price: -2");
  const std::string bad = WriteTempFile("bad_price.yaml", text);
  auto r = RunMyriad("plan " + bad);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("bad_price.yaml:12: search.gpus[0].price: must be between 0 and 1e6"), std::string::npos) << r.out;

  auto jobs = RunMyriad("plan " + WriteTempFile("ok.yaml", kSpec) + " --jobs 0");
  EXPECT_EQ(jobs.code, 2) << jobs.out;
  EXPECT_NE(jobs.out.find("--jobs"), std::string::npos) << jobs.out;

  auto missing = RunMyriad("plan " + (TestTempDir() / "nope.yaml").string());
  EXPECT_EQ(missing.code, 2) << missing.out;

  // A baseline serving another workload would not compare: refused before the search.
  std::string other = kGiven;
  other.replace(other.find("rate: 40"), 8, "rate: 50");
  auto baseline = RunMyriad("plan " + WriteTempFile("ok2.yaml", kSpec) + " --baseline " + WriteTempFile("other.yaml", other));
  EXPECT_EQ(baseline.code, 2) << baseline.out;
  EXPECT_NE(baseline.out.find("its workload rate (50) is not the spec's (40)"), std::string::npos) << baseline.out;

  auto syntax = RunMyriad("plan " + WriteTempFile("syntax.yaml", "search: [\n"));
  EXPECT_EQ(syntax.code, 2) << syntax.out;
  EXPECT_NE(syntax.out.find("syntax.yaml:"), std::string::npos) << syntax.out;
}

}  // namespace
