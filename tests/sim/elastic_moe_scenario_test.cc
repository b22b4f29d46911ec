// Elastic EP on units stepped rank by rank (pools with a `moe:` section): a DeepSeek-V3 unit
// that loses a node or a GPU serves on the ranks left while every expert keeps a copy, its
// prefill spread over the live ranks only and its steps paced by the hottest surviving GPU, as
// perf::MoeStepModel predicts; it stops as a whole when an expert loses its only copy.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "fault_test_util.h"
#include "perf/hardware.h"
#include "perf/model.h"
#include "perf/moe_step.h"
#include "policy/elastic_ep.h"
#include "sim/moe_placement.h"
#include "sim/runner.h"

namespace myriad::sim {
namespace {

using fault_test::D;
using fault_test::ExpectNothingLost;
using fault_test::I;

constexpr int kPrompt = 48000;
const std::string kNodeLoss = "[{at: 60s, kind: crash, unit: 0, rank: 3}]";  // ranks 0-7 go
const std::string kGpuLoss = "[{at: 60s, kind: software_crash, unit: 0, rank: 3}]";

// Prompts of 48,000 tokens sharing nothing, each answered with one token: on an idle unit its
// TTFT is exactly one prefill step.
std::string WriteTrace(const std::vector<int>& at_s) {
  const std::string path =
      testing::TempDir() + "/elastic_moe_" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".jsonl";
  std::ofstream out(path);
  uint64_t id = 1;
  for (int t : at_s) {
    out << "{\"timestamp\": " << t * 1000 << ", \"input_length\": " << kPrompt << ", \"output_length\": 1, \"hash_ids\": [";
    for (int b = 0; b < (kPrompt + 511) / 512; ++b) out << (b > 0 ? ", " : "") << id++;
    out << "]}\n";
  }
  return path;
}

// One unit of 2 nodes of H200 (EP16, 256 redundant experts: room for two copies of each) and
// 2 spare nodes; the same round recovery times as the evenly-loaded elastic EP tests.
std::string Yaml(const std::string& elastic, const std::string& scripted, const std::string& trace) {
  return R"(
seed: 5
duration: 10m
drain: 10m
hardware: {gpu: H200, nodes: 4, gpus_per_node: 8, nodes_per_rack: 2}
model: DeepSeek-V3
pools:
  - name: serve
    role: colocated
    count: 1
    layout: {tp: 1, dp: 16, ep: 16, nodes: 2, redundant_experts: 256}
    moe: {expert_skew: 0.5, placement: eplb}
workload: {type: mooncake, path: )" + trace + R"(}
router: least-loaded
slo: {ttft: 600s, tpot: 1s}
kv_block_tokens: 256
)" + fault_test::ElasticFaults(scripted, elastic);
}

// The prefill step perf::MoeStepModel predicts for one prompt spread over the live ranks, with
// the experts' load on the copies the lost GPUs leave (or on their re-placement).
double PredictedStep(const std::string& yaml, const std::vector<int>& dead, bool replaced) {
  auto s = ParseScenario(yaml, "inline.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  const PoolConfig& pool = s->pools[0];
  auto model = perf::FindModel(s->model);
  auto step = perf::StepModel::Create(*perf::FindGpu(s->hardware.gpu), *model, pool.layout,
                                      perf::Fabric{.gpus_per_node = s->hardware.gpus_per_node, .nic_gbps = s->hardware.nic_gbps},
                                      s->calibration);
  EXPECT_TRUE(step.ok()) << step.status();
  auto placed = PlacePoolExperts(*s, 0);
  EXPECT_TRUE(placed.ok()) << placed.status();
  std::vector<int32_t> phy2log = placed->placement.phy2log;
  if (replaced) {
    const ElasticEpConfig& el = s->faults.elastic_ep;
    auto re = policy::ReplaceOnLiveGpus(placed->weights, placed->placement, dead, model->expert_groups,
                                        model->ExpertParams() * model->weight_bytes, s->hardware.nic_gbps / 8 * 1e9 * 0.8,
                                        *policy::ParseReplaceMode(el.rebalance_mode), el.rebalance_tolerance);
    EXPECT_TRUE(re.ok()) << re.status();
    phy2log = re->placement.phy2log;
  } else if (!dead.empty()) {
    auto v = policy::CheckElasticEp(placed->placement, dead);
    EXPECT_TRUE(v.ok() && v->survives);
    phy2log = v->phy2log;
  }
  const int ep = pool.layout.ep;
  auto load = perf::ExpertLoad::FromPlacement(placed->popularity, phy2log, placed->placement.physical_experts, ep);
  EXPECT_TRUE(load.ok()) << load.status();
  perf::MoeStepModel moe(*step, *load, {.spine_oversubscription = s->hardware.spine_oversubscription});
  std::vector<uint8_t> mask(static_cast<size_t>(ep), 0);
  for (int g : dead) mask[static_cast<size_t>(g)] = 1;
  moe.set_dead_ranks(mask);
  std::vector<int> live;
  for (int r = 0; r < ep; ++r) {
    if (mask[static_cast<size_t>(r)] == 0) live.push_back(r);
  }
  std::vector<perf::BatchShape> ranks(static_cast<size_t>(ep));
  const auto n = static_cast<int64_t>(live.size());
  for (int64_t i = 0; i < n; ++i) {
    perf::BatchShape& b = ranks[static_cast<size_t>(live[static_cast<size_t>(i)])];
    b.prefill_tokens = kPrompt / n + (i < kPrompt % n ? 1 : 0);
    b.prefill_seqs = i == 0 ? 1 : 0;
    b.prefill_attended = static_cast<double>(kPrompt) * (kPrompt + 1) / 2 / static_cast<double>(n);
  }
  return NanosToSeconds(SecondsToNanos(moe.Step(ranks).total_s));
}

const std::vector<int> kNode = {0, 1, 2, 3, 4, 5, 6, 7};

TEST(ElasticMoeScenario, AUnitLosingANodeServesDegradedPacedByItsHottestSurvivingGpu) {
  // Prompts at 0 (whole), 150 s (degraded: resumed at 100, whole at 206) and 400 s (whole).
  const std::string trace = WriteTrace({0, 150, 400});
  const std::string yaml = Yaml("{enabled: true}", kNodeLoss, trace);
  const auto r = fault_test::RunFaults(yaml);
  const auto& f = r["failures"];
  const auto& e = f["events"][0];
  EXPECT_DOUBLE_EQ(D(e["detected_s"]), 69);  // ten failed scrapes, 60 s to 69 s
  EXPECT_DOUBLE_EQ(D(e["resumed_degraded_s"]), 100);
  EXPECT_NEAR(D(e["recovered_s"]), 206, 1e-2);
  const auto& el = f["elastic_ep"];
  EXPECT_EQ(I(el["faults_ridden_out_degraded"]), 1);
  EXPECT_EQ(el["pools"]["serve"]["stepped"], "rank_by_rank");
  EXPECT_EQ(el["pools"]["serve"]["node_losses_survivable"], "2/2");
  // Half the GPUs carry all the experts' load, and the hottest of them more than its half.
  EXPECT_GT(D(e["degraded_expert_imbalance"]), 2.0);
  EXPECT_LE(D(e["degraded_expert_imbalance"]), D(el["pools"]["serve"]["worst_degraded_expert_imbalance"]));

  const double whole = PredictedStep(yaml, {}, false);
  const double degraded = PredictedStep(yaml, kNode, false);
  const auto& ttft = r["latency_s"]["ttft"];
  ASSERT_EQ(I(ttft["count"]), 3);
  EXPECT_NEAR(D(ttft["max"]), degraded, 1e-6 * degraded);  // kept as float
  EXPECT_NEAR(3 * D(ttft["mean"]), 2 * whole + degraded, 1e-9);
  // Eight ranks take the prompt the sixteen shared, and the lost copies' load: about twice as slow.
  EXPECT_GT(degraded, 1.9 * whole);
  EXPECT_LT(degraded, 2.3 * whole);
  ExpectNothingLost(r);
  EXPECT_EQ(I(r["requests"]["completed"]), 3);
  // The straggler view counts each rank's compute against the steps it was live for: the lost
  // node's ranks, idle while dead, do not look like the surviving ranks' stragglers.
  const auto clean = fault_test::RunFaults(Yaml("{enabled: true}", "[]", trace));
  const double ratio = D(r["pools"][0]["moe"]["rank_busy_max_over_mean"]);
  const double clean_ratio = D(clean["pools"][0]["moe"]["rank_busy_max_over_mean"]);
  EXPECT_GE(ratio, 1.0);
  EXPECT_NEAR(ratio, clean_ratio, 0.1 * clean_ratio);

  // Off, the unit is down from 60 s until it is rebuilt whole, every node loading from storage
  // (no other unit of the pool serves as a peer): the prompt of 150 s finds no unit.
  const std::string off_yaml = Yaml("{enabled: false}", kNodeLoss, trace);
  const auto off = fault_test::RunFaults(off_yaml);
  EXPECT_GT(D(off["failures"]["events"][0]["recovered_s"]), 236);
  EXPECT_FALSE(off["failures"]["events"][0].contains("resumed_degraded_s"));
  EXPECT_EQ(I(off["requests"]["rejected_by_reason"]["no_available_unit"]), 1);
  EXPECT_EQ(I(off["latency_s"]["ttft"]["count"]), 2);
  // DeepSeek's own EPLB (one copy of the cold experts, the rest by load) steps a little faster
  // whole: two spread copies of every expert are elastic EP's price.
  const double eplb = PredictedStep(off_yaml, {}, false);
  EXPECT_NEAR(D(off["latency_s"]["ttft"]["mean"]), eplb, 1e-9);
  EXPECT_LT(eplb, whole);
}

TEST(ElasticMoeScenario, AUnitLosingOneGpuSpreadsItsPrefillOverTheOtherFifteen) {
  // A restarted process: only rank 3 goes, and comes back at 146 s (no node to replace).
  // Prompts at 0, 120 s (degraded: resumed at 100) and 300 s (whole again).
  const std::string trace = WriteTrace({0, 120, 300});
  const std::string yaml = Yaml("{enabled: true}", kGpuLoss, trace);
  const auto r = fault_test::RunFaults(yaml);
  const auto& e = r["failures"]["events"][0];
  EXPECT_DOUBLE_EQ(D(e["resumed_degraded_s"]), 100);
  EXPECT_NEAR(D(e["recovered_s"]), 146, 1e-2);
  const double whole = PredictedStep(yaml, {}, false);
  const double degraded = PredictedStep(yaml, {3}, false);
  EXPECT_GT(degraded, whole);
  const auto& ttft = r["latency_s"]["ttft"];
  EXPECT_NEAR(D(ttft["max"]), degraded, 1e-6 * degraded);
  EXPECT_NEAR(3 * D(ttft["mean"]), 2 * whole + degraded, 1e-9);
  ExpectNothingLost(r);
}

TEST(ElasticMoeScenario, APlacementThatOrphansAnExpertStopsTheUnit) {
  // DeepSeek's EPLB as is (min_copies 1): the cold experts have one copy, some on the lost node.
  const std::string trace = WriteTrace({0, 150, 400});
  const auto r = fault_test::RunFaults(Yaml("{enabled: true, min_copies: 1}", kNodeLoss, trace));
  const auto off = fault_test::RunFaults(Yaml("{enabled: false}", kNodeLoss, trace));
  const auto& f = r["failures"];
  EXPECT_EQ(f["elastic_ep"]["pools"]["serve"]["node_losses_survivable"], "0/2");
  EXPECT_EQ(I(f["elastic_ep"]["faults_stopping_the_unit_orphaned_experts"]), 1);
  EXPECT_EQ(I(f["elastic_ep"]["faults_ridden_out_degraded"]), 0);
  EXPECT_FALSE(f["events"][0].contains("resumed_degraded_s"));
  // Down from 60 s until rebuilt whole, exactly as without elastic EP; the prompt of 150 s
  // finds no unit.
  const double back = D(f["events"][0]["recovered_s"]);
  EXPECT_DOUBLE_EQ(back, D(off["failures"]["events"][0]["recovered_s"]));
  EXPECT_NEAR(D(f["availability"]["serve"]), 1 - (back - 60) / D(r["scenario"]["end_s"]), 1e-6);
  EXPECT_EQ(I(r["requests"]["rejected_by_reason"]["no_available_unit"]), 1);
  ExpectNothingLost(r);
}

TEST(ElasticMoeScenario, ReplacingTheSurvivingCopiesBalancesTheDegradedUnitAfterAFetch) {
  const std::string trace = WriteTrace({0, 150, 400});
  const auto kept = fault_test::RunFaults(Yaml("{enabled: true}", kNodeLoss, trace));
  const double before = D(kept["failures"]["events"][0]["degraded_expert_imbalance"]);
  double moved[2] = {0, 0};
  for (const char* mode : {"full", "incremental"}) {
    SCOPED_TRACE(mode);
    const std::string yaml = Yaml(fmt::format("{{enabled: true, rebalance: true, rebalance_mode: {}}}", mode), kNodeLoss, trace);
    const auto r = fault_test::RunFaults(yaml);
    const auto& e = r["failures"]["events"][0];
    const auto& re = r["failures"]["elastic_ep"]["re_placements"];
    EXPECT_EQ(I(re["count"]), 1);
    EXPECT_EQ(re["mode"], mode);
    // Each live GPU fetches the experts it did not hold, from peers, after the reconfiguration.
    const double pause = D(e["re_placement_pause_s"]);
    EXPECT_GT(pause, 0.01);
    EXPECT_LT(pause, 10);
    moved[mode[0] == 'f' ? 0 : 1] = D(e["re_placement_gigabytes"]);
    EXPECT_GT(D(e["re_placement_gigabytes"]), 0);
    EXPECT_NEAR(D(e["resumed_degraded_s"]), 100 + pause, 1e-9);
    EXPECT_NEAR(D(e["recovered_s"]), 206, 1e-2);
    // Closer to the even share of eight GPUs (2.0) than the surviving copies as they were.
    EXPECT_LT(D(e["degraded_expert_imbalance"]), before);
    EXPECT_GE(D(e["degraded_expert_imbalance"]), 2.0);
    const double degraded = PredictedStep(yaml, kNode, true);
    EXPECT_LT(degraded, PredictedStep(yaml, kNode, false));
    EXPECT_NEAR(D(r["latency_s"]["ttft"]["max"]), degraded, 1e-6 * degraded);
    ExpectNothingLost(r);
  }
  // The incremental re-placement keeps the surviving slots: it fetches less than a fresh one.
  EXPECT_LT(moved[1], moved[0]);
}

TEST(ElasticMoeScenario, RandomFaultsOnDriftingRebalancedUnitsAreDeterministic) {
  const std::string trace = WriteTrace({0});
  std::string yaml = Yaml("{enabled: true, rebalance: true}", "[]", trace);
  // Random faults at a high rate over a synthetic load, with drifting experts and rebalancing.
  yaml.replace(yaml.find("  rates: none\n"), 14, "  rates: default\n  rate_scale: 100000\n");
  yaml.replace(yaml.find("workload: {type: mooncake"), yaml.find("router:") - yaml.find("workload: {type: mooncake"),
               "workload: {type: synthetic, rate: 4, input: {mean: 2000, cv: 1.0, min: 16, max: 16000},"
               " output: {mean: 200, cv: 1.0, min: 1, max: 2000}}\n");
  yaml.replace(yaml.find("placement: eplb}"), 16, "placement: eplb, drift_interval: 1m, drift_fraction: 0.05, rebalance_interval: 3m}");
  const auto a = fault_test::RunFaults(yaml);
  const auto b = fault_test::RunFaults(yaml);
  EXPECT_EQ(a.dump(), b.dump());
  int64_t faults = 0;
  for (const auto& [k, n] : a["failures"]["faults"].items()) faults += I(n);
  EXPECT_GT(faults, 3);
  EXPECT_GT(I(a["failures"]["elastic_ep"]["faults_ridden_out_degraded"]), 0);
  ExpectNothingLost(a);
}

}  // namespace
}  // namespace myriad::sim
