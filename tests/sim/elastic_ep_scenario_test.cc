// Elastic EP in the simulated cluster: a DeepSeek-V3 unit that loses a node keeps serving with
// the rest while the node is replaced, when its expert placement leaves every expert a copy.
#include <gtest/gtest.h>

#include <string>

#include "fault_test_util.h"
#include "sim/runner.h"

namespace myriad::sim {
namespace {

// 6 nodes of H200: two DeepSeek-V3 units of 2 nodes (EP16, 256 redundant experts: 32 slots per
// GPU, room for two copies of every expert), 2 spare nodes; round recovery times.
std::string Yaml(const std::string& elastic, const std::string& scripted = "[{at: 60s, kind: crash, unit: 1, rank: 3}]") {
  return R"(
seed: 5
duration: 10m
drain: 10m
hardware: {gpu: H200, nodes: 6, gpus_per_node: 8, nodes_per_rack: 2}
model: DeepSeek-V3
pools:
  - {name: serve, role: colocated, count: 2, layout: {tp: 1, dp: 16, ep: 16, nodes: 2, redundant_experts: 256}}
workload:
  type: synthetic
  rate: 5
  input: {mean: 1000, cv: 1.0, min: 16, max: 8000}
  output: {mean: 200, cv: 1.0, min: 1, max: 2000}
router: least-loaded
slo: {ttft: 2s, tpot: 100ms}
kv_block_tokens: 256
)" + fault_test::ElasticFaults(scripted, elastic);
}

using fault_test::D;
using fault_test::ExpectNothingLost;
using fault_test::I;

nlohmann::ordered_json RunSim(const std::string& yaml) { return fault_test::RunFaults(yaml); }

TEST(ElasticEpScenario, AUnitLosingANodeServesDegradedWhileItIsReplaced) {
  const auto r = RunSim(Yaml("{enabled: true}"));
  const auto& f = r["failures"];
  const auto& e = f["events"][0];
  // Ten failed scrapes, 60 s to 69 s (the controller's, with the heartbeat's timeout).
  EXPECT_DOUBLE_EQ(D(e["detected_s"]), 69);
  // Ejected at 70, serving again with one node after the communicator is rebuilt (30 s).
  EXPECT_DOUBLE_EQ(D(e["resumed_degraded_s"]), 100);
  // Whole again after stop 10 + spare 60 + the new node's load (~0) + warm-up 60 + readiness 5,
  // re-admitted by the warmup gate at the next scrape.
  EXPECT_NEAR(D(e["recovered_s"]), 206, 1e-2);
  const auto& el = f["elastic_ep"];
  EXPECT_EQ(I(el["faults_ridden_out_degraded"]), 1);
  EXPECT_NEAR(D(el["degraded_unit_hours"]), 105.0 / 3600, 1e-4);
  EXPECT_EQ(el["pools"]["serve"]["node_losses_survivable"], "2/2");
  EXPECT_NEAR(D(f["detection_and_recovery"]["crash"]["outage_s"]["p50"]), 40, 1e-6);
  const double span = D(r["scenario"]["end_s"]);
  EXPECT_NEAR(D(f["availability"]["serve"]), 1 - 40.0 / (2 * span), 1e-6);
  ExpectNothingLost(r);

  // Off, the unit is down from the crash until it is rebuilt whole: 176 s.
  const auto off = RunSim(Yaml("{enabled: false}"));
  EXPECT_NEAR(D(off["failures"]["events"][0]["recovered_s"]), 236, 1e-2);
  EXPECT_FALSE(off["failures"]["events"][0].contains("resumed_degraded_s"));
  const double down = D(off["failures"]["events"][0]["recovered_s"]) - 60;
  EXPECT_NEAR(D(off["failures"]["availability"]["serve"]), 1 - down / (2 * D(off["scenario"]["end_s"])), 1e-6);
  EXPECT_GT(I(r["requests"]["completed"]), 0);
}

TEST(ElasticEpScenario, APlacementThatOrphansAnExpertStopsTheUnit) {
  // One copy of the cold experts (DeepSeek's EPLB as is): a lost node takes some expert's only
  // copy, so the unit stops as a whole, exactly as without elastic EP.
  const auto r = RunSim(Yaml("{enabled: true, min_copies: 1}"));
  const auto& f = r["failures"];
  EXPECT_EQ(f["elastic_ep"]["pools"]["serve"]["node_losses_survivable"], "0/2");
  EXPECT_EQ(I(f["elastic_ep"]["faults_stopping_the_unit_orphaned_experts"]), 1);
  EXPECT_EQ(I(f["elastic_ep"]["faults_ridden_out_degraded"]), 0);
  EXPECT_NEAR(D(f["events"][0]["recovered_s"]), 236, 1e-2);
  // Two copies but not spread over nodes: a GPU can go, a node cannot.
  const auto packed = RunSim(Yaml("{enabled: true, spread: false}"));
  EXPECT_EQ(packed["failures"]["elastic_ep"]["pools"]["serve"]["node_losses_survivable"], "0/2");
  EXPECT_EQ(packed["failures"]["elastic_ep"]["pools"]["serve"]["gpu_losses_survivable"], "16/16");
  // A restarted process (no node lost) rides out on the other ranks.
  const auto soft = RunSim(Yaml("{enabled: true, spread: false}", "[{at: 60s, kind: software_crash, unit: 1, rank: 3}]"));
  EXPECT_EQ(I(soft["failures"]["elastic_ep"]["faults_ridden_out_degraded"]), 1);
  ExpectNothingLost(soft);
}

TEST(ElasticEpScenario, ASecondFaultStopsTheDegradedUnitUntilItsRebuildEnds) {
  const auto r = RunSim(Yaml("{enabled: true}", "[{at: 60s, kind: crash, unit: 1, rank: 3}, {at: 150s, kind: crash, unit: 1, rank: 0}]"));
  const auto& f = r["failures"];
  EXPECT_DOUBLE_EQ(D(f["events"][0]["resumed_degraded_s"]), 100);
  EXPECT_TRUE(f["events"][1]["absorbed"].get<bool>());
  EXPECT_NEAR(D(f["events"][0]["recovered_s"]), 206, 1e-2);
  // Down 60-100 and again 150-206.
  const double span = D(r["scenario"]["end_s"]);
  EXPECT_NEAR(D(f["availability"]["serve"]), 1 - (40.0 + 56.0) / (2 * span), 1e-3);
  ExpectNothingLost(r);
}

TEST(ElasticEpScenario, BadSettingsAreNamed) {
  auto s = ParseScenario(Yaml("{enabled: true, min_copies: 0}"), "inline.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("faults.elastic_ep.min_copies"), std::string::npos) << s.status();
  s = ParseScenario(Yaml("{enabled: true, spreading: true}"), "inline.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("spreading"), std::string::npos) << s.status();
}

}  // namespace
}  // namespace myriad::sim
