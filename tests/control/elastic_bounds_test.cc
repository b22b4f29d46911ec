// The autoscaler's and the P/D ratio's bounds are the policies' own (CheckScalerOptions,
// CheckForecast, CheckPdRatioOptions): the controller's file and the simulator's scenario refuse
// the same value with the same words, each at its own line.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "control/config.h"
#include "sim/scenario.h"

namespace myriad {
namespace {

constexpr const char* kScenario = R"(name: bounds
duration: 10m
hardware: {gpu: H100, nodes: 2, gpus_per_node: 8, nodes_per_rack: 16}
model: Llama-3.1-8B
pools:
  - {name: prefill, role: prefill, count: 4, layout: {tp: 1}}
  - {name: decode, role: decode, count: 4, layout: {tp: 1}}
workload: {type: synthetic, rate: 1}
elastic:
)";

std::string SimError(const std::string& section) {
  auto s = sim::ParseScenario(std::string(kScenario) + section, "s.yaml");
  EXPECT_FALSE(s.ok()) << section;
  return s.ok() ? "" : std::string(s.status().message());
}

std::string ControlError(const std::string& yaml) {
  auto c = control::ParseControlConfig(yaml, "c.yaml", /*fleet_given=*/true);
  EXPECT_FALSE(c.ok()) << yaml;
  return c.ok() ? "" : std::string(c.status().message());
}

TEST(ElasticBounds, TheControllerAndTheSimulatorRefuseTheSameValuesAlike) {
  struct Case {
    std::string key, value, why;
  };
  const Case scaler[] = {
      {"target_utilisation", "0", "must be in [0.05, 1] (got 0)"},
      {"headroom", "11", "must be in [0, 10] (got 11)"},
      {"scale_in_dwell", "25h", "must be in [0s, 24h] (got 25h)"},
      {"scale_in_margin", "0.95", "must be in [0, 0.9] (got 0.95)"},
      {"scale_in_step", "0", "must be in [0.01, 1] (got 0)"},
  };
  for (const Case& c : scaler) {
    const std::string sim = SimError(fmt::format("  autoscale:\n    - {{pool: prefill, {}: {}}}\n", c.key, c.value));
    EXPECT_NE(sim.find(fmt::format("s.yaml:11: elastic.autoscale[0].{}: {}", c.key, c.why)), std::string::npos) << sim;
    const std::string ctl = ControlError(fmt::format("autoscale:\n  pools: {{prefill: {{max: 2}}}}\n  {}: {}\n", c.key, c.value));
    EXPECT_NE(ctl.find(fmt::format("c.yaml:3: autoscale.{}: {}", c.key, c.why)), std::string::npos) << ctl;
  }
  const Case forecast[] = {{"period", "30s", "must be in [1m, 168h] (got 30s)"},
                           {"buckets", "10001", "must be in [1, 10000] (got 10001)"}};
  for (const Case& c : forecast) {
    const std::string sim = SimError(fmt::format("  forecast: {{{}: {}}}\n", c.key, c.value));
    EXPECT_NE(sim.find(fmt::format("s.yaml:10: elastic.forecast.{}: {}", c.key, c.why)), std::string::npos) << sim;
    const std::string ctl = ControlError(
        fmt::format("autoscale:\n  pools: {{prefill: {{max: 2}}}}\n  forecast: {{{}: {}}}\n", c.key, c.value));
    EXPECT_NE(ctl.find(fmt::format("c.yaml:3: autoscale.forecast.{}: {}", c.key, c.why)), std::string::npos) << ctl;
  }
  const Case pd[] = {{"high", "0", "must be in [0.01, 100] (got 0)"},
                     {"queue_high", "-1", "must be in [0, 1000000] (got -1)"},
                     {"confirm", "25h", "must be in [0s, 24h] (got 25h)"},
                     {"dwell", "48h", "must be in [0s, 24h] (got 48h)"}};
  for (const Case& c : pd) {
    const std::string sim =
        SimError(fmt::format("  pd_ratio: {{prefill: prefill, decode: decode, {}: {}}}\n", c.key, c.value));
    EXPECT_NE(sim.find(fmt::format("s.yaml:10: elastic.pd_ratio.{}: {}", c.key, c.why)), std::string::npos) << sim;
    const std::string ctl = ControlError(fmt::format("pd_ratio: {{{}: {}}}\n", c.key, c.value));
    EXPECT_NE(ctl.find(fmt::format("c.yaml:1: pd_ratio.{}: {}", c.key, c.why)), std::string::npos) << ctl;
  }
}

}  // namespace
}  // namespace myriad
