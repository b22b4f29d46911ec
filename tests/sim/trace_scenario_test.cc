// The simulator on the real traces in ../shared/traces, when they are there.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "sim/runner.h"

namespace myriad::sim {
namespace {

std::string TracePath(const char* name) {
  return std::string(MYRIAD_SOURCE_DIR) + "/../shared/traces/" + name;
}

TEST(TraceScenario, MooncakeTraceOnOneUnitReachesThePublishedReuse) {
  const std::string path = TracePath("mooncake_synthetic_trace.jsonl");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path << ": trace tests skipped";
  const std::string yaml = R"(
seed: 7
duration: 1100s
hardware: {gpu: H200, nodes: 22}
model: DeepSeek-V3
pools:
  - {name: prefill, role: prefill, count: 1, layout: {tp: 1, dp: 32, ep: 32, nodes: 4}}
  - {name: decode, role: decode, count: 1, layout: {tp: 1, dp: 144, ep: 144, nodes: 18}}
workload: {type: mooncake, path: )" + path + R"(}
kv_block_tokens: 512
)";
  auto s = ParseScenario(yaml, "inline.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  auto r = RunScenario(*s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["requests"]["arrived"].get<int>(), 3993);
  EXPECT_EQ((*r)["requests"]["completed"].get<int>(), 3993);
  // PUBLIC_DATA.md: with an unlimited cache 64% of the trace's blocks are reusable; one unit
  // holds the whole trace's working set, so its hit rate comes close.
  const double hit = (*r)["tokens"]["prefix_hit_rate"].get<double>();
  EXPECT_GT(hit, 0.55);
  EXPECT_LT(hit, 0.70);
}

TEST(TraceScenario, ShippedScenariosParse) {
  for (const char* name : {"default", "chat_10k", "small", "mooncake_trace", "azure_code"}) {
    auto s = LoadScenario(std::string(MYRIAD_SOURCE_DIR) + "/scenarios/" + name + ".yaml");
    EXPECT_TRUE(s.ok()) << name << ": " << s.status();
  }
}

TEST(TraceScenario, AzureTraceOnSmallFleetCompletes) {
  const std::string path = TracePath("AzureLLMInferenceTrace_code_2023.csv");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path << ": trace tests skipped";
  auto s = LoadScenario(std::string(MYRIAD_SOURCE_DIR) + "/scenarios/azure_code.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  s->duration = 5 * kMinute;
  s->workload.replay.duration = s->duration;
  auto r = RunScenario(*s);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& q = (*r)["requests"];
  EXPECT_GT(q["arrived"].get<int>(), 1000);
  EXPECT_EQ(q["arrived"].get<int>(), q["completed"].get<int>() + q["rejected"].get<int>());
  EXPECT_EQ((*r)["tokens"]["prefix_hit_rate"].get<double>(), 0.0) << "Azure requests share nothing";
}

}  // namespace
}  // namespace myriad::sim
