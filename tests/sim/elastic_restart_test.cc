// Rolling restarts in whole simulations (elastic.restarts, policy::NextToRestart): every unit of
// the pool is taken out, reloaded and returned, never more at once than the buffer allows, and
// no request is lost on the way.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "sim/runner.h"
#include "sim/scenario.h"

namespace myriad::sim {
namespace {

constexpr const char* kRestart = R"(
name: rolling-restart
seed: 11
duration: 15m
drain: 5m
hardware: {gpu: H100, nodes: 1, gpus_per_node: 8, nodes_per_rack: 16}
model: Llama-3.1-8B
pools:
  - {name: serve, role: colocated, count: 6, layout: {tp: 1}, max_seqs: 64}
workload:
  type: synthetic
  rate: 6
  input: {mean: 1000, cv: 0.5, min: 16, max: 8192}
  output: {mean: 100, cv: 0.5, min: 1, max: 1024}
  sessions: {fraction: 0}
router: least-loaded
slo: {ttft: 2s, tpot: 100ms}
elastic:
  interval: 15s
  scale_out: {comm_init: 5s, warmup: 10s, readiness: 5s}
RESTARTS)";

std::string With(const std::string& restarts) {
  std::string y = kRestart;
  y.replace(y.find("RESTARTS"), 8, restarts);
  return y;
}

nlohmann::ordered_json Simulate(const std::string& yaml) {
  auto s = ParseScenario(yaml, "restart.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  auto r = RunScenario(*s);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : nlohmann::ordered_json();
}

TEST(ElasticRestartTest, EveryUnitIsRestartedWithinTheBuffer) {
  // 60% of 6 units keep serving: 2 may be out at once, fewer than max_out.
  const std::string yaml =
      With("  restarts: [{pool: serve, at: 2m, max_out: 3, min_serving_fraction: 0.6}]\n");
  const auto r = Simulate(yaml);
  ASSERT_TRUE(r["elastic"].contains("restarts")) << r["elastic"].dump(2);
  const auto& rs = r["elastic"]["restarts"][0];
  EXPECT_EQ(rs["units"].get<int>(), 6);
  EXPECT_EQ(rs["restarted"].get<int>(), 6) << rs.dump(2);
  EXPECT_EQ(rs["start_s"].get<double>(), 120);
  EXPECT_GT(rs["end_s"].get<double>(), 120) << rs.dump(2);
  // From the events alone: out and back per unit, at most 2 out at any time, and the buffer
  // used (2 out at once at some point).
  int out = 0, most = 0;
  std::set<int> taken, back;
  double last = 0;
  for (const auto& e : rs["events"]) {
    EXPECT_GE(e["t_s"].get<double>(), last) << "events in time order";
    last = e["t_s"].get<double>();
    const int u = e["unit"].get<int>();
    if (e["event"] == "out") {
      EXPECT_TRUE(taken.insert(u).second) << "unit " << u << " restarted twice";
      most = std::max(most, ++out);
    } else {
      EXPECT_TRUE(taken.count(u)) << "back before out";
      back.insert(u);
      --out;
    }
  }
  EXPECT_EQ(most, 2) << rs.dump(2);
  EXPECT_EQ(out, 0);
  EXPECT_EQ(back.size(), 6u);
  // Nothing lost: every arrival completes, as without the restart.
  const auto plain = Simulate(With(""));
  EXPECT_EQ(r["requests"]["completed"], r["requests"]["arrived"]) << r["requests"].dump(2);
  EXPECT_EQ(r["requests"]["arrived"], plain["requests"]["arrived"]);
  EXPECT_EQ(Simulate(yaml).dump(), r.dump()) << "same seed, same bytes";
}

TEST(ElasticRestartTest, ErrorsNameTheKey) {
  const auto error = [](const std::string& restarts) {
    auto s = ParseScenario(With(restarts), "restart.yaml");
    EXPECT_FALSE(s.ok()) << restarts;
    return s.ok() ? std::string() : std::string(s.status().message());
  };
  EXPECT_NE(error("  restarts: [{pool: nope, at: 1m, max_out: 1}]\n").find("elastic.restarts[0].pool: 'nope' names no pool"),
            std::string::npos);
  EXPECT_NE(error("  restarts: [{pool: serve, at: 1m, max_out: 7}]\n")
                .find("elastic.restarts[0].max_out: must be between 1 and the pool's count, 6 (got 7)"),
            std::string::npos);
  EXPECT_NE(error("  restarts: [{pool: serve, at: 1m, max_out: 1, min_serving_fraction: 1}]\n")
                .find("restart.yaml:21: elastic.restarts[0].min_serving_fraction: must be in [0, 1) (got 1)"),
            std::string::npos);
  EXPECT_NE(error("  restarts: []\n").find("elastic.restarts: expected a list of 1 to 64 restarts"), std::string::npos);
}

}  // namespace
}  // namespace myriad::sim
