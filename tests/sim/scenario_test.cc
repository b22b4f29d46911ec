#include "sim/scenario.h"

#include <gtest/gtest.h>

#include <string>

namespace myriad::sim {
namespace {

constexpr const char* kBase = R"(name: t
seed: 3
duration: 2m
hardware:
  gpu: H100
  nodes: 4
pools:
  - name: p
    role: colocated
    count: 2
    layout: {tp: 8, dp: 1, ep: 1}
model: Llama-3.1-70B
workload:
  type: synthetic
  rate: 5
)";

std::string Error(const std::string& yaml) {
  auto s = ParseScenario(yaml, "test.yaml");
  EXPECT_FALSE(s.ok()) << yaml;
  return s.ok() ? "" : std::string(s.status().message());
}

TEST(Scenario, ParsesAValidFile) {
  auto s = ParseScenario(kBase, "test.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->duration, 2 * kMinute);
  EXPECT_EQ(s->pools.size(), 1u);
  EXPECT_EQ(s->pools[0].layout.nodes, 1);
  EXPECT_EQ(s->pools[0].role, Role::kColocated);
  EXPECT_EQ(s->workload.synthetic.seed, 3u);
}

TEST(Scenario, UnknownKeyNamesFileLineAndKey) {
  std::string e = Error(std::string(kBase) + "routr: random\n");
  EXPECT_NE(e.find("test.yaml:16"), std::string::npos) << e;
  EXPECT_NE(e.find("routr"), std::string::npos) << e;
  e = Error(std::string(kBase).replace(std::string(kBase).find("layout: {tp: 8"), 14, "layout: {tq: 8"));
  EXPECT_NE(e.find("pools[0].layout.tq"), std::string::npos) << e;
  EXPECT_NE(e.find("test.yaml:11"), std::string::npos) << e;
}

TEST(Scenario, WrongTypeNamesTheKey) {
  std::string y = kBase;
  y.replace(y.find("nodes: 4"), 8, "nodes: four");
  std::string e = Error(y);
  EXPECT_NE(e.find("test.yaml:6: hardware.nodes"), std::string::npos) << e;
  y = kBase;
  y.replace(y.find("count: 2"), 8, "count: 2.5");
  e = Error(y);
  EXPECT_NE(e.find("pools[0].count"), std::string::npos) << e;
  EXPECT_NE(e.find("integer"), std::string::npos) << e;
  y = kBase;
  y.replace(y.find("duration: 2m"), 12, "duration: soon");
  EXPECT_NE(Error(y).find("test.yaml:3: duration"), std::string::npos);
}

TEST(Scenario, ImpossibleValuesAreErrors) {
  std::string y = kBase;
  y.replace(y.find("count: 2"), 8, "count: 5");
  std::string e = Error(y);
  EXPECT_NE(e.find("pools"), std::string::npos) << e;
  EXPECT_NE(e.find("need 40 GPUs but the cluster has 32"), std::string::npos) << e;
  y = kBase;
  y.replace(y.find("tp: 8, dp: 1"), 12, "tp: 8, dp: 9");
  e = Error(y);
  EXPECT_NE(e.find("pools[0].layout"), std::string::npos) << e;
  y = kBase;
  y.replace(y.find("gpu: H100"), 9, "gpu: H900");
  EXPECT_NE(Error(y).find("hardware.gpu: unknown GPU 'H900'"), std::string::npos);
  y = kBase;
  y.replace(y.find("role: colocated"), 15, "role: both");
  EXPECT_NE(Error(y).find("pools[0].role"), std::string::npos);
  EXPECT_NE(Error(std::string(kBase) + "router: psychic\n").find("router"), std::string::npos);
  EXPECT_NE(Error("a: [1, 2").find("YAML syntax"), std::string::npos);
}

TEST(Scenario, ScalePreservesShape) {
  auto s = ParseScenario(kBase, "test.yaml");
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(ScaleScenario(*s, 2.0).ok());
  EXPECT_EQ(s->hardware.nodes, 8);
  EXPECT_EQ(s->pools[0].count, 4);
  EXPECT_DOUBLE_EQ(s->workload.synthetic.rate, 10);
  EXPECT_FALSE(ScaleScenario(*s, 0.01).ok());
}

TEST(Scenario, DefaultScenarioLoads) {
  auto s = LoadScenario(std::string(MYRIAD_SOURCE_DIR) + "/scenarios/default.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  // 144 nodes at DeepSeek's operating point since 2026-12-02 (docs/simulator.md, "The default
  // scenario"); the 10,240-GPU scenario it replaced is scenarios/chat_10k.yaml.
  EXPECT_EQ(s->hardware.gpus(), 1152);
  EXPECT_EQ(s->model, "DeepSeek-V3");
  // Every node is in a unit, so its cost per token counts no idle GPU.
  int unit_nodes = 0;
  for (const PoolConfig& p : s->pools) unit_nodes += p.count * p.layout.nodes;
  EXPECT_EQ(unit_nodes, s->hardware.nodes);
}

}  // namespace
}  // namespace myriad::sim
