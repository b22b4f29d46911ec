// The elasticity driver in whole simulations: a load step scales a pool out with the scale-out
// pipeline's lead time and back in by drain after it; a P/D imbalance moves a unit between
// pools; the static baseline holds its pools; and scenario errors name the key.
#include <gtest/gtest.h>

#include <string>

#include "perf/hardware.h"
#include "perf/model.h"
#include "perf/step_model.h"
#include "policy/recovery.h"
#include "sim/runner.h"
#include "sim/scenario.h"
#include "sim/synthetic_workload.h"

namespace myriad::sim {
namespace {

// Up to 8 prefill units (4 nodes each) of which 2 serve at first, one decode pool held fixed;
// the rate quadruples from 10m to 20m.
constexpr const char* kStep = R"(
name: elastic-step
seed: 5
duration: 40m
drain: 5m
hardware: {gpu: H200, nodes: 68, gpus_per_node: 8, nodes_per_rack: 16}
model: DeepSeek-V3
pools:
  - {name: prefill, role: prefill, count: 8, gpu: H100, gpu_hour_price: 1.5, layout: {tp: 1, dp: 32, ep: 32, nodes: 4, redundant_experts: 32}, max_batch_tokens: 16384}
  - {name: decode, role: decode, count: 2, layout: {tp: 1, dp: 144, ep: 144, nodes: 18, redundant_experts: 32}, max_seqs: 128}
workload:
  type: synthetic
  rate: 20
  input: {mean: 3000, cv: 0.5, min: 16, max: 32768}
  output: {mean: 200, cv: 0.5, min: 1, max: 4096}
  system_prompts: {count: 20, zipf: 1.1, tokens: 1000, fraction: 0.5}
  sessions: {fraction: 0}
  burst: {factor: 4, start: 10m, duration: 10m, ramp: 0s}
router: least-loaded
slo: {ttft: 2s, tpot: 100ms}
kv_block_tokens: 512
elastic:
  interval: 15s
  scale_out: {spare_acquire: 10s, comm_init: 5s, warmup: 10s, readiness: 5s}
  autoscale:
    - {pool: prefill, min: 2, initial: 2, target_utilisation: 0.6, headroom: 0.2, scale_in_dwell: 3m}
)";

nlohmann::ordered_json Simulate(const Scenario& s) {
  auto r = RunScenario(s);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : nlohmann::ordered_json();
}

TEST(ElasticScenarioTest, LoadStepScalesOutWithTheLeadTimeAndBackInByDrain) {
  auto s = ParseScenario(kStep, "step.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  const auto r = Simulate(*s);
  const auto& el = r["elastic"];
  const auto& prefill = el["pools"][0];
  // The lead time is the recovery pipeline's: node, weights from a serving peer, communicator,
  // warm-up, readiness.
  const auto step = perf::StepModel::Create(*perf::FindGpu("H100"), *perf::FindModel("DeepSeek-V3"),
                                            s->pools[0].layout, {.gpus_per_node = 8, .nic_gbps = 400}, s->calibration);
  ASSERT_TRUE(step.ok());
  const Nanos lead = policy::ScaleOutLeadTime(step->WeightBytesPerGpu() * 32, 4, true, 4, s->elastic.scale_out);
  EXPECT_NEAR(prefill["autoscaled"]["lead_time_s"].get<double>(), NanosToSeconds(lead), 1e-6);
  // Units added together load as one plan (policy::PlanWeightLoad): two at once by a chain from
  // serving peers, faster than both pulling from storage; one alone takes storage's faster
  // per-node rate.
  const auto& weights = el["weights"];
  ASSERT_TRUE(weights.is_object()) << el.dump(2);
  EXPECT_GE(weights["plans"]["chain"].get<int>(), 1) << weights.dump();
  EXPECT_GE(weights["plans"]["storage"].get<int>(), 1) << weights.dump();
  EXPECT_GE(weights["largest_load_units"].get<int>(), 2);
  EXPECT_LT(weights["largest_load_s"].get<double>(), weights["largest_load_from_storage_s"].get<double>());
  double first_add = -1, first_drain_after = -1;
  for (const auto& a : el["actions"]) {
    const double t = a["t_s"].get<double>();
    const std::string what = a["action"].get<std::string>();
    if (what.rfind("add", 0) == 0 && first_add < 0 && t >= 600) first_add = t;
    if (what.rfind("drain", 0) == 0 && t > 1200 && first_drain_after < 0) first_drain_after = t;
  }
  // Scaled out within two ticks of the step, and back in once the dwell has passed after it.
  EXPECT_GE(first_add, 600);
  EXPECT_LE(first_add, 630);
  EXPECT_GE(first_drain_after, 1200 + 180);
  EXPECT_GT(prefill["units_peak"].get<int>(), 2);
  EXPECT_LE(prefill["units_low"].get<int>(), 3);
  EXPECT_EQ(prefill["gpu"], "H100");
  // Idle capacity costs: the prefill pool's GPU-hours are its units' allocations, under what
  // all 8 for the whole run would be, above the 2 it started with.
  const double end_h = r["scenario"]["end_s"].get<double>() / 3600;
  const double h = prefill["gpu_hours"].get<double>();
  EXPECT_LT(h, 8 * 32 * end_h);
  EXPECT_GT(h, 2 * 32 * end_h);
  EXPECT_NEAR(r["cost"]["dollars"].get<double>(), h * 1.5 + el["pools"][1]["gpu_hours"].get<double>() * 2.0, 1e-6);
}

TEST(ElasticScenarioTest, SameSeedSameBytesAndTheStaticBaselineHoldsItsPools) {
  auto s = ParseScenario(kStep, "step.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  s->duration = 15 * kMinute;
  EXPECT_EQ(Simulate(*s).dump(), Simulate(*s).dump());
  s->elastic.act = false;
  const auto r = Simulate(*s);
  EXPECT_EQ(r["elastic"]["actions_total"], 0);
  const double end_h = r["scenario"]["end_s"].get<double>() / 3600;
  EXPECT_NEAR(r["elastic"]["pools"][0]["gpu_hours"].get<double>(), 8 * 32 * end_h, 1e-6);
  EXPECT_NEAR(r["cost"]["gpu_hours"].get<double>(), (8 * 32 + 2 * 144) * end_h, 1e-6);
}

// Prefill and decode of the same shape (4-node units on H200): a prompt-heavy load on a
// decode-heavy split moves units to prefill.
constexpr const char* kPd = R"(
name: elastic-pd
seed: 3
duration: 30m
drain: 5m
hardware: {gpu: H200, nodes: 48, gpus_per_node: 8}
model: DeepSeek-V3
pools:
  - {name: prefill, role: prefill, count: 6, layout: {tp: 1, dp: 32, ep: 32, nodes: 4, redundant_experts: 32}, max_batch_tokens: 16384}
  - {name: decode, role: decode, count: 6, layout: {tp: 1, dp: 32, ep: 32, nodes: 4, redundant_experts: 32}, max_seqs: 128}
workload:
  type: synthetic
  rate: 21
  input: {mean: 6000, cv: 0.3, min: 16, max: 32768}
  output: {mean: 50, cv: 0.3, min: 1, max: 1024}
  system_prompts: {count: 20, zipf: 1.1, tokens: 1000, fraction: 0.2}
  sessions: {fraction: 0}
router: least-loaded
slo: {ttft: 2s, tpot: 100ms}
kv_block_tokens: 512
elastic:
  interval: 15s
  scale_out: {warmup: 20s, readiness: 5s}
  pd_ratio: {prefill: prefill, decode: decode, prefill_initial: 1, decode_initial: 5, confirm: 1m, dwell: 2m}
)";

TEST(ElasticScenarioTest, PdImbalanceSwitchesDecodeUnitsToPrefill) {
  auto s = ParseScenario(kPd, "pd.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  const auto r = Simulate(*s);
  const auto& pools = r["elastic"]["pools"];
  EXPECT_GE(pools[0]["pd_ratio"]["switched_in"].get<int>(), 1) << r["elastic"].dump(2);
  EXPECT_EQ(pools[0]["pd_ratio"]["switched_in"], pools[1]["pd_ratio"]["switched_out"]);
  // The imbalance is confirmed for a minute before the first switch; switches are spaced by the
  // dwell at least.
  ASSERT_FALSE(r["elastic"]["actions"].empty());
  EXPECT_GE(r["elastic"]["actions"][0]["t_s"].get<double>(), 60);
  double last = -1e9;
  for (const auto& a : r["elastic"]["actions"]) {
    const double t = a["t_s"].get<double>();
    EXPECT_GE(t - last, 120) << a.dump();
    last = t;
  }
}

TEST(ElasticScenarioTest, BurstTriplesTheRateOnItsPlateauAndLeavesTheRestAlone) {
  SyntheticOptions o;
  o.rate = 100;
  o.session_fraction = 0;
  o.duration = 40 * kMinute;
  auto count = [](SyntheticOptions opt, Nanos from, Nanos to) {
    auto w = MakeSyntheticWorkload(opt);
    EXPECT_TRUE(w.ok());
    int64_t n = 0;
    while (auto r = (*w)->Next()) n += r->arrival >= from && r->arrival < to;
    return n;
  };
  SyntheticOptions b = o;
  b.burst_factor = 3;
  b.burst_start = 10 * kMinute;
  b.burst_ramp = 5 * kMinute;
  b.burst_duration = 10 * kMinute;
  // Before the burst the arrivals are the same ones; on the plateau there are three times as
  // many; the ramps add half their length's worth of the extra rate each.
  EXPECT_EQ(count(o, 0, 10 * kMinute), count(b, 0, 10 * kMinute));
  const double plateau = static_cast<double>(count(b, 15 * kMinute, 25 * kMinute)) / count(o, 15 * kMinute, 25 * kMinute);
  EXPECT_NEAR(plateau, 3.0, 0.1);
  const double whole = static_cast<double>(count(b, 0, 40 * kMinute) - count(o, 0, 40 * kMinute));
  EXPECT_NEAR(whole, 200.0 * (600 + 300), 0.03 * 200 * 900);  // (factor-1) x rate x (plateau + ramp)
}

TEST(ElasticScenarioTest, ErrorsNameTheKey) {
  const std::string base = kStep;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string y = base;
    y.replace(y.find(from), from.size(), to);
    auto s = ParseScenario(y, "step.yaml");
    EXPECT_FALSE(s.ok()) << to;
    return s.ok() ? std::string() : std::string(s.status().message());
  };
  EXPECT_NE(with("pool: prefill, min: 2", "pool: nope, min: 2").find("elastic.autoscale[0].pool: 'nope' names no pool"),
            std::string::npos);
  EXPECT_NE(with("min: 2, initial: 2", "min: 2, initial: 9").find("elastic.autoscale[0].initial"), std::string::npos);
  EXPECT_NE(with("interval: 15s", "interval: 0s").find("elastic.interval: must be between 1s and 1h"), std::string::npos);
  EXPECT_NE(with("factor: 4", "factor: 1000").find("workload.burst.factor: must be in [1, 100]"), std::string::npos);
  EXPECT_NE(with("gpu: H100,", "gpu: H999,").find("pools[0].gpu"), std::string::npos);
  EXPECT_NE(with("gpu_hour_price: 1.5", "gpu_hour_price: -1").find("pools[0].gpu_hour_price"), std::string::npos);
  EXPECT_NE(with("spare_acquire: 10s", "eject: 10s").find("elastic.scale_out"), std::string::npos);
  EXPECT_NE(with("  autoscale:", "  pd_ratio: {prefill: prefill, decode: decode}\n  autoscale:").find("autoscaled too"),
            std::string::npos);
  // The line is named too.
  EXPECT_NE(with("interval: 15s", "interval: 0s").find("step.yaml:"), std::string::npos);
}

}  // namespace
}  // namespace myriad::sim
