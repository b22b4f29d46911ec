// Sleep instead of release (policy/unit_sleep.h) and the burst metric's decode wait
// (policy::DecodeLatencyOverSlo) in whole simulations.
#include <gtest/gtest.h>

#include <string>

#include "policy/autoscaler.h"
#include "sim/runner.h"
#include "sim/scenario.h"

namespace myriad::sim {
namespace {

nlohmann::ordered_json Simulate(const Scenario& s) {
  auto r = RunScenario(s);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : nlohmann::ordered_json();
}

// Up to 8 prefill units, 2 at first; the rate quadruples twice (10m-20m and 35m-45m), so the
// units drained after the first step are there to be woken by the second.
constexpr const char* kTwoSteps = R"(
name: elastic-sleep
seed: 5
duration: 55m
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
  diurnal: {amplitude: 0.6, period: 25m, phase: 0}
router: least-loaded
slo: {ttft: 2s, tpot: 100ms}
kv_block_tokens: 512
elastic:
  interval: 15s
  scale_out: {spare_acquire: 10s, comm_init: 5s, warmup: 10s, readiness: 5s}
  sleep: {mode: host, max_units: 8, pcie_gb_per_s: 25}
  autoscale:
    - {pool: prefill, min: 2, initial: 2, target_utilisation: 0.6, headroom: 0.2, scale_in_dwell: 3m}
)";

TEST(ElasticSleepTest, ScaleInSleepsAndScaleOutWakesTheSleepersFirst) {
  auto s = ParseScenario(kTwoSteps, "sleep.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  const auto host = Simulate(*s);
  const auto& pool = host["elastic"]["pools"][0];
  ASSERT_TRUE(pool.contains("sleep")) << pool.dump(2);
  EXPECT_GT(pool["sleep"]["sleeps"].get<int>(), 0) << host["elastic"]["actions"].dump(2);
  EXPECT_GT(pool["sleep"]["wakes"].get<int>(), 0) << host["elastic"]["actions"].dump(2);
  EXPECT_GT(pool["sleep"]["sleeping_unit_hours"].get<double>(), 0);
  bool said = false;
  for (const auto& a : host["elastic"]["actions"]) said |= a["action"].get<std::string>().find("to sleep") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_EQ(Simulate(*s).dump(), host.dump()) << "same seed, same bytes";
  // Sleeping on the GPUs holds them: the same decisions cost at least as many GPU-hours as with
  // the weights in host memory, by the hours the sleepers spent asleep (4 nodes x 8 GPUs each).
  s->elastic.sleep.mode = policy::SleepMode::kGpu;
  const auto gpu = Simulate(*s);
  EXPECT_GT(gpu["elastic"]["pools"][0]["gpu_hours"].get<double>(), pool["gpu_hours"].get<double>());
  // Without sleep every drained unit is released and every scale-out is a cold start.
  s->elastic.sleep.mode = policy::SleepMode::kOff;
  const auto off = Simulate(*s);
  EXPECT_FALSE(off["elastic"]["pools"][0].contains("sleep"));
}

TEST(ElasticSleepTest, ErrorsNameTheKey) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string y = kTwoSteps;
    y.replace(y.find(from), from.size(), to);
    auto s = ParseScenario(y, "sleep.yaml");
    EXPECT_FALSE(s.ok()) << to;
    return s.ok() ? std::string() : std::string(s.status().message());
  };
  EXPECT_NE(with("mode: host", "mode: disk").find("sleep.yaml:"), std::string::npos);
  EXPECT_NE(with("mode: host", "mode: disk").find("elastic.sleep.mode: must be off, host or gpu"), std::string::npos);
  EXPECT_NE(with("max_units: 8", "max_units: -1").find("elastic.sleep.max_units: must be between 0 and 1000000"),
            std::string::npos);
  EXPECT_NE(with("pcie_gb_per_s: 25", "pcie_gb_per_s: 5000").find("elastic.sleep.pcie_gb_per_s: must be in [0.1, 1000]"),
            std::string::npos);
  EXPECT_NE(with("pcie_gb_per_s: 25", "pcie: 25").find("elastic.sleep"), std::string::npos);
}

TEST(DecodeLatencyTest, StepTimeOrSlotWaitWhicheverIsWorse) {
  const Nanos tpot = 100 * kMillisecond, ttft = 2 * kSecond;
  // 40 ms steps, nobody waiting: 0.4 of the TPOT SLO.
  EXPECT_DOUBLE_EQ(policy::DecodeLatencyOverSlo({.busy_s = 4, .steps = 100, .window_s = 15}, tpot, ttft), 0.4);
  // 120 sequences waiting, 30 took a slot in 15 s (2/s): a 60 s wait, 30x the TTFT SLO.
  EXPECT_DOUBLE_EQ(
      policy::DecodeLatencyOverSlo({.busy_s = 4, .steps = 100, .waiting = 120, .admitted = 30, .window_s = 15}, tpot, ttft),
      30);
  // Nobody took a slot all window: the queue has waited at least the window.
  EXPECT_DOUBLE_EQ(policy::DecodeLatencyOverSlo({.waiting = 5, .window_s = 15}, tpot, ttft), 7.5);
}

// One decode unit of 8 slots on Llama-3.1-8B behind ample prefill; every request 200 prompt
// and 100 output tokens. A 3x burst (4/s to 12/s for 2 minutes) outruns the slots: sequences
// wait for one while each step stays far under the TPOT SLO.
constexpr const char* kDecodeWait = R"(
name: decode-wait
seed: 7
duration: 15m
drain: 5m
hardware: {gpu: H100, nodes: 1, gpus_per_node: 8, nodes_per_rack: 16}
model: Llama-3.1-8B
pools:
  - {name: prefill, role: prefill, count: 4, layout: {tp: 1}, max_batch_tokens: 8192}
  - {name: decode, role: decode, count: 1, layout: {tp: 1}, max_seqs: 8}
workload:
  type: synthetic
  rate: 4
  input: {mean: 200, cv: 0, min: 200, max: 200}
  output: {mean: 100, cv: 0, min: 100, max: 100}
  system_prompts: {count: 1, zipf: 1.1, tokens: 16, fraction: 0}
  sessions: {fraction: 0}
  burst: {factor: 3, start: 5m, duration: 2m, ramp: 0s}
router: least-loaded
slo: {ttft: 2s, tpot: 100ms}
elastic:
  interval: 15s
  autoscale:
    - {pool: prefill, min: 4, initial: 4}
)";

TEST(ElasticBurstTest, AbsorbedAfterCountsTheWaitForDecodeSlots) {
  auto s = ParseScenario(kDecodeWait, "wait.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  const auto r = Simulate(*s);
  const double absorbed = r["elastic"]["burst"]["absorbed_after_s"].get<double>();
  // By hand: 8 slots, each held for 100 steps. The step time is the run's own (TPOT p50, a
  // full batch of 8); the slots serve mu = 8 / (100 x step) sequences a second.
  const double step = r["latency_s"]["tpot"]["p50"].get<double>();
  const double mu = 8 / (100 * step);
  ASSERT_GT(mu, 4.5) << "the base rate must fit";
  ASSERT_LT(mu, 11) << "the burst must not";
  // The queue grows at 12 - mu for the 120 s of the burst and drains at mu - 4 after; the
  // signal is over 1 while the wait, queue / mu, is over the 2 s TTFT SLO. The last tick over it
  // is the last multiple of 15 s before that, and the metric runs to the end of that tick.
  const double queue = (12 - mu) * 120;
  const double over_until = 300 + 120 + (queue - 2 * mu) / (mu - 4);
  const double hand = std::floor(over_until / 15) * 15 + 15 - 300;
  EXPECT_GT(absorbed, 0) << "the step time alone never passes the TPOT SLO here: " << step;
  // Poisson arrivals: within two ticks of the hand calculation.
  EXPECT_NEAR(absorbed, hand, 30) << "step " << step << " s, mu " << mu << "/s, queue " << queue;
}

}  // namespace
}  // namespace myriad::sim
