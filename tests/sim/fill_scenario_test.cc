// Low-priority fill in whole simulations (policy/tenants.h's `fill`): a batch tenant admitted
// only into headroom soaks up the capacity a daily wave leaves idle, and the interactive
// tenant's SLO attainment stays where it is without the batch tenant.
#include <gtest/gtest.h>

#include <string>

#include "sim/runner.h"
#include "sim/scenario.h"

namespace myriad::sim {
namespace {

nlohmann::ordered_json Simulate(const std::string& yaml) {
  auto s = ParseScenario(yaml, "fill.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  auto r = RunScenario(*s);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : nlohmann::ordered_json();
}

// One wave over 20 minutes: at its crest the interactive tenant alone nearly fills the
// cluster, at its trough it leaves most of it idle. The batch tenant sends a steady share of
// the arrivals, more than the cluster has room for at the crest.
constexpr const char* kFill = R"(
name: fill
seed: 3
duration: 20m
drain: 2m
hardware: {gpu: H100, nodes: 1, gpus_per_node: 8, nodes_per_rack: 16}
model: Llama-3.1-8B
pools:
  - {name: prefill, role: prefill, count: 2, layout: {tp: 1}, max_batch_tokens: 8192}
  - {name: decode, role: decode, count: 2, layout: {tp: 1}, max_seqs: 256}
workload:
  type: synthetic
  rate: RATE
  input: {mean: 4000, cv: 0.5, min: 16, max: 16384}
  output: {mean: 20, cv: 0.5, min: 2, max: 256}
  sessions: {fraction: 0}
  diurnal: {amplitude: 0.8, period: 20m, phase: -0.25}
  tenants: {weights: [0.5, 0.5]}
router: {policy: least-loaded, contention: CONT}
tenants:
  - {name: interactive}
  - {name: batch, BATCH}
slo: {ttft: 2s, tpot: 60ms}
kv_block_tokens: 16
)";

// `contention` is the fill tenant's headroom (policy/tenant_fill.h): at a millionth of the
// SLO no request finds any.
std::string With(const std::string& rate, const std::string& batch, const std::string& contention = "0.5",
                 const std::string& tpot = "60ms") {
  std::string y = kFill;
  y.replace(y.find("60ms"), 4, tpot);
  y.replace(y.find("RATE"), 4, rate);
  y.replace(y.find("BATCH"), 5, batch);
  y.replace(y.find("CONT"), 4, contention);
  return y;
}

TEST(FillScenarioTest, BatchFillsIdleCapacityWithoutMovingTheInteractiveTenantsSlo) {
  const std::string rate = "20";
  // The interactive tenant alone: the batch tenant is admitted nowhere.
  const auto alone = Simulate(With(rate, "fill: true", "0.000001"));
  const auto fill = Simulate(With(rate, "fill: true"));
  const auto plain = Simulate(With(rate, "priority: 0"));
  const auto& a = alone["tenants"], &f = fill["tenants"], &p = plain["tenants"];
  ASSERT_EQ(f.size(), 2u) << fill["tenants"].dump(2);
  EXPECT_EQ(a[1]["goodput_tokens"].get<int64_t>(), 0);
  // The batch tenant's tokens within the SLO: the idle capacity it soaked up.
  EXPECT_GT(f[1]["goodput_tokens"].get<int64_t>(), 0) << f.dump(2);
  EXPECT_GT(f[1]["rejected"].get<int64_t>(), 0) << "refused at the crest";
  EXPECT_GT(f[0]["arrived"].get<int64_t>(), 0);
  const double alone_slo = a[0]["slo_attainment"].get<double>(), fill_slo = f[0]["slo_attainment"].get<double>();
  EXPECT_NEAR(fill_slo, alone_slo, 0.01) << "interactive with fill against alone\n" << f.dump(2) << a.dump(2);
  // Admitted as any tenant, the same batch load costs the interactive tenant its SLO.
  EXPECT_LT(p[0]["slo_attainment"].get<double>(), alone_slo - 0.05) << p.dump(2);
}

// The decode side's signal (policy::DecodePressure): the same arrivals and the same prompt side,
// but a TPOT target the decode steps sit far past (2 ms against steps of several): fill is
// refused once the first requests finish, where a target they sit far below lets it in.
TEST(FillScenarioTest, FillStaysOutOfADecodePoolPastItsTpotHeadroom) {
  const auto loose = Simulate(With("20", "fill: true", "0.5", "10s"));
  const auto tight = Simulate(With("20", "fill: true", "0.5", "2ms"));
  const auto admitted = [](const nlohmann::ordered_json& t) {
    return t["arrived"].get<int64_t>() - t["rejected"].get<int64_t>();
  };
  const auto& l = loose["tenants"][1];
  const auto& t = tight["tenants"][1];
  ASSERT_EQ(l["arrived"], t["arrived"]);
  EXPECT_GT(admitted(l), 10 * admitted(t)) << l.dump(2) << t.dump(2);
  EXPECT_GT(t["rejected"].get<int64_t>(), t["arrived"].get<int64_t>() * 9 / 10) << t.dump(2);
  // The interactive tenant is never refused for it.
  EXPECT_EQ(tight["tenants"][0]["rejected"].get<int64_t>(), 0) << tight["tenants"].dump(2);
}

}  // namespace
}  // namespace myriad::sim
