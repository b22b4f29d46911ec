// Small-cluster scenarios that check the simulator's invariants through the same path the
// CLI takes (scenario text -> workload -> cluster -> report).
#include <gtest/gtest.h>

#include <string>

#include "sim/runner.h"

namespace myriad::sim {
namespace {

// 8 nodes of H100: two Llama-3.1-70B prefill units (TP4), two decode units (TP4), and the
// rest idle; a few hundred requests.
constexpr const char* kDisagg = R"(
seed: 11
duration: 60s
drain: 30m
hardware: {gpu: H100, nodes: 4, gpus_per_node: 8, nodes_per_rack: 2}
model: Llama-3.1-70B
pools:
  - {name: prefill, role: prefill, count: 2, layout: {tp: 4, dp: 1, ep: 1}, max_batch_tokens: 8192}
  - {name: decode, role: decode, count: 4, layout: {tp: 4, dp: 1, ep: 1}, max_seqs: 64}
workload:
  type: synthetic
  rate: 6
  input: {mean: 2000, cv: 1.0, min: 16, max: 16000}
  output: {mean: 300, cv: 1.0, min: 1, max: 4000}
  system_prompts: {count: 10, zipf: 1.0, tokens: 1000, fraction: 0.8}
  sessions: {fraction: 0.3, turns_mean: 3, think_time: 5s}
router: least-loaded
slo: {ttft: 2s, tpot: 100ms}
kv_block_tokens: 64
)";

nlohmann::ordered_json RunYaml(const std::string& yaml) {
  auto s = ParseScenario(yaml, "inline.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  auto r = RunScenario(*s);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

int64_t I(const nlohmann::ordered_json& j) { return j.get<int64_t>(); }

void ExpectConservation(const nlohmann::ordered_json& r) {
  const auto& q = r["requests"];
  EXPECT_GT(I(q["arrived"]), 0);
  // Every request is completed or rejected with a reason.
  EXPECT_EQ(I(q["arrived"]), I(q["completed"]) + I(q["rejected"]));
  int64_t by_reason = 0;
  for (const auto& [reason, n] : q["rejected_by_reason"].items()) by_reason += I(n);
  EXPECT_EQ(by_reason, I(q["rejected"]));
  const auto& t = r["tokens"];
  EXPECT_EQ(I(t["arrived_input"]), I(t["completed_input"]) + I(t["rejected_input"]));
  // No token appears or vanishes: decode steps produced exactly the completed outputs (plus
  // what unfinished requests produced), and every prompt token was computed or cached.
  EXPECT_EQ(I(t["decoded"]), I(t["completed_output"]) + I(t["unfinished_output_produced"]));
  if (I(q["rejected"]) == 0) {
    EXPECT_EQ(I(t["prefill_computed"]) + I(t["prefix_cached"]), I(t["completed_input"]));
  }
}

TEST(Cluster, DisaggregatedRunConservesRequestsAndTokens) {
  auto r = RunYaml(kDisagg);
  ExpectConservation(r);
  EXPECT_EQ(I(r["requests"]["rejected"]), 0);
  EXPECT_EQ(I(r["kv_transfer"]["count"]), I(r["requests"]["completed"]));
  EXPECT_GT(r["tokens"]["prefix_hit_rate"].get<double>(), 0.1) << "shared system prompts hit";
  EXPECT_GT(r["latency_s"]["ttft"]["p50"].get<double>(), 0);
  EXPECT_GT(r["cost"]["dollars"].get<double>(), 0);
}

TEST(Cluster, LittlesLawHolds) {
  auto r = RunYaml(kDisagg);
  const auto& l = r["littles_law"];
  const double lhs = l["mean_in_system"].get<double>(), rhs = l["lambda_times_w"].get<double>();
  ASSERT_GT(lhs, 0);
  EXPECT_NEAR(lhs, rhs, 0.05 * lhs);
}

TEST(Cluster, SameSeedSameBytesOtherSeedOtherResult) {
  const std::string a = RunYaml(kDisagg).dump();
  EXPECT_EQ(a, RunYaml(kDisagg).dump());
  std::string other = kDisagg;
  other.replace(other.find("seed: 11"), 8, "seed: 12");
  EXPECT_NE(a, RunYaml(other).dump());
}

TEST(Cluster, ColocatedUnitsAndEveryRouter) {
  std::string y = kDisagg;
  y.replace(y.find("  - {name: prefill"), y.find("workload:") - y.find("  - {name: prefill"),
            "  - {name: both, role: colocated, count: 4, layout: {tp: 8, dp: 1, ep: 1}, max_batch_tokens: 4096}\n");
  for (const char* router : {"random", "round-robin", "least-loaded"}) {
    std::string yr = y;
    yr.replace(yr.find("router: least-loaded"), 20, std::string("router: ") + router);
    auto r = RunYaml(yr);
    ExpectConservation(r);
    EXPECT_EQ(I(r["kv_transfer"]["count"]), 0) << router;
    EXPECT_EQ(I(r["requests"]["rejected"]), 0) << router;
  }
}

TEST(Cluster, PreemptionWhenKvRunsOutStillConserves) {
  // One small colocated unit with long outputs and many sequences allowed: KV runs out.
  std::string y = R"(
seed: 5
duration: 30s
drain: 1h
hardware: {gpu: H100, nodes: 1}
model: Llama-3.1-8B
pools:
  - {name: u, role: colocated, count: 1, layout: {tp: 1, dp: 1, ep: 1}, max_seqs: 1024, max_batch_tokens: 8192}
workload:
  type: synthetic
  rate: 3
  input: {mean: 8000, cv: 0.5, min: 1000, max: 30000}
  output: {mean: 6000, cv: 0.5, min: 1000, max: 20000}
  system_prompts: {count: 1, fraction: 0.0}
  sessions: {fraction: 0.0}
kv_block_tokens: 64
)";
  auto r = RunYaml(y);
  ExpectConservation(r);
  EXPECT_GT(I(r["tokens"]["preemptions"]), 0);
  EXPECT_GT(I(r["tokens"]["recomputed_after_preemption"]), 0);
  EXPECT_EQ(I(r["requests"]["rejected"]), 0);
}

TEST(Cluster, RejectsWithReasons) {
  std::string y = kDisagg;
  // A prompt larger than any unit's KV, and a one-deep queue that overflows under a burst.
  y.replace(y.find("max: 16000}"), 11, "max: 900000}");
  y.replace(y.find("input: {mean: 2000, cv: 1.0"), 27, "input: {mean: 90000, cv: 2.0");
  y.replace(y.find("max_batch_tokens: 8192}"), 23, "max_batch_tokens: 8192, max_waiting: 1}");
  auto r = RunYaml(y);
  ExpectConservation(r);
  const auto& reasons = r["requests"]["rejected_by_reason"];
  EXPECT_GT(I(reasons.value("exceeds_kv_capacity", nlohmann::ordered_json(0))), 0) << reasons.dump();
  EXPECT_GT(I(reasons.value("queue_full", nlohmann::ordered_json(0))), 0) << reasons.dump();
}

TEST(Cluster, UnfinishedRequestsAreReportedNotDropped) {
  std::string y = kDisagg;
  y.replace(y.find("drain: 30m"), 10, "drain: 1s");
  auto r = RunYaml(y);
  ExpectConservation(r);
  EXPECT_GT(I(r["requests"]["rejected_by_reason"]["unfinished_at_end"]), 0);
}

}  // namespace
}  // namespace myriad::sim
