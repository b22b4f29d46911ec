#include "sim/plan_spec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace myriad::sim {
namespace {

constexpr const char* kSpec = R"(name: tiny
seed: 3
duration: 2m
drain: 1m
model: Llama-3.1-8B
hardware: {gpus_per_node: 8, nodes_per_rack: 2}
workload: {type: synthetic, rate: 8, input: {mean: 500, max: 4096}, output: {mean: 100, max: 1024}}
slo: {ttft: 1s, tpot: 50ms, attainment: 0.9}
search:
  max_gpus: 16
  window: 1m
  gpus: [{type: H100, price: 2.5}, {type: H200, price: 3}]
  routers: [least-loaded, kv-aware]
  prefill: {layouts: [{tp: 1, dp: 1}], units: [1, 2]}
  decode: {layouts: [{tp: 1, dp: 1}], max_seqs: [64, 128]}
  colocated: {layouts: [{tp: 1, dp: 1}, {tp: 2, dp: 1}]}
)";

TEST(PlanSpecTest, EveryCombinationIsAShape) {
  auto spec = ParsePlanSpec(kSpec, "tiny.yaml", "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  // 2 GPUs x 2 routers x (2 prefill x 2 decode + 2 colocated).
  EXPECT_EQ(spec->shapes.size(), 2u * 2 * (2 * 2 + 2));
  EXPECT_EQ(spec->attainment, 0.9);
  EXPECT_EQ(spec->window, kMinute);
  EXPECT_EQ(spec->base.slo.tpot, 50 * kMillisecond);
  EXPECT_EQ(spec->decode.max_batch_tokens, std::vector<int>{2048});  // the scenario's decode default
}

TEST(PlanSpecTest, SliceCarriesOneCopyOfTheLoadAndWholeCarriesAll) {
  auto spec = ParsePlanSpec(kSpec, "tiny.yaml", "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const PlanShape& shape = spec->shapes[1];  // H100 least-loaded, P 1x, D 1x seqs 128
  ASSERT_EQ(shape.pools.size(), 2u);
  EXPECT_EQ(SliceGpus(*spec, shape), 2);  // two one-GPU units, on one node
  auto slice = BuildPlanScenario(*spec, shape, 4, false);
  ASSERT_TRUE(slice.ok()) << slice.status();
  EXPECT_EQ(slice->pools[0].count, 1);
  EXPECT_EQ(slice->pools[1].max_seqs, 128);
  EXPECT_DOUBLE_EQ(slice->workload.synthetic.rate, 2.0);
  EXPECT_EQ(slice->duration, kMinute);
  EXPECT_EQ(slice->hardware.gpu, "H100");
  auto whole = BuildPlanScenario(*spec, shape, 4, true);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->pools[0].count, 4);
  EXPECT_EQ(whole->pools[1].count, 4);
  EXPECT_EQ(whole->hardware.nodes, 1);
  EXPECT_EQ(whole->pools[0].gpu_hour_price, 2.5);  // priced per pool: spare GPUs are not paid for
  EXPECT_DOUBLE_EQ(whole->workload.synthetic.rate, 8.0);
  EXPECT_EQ(whole->duration, 2 * kMinute);
}

TEST(PlanSpecTest, WrittenPlanParsesBackToTheWholeScenario) {
  auto spec = ParsePlanSpec(kSpec, "tiny.yaml", "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  for (size_t i : {size_t{0}, spec->shapes.size() - 1}) {
    const PlanShape& shape = spec->shapes[i];
    const std::string yaml = FormatPlanScenarioYaml(*spec, shape, 2);
    auto back = ParseScenario(yaml, "plan.yaml");
    ASSERT_TRUE(back.ok()) << back.status() << "\n" << yaml;
    auto whole = BuildPlanScenario(*spec, shape, 2, true);
    ASSERT_TRUE(whole.ok());
    EXPECT_EQ(back->hardware.gpu, whole->hardware.gpu);
    EXPECT_EQ(back->hardware.nodes, whole->hardware.nodes);
    EXPECT_EQ(back->pools[0].gpu_hour_price, whole->pools[0].gpu_hour_price);
    EXPECT_EQ(back->router.policy, whole->router.policy);
    EXPECT_EQ(back->slo.ttft, whole->slo.ttft);
    ASSERT_EQ(back->pools.size(), whole->pools.size());
    for (size_t p = 0; p < back->pools.size(); ++p) {
      EXPECT_EQ(back->pools[p].count, whole->pools[p].count);
      EXPECT_EQ(back->pools[p].layout.tp, whole->pools[p].layout.tp);
      EXPECT_EQ(back->pools[p].max_seqs, whole->pools[p].max_seqs);
    }
    EXPECT_EQ(back->workload.synthetic.rate, 8.0);
    EXPECT_EQ(back->duration, whole->duration);
  }
}

// Each bad spec names the file, the line and the key.
TEST(PlanSpecTest, BadInputNamesFileLineAndKey) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string s = kSpec;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  const std::pair<std::string, std::string> cases[] = {
      {with("price: 2.5", "price: -1"), "tiny.yaml:12: search.gpus[0].price: must be between 0 and 1e6"},
      {with("type: H100", "type: Z80"), "tiny.yaml:12: search.gpus[0].type:"},
      {with("max_gpus: 16", "max_gpus: 300000"), "tiny.yaml:10: search.max_gpus: must be between 1 and 262144"},
      {with("window: 1m", "window: 5m"), "tiny.yaml:11: search.window: must be positive and at most duration"},
      {with("units: [1, 2]", "units: [1, 65]"), "tiny.yaml:14: search.prefill.units[1]: must be between 1 and 64"},
      {with("max_seqs: [64, 128]", "max_seqs: [0]"), "tiny.yaml:15: search.decode.max_seqs[0]: must be between 1 and 65536"},
      {with("routers: [least-loaded, kv-aware]", "routers: [fastest]"), "tiny.yaml:13: search.routers[0]:"},
      {with("attainment: 0.9", "attainment: 1.5"), "tiny.yaml:8: slo.attainment: must be above 0 and at most 1"},
      {with("rate: 8", "rate: -8"), "tiny.yaml:7: workload.rate"},
      {with("gpus_per_node: 8", "gpu: H100"), "tiny.yaml:6: hardware.gpu: unknown key"},
      {with("  decode: {layouts: [{tp: 1, dp: 1}], max_seqs: [64, 128]}\n", ""), "search.decode: missing"},
      {with("layouts: [{tp: 1, dp: 1}, {tp: 2, dp: 1}]", "layouts: [{tp: 1, dp: 16, nodes: 1}]"),
       "tiny.yaml:16: search.colocated.layouts[0].dp: tp*dp = 16 GPUs do not fit on 1 node(s) of 8"},
      {with("search:\n", "serach:\n"), "tiny.yaml:9: serach: unknown key"},
      {with("  max_gpus: 16\n", ""), "search.max_gpus: missing"},
  };
  for (const auto& [text, want] : cases) {
    auto spec = ParsePlanSpec(text, "tiny.yaml", "");
    ASSERT_FALSE(spec.ok()) << want;
    EXPECT_NE(std::string(spec.status().message()).find(want), std::string::npos)
        << "want: " << want << "\ngot:  " << spec.status().message();
  }
}

TEST(PlanSpecTest, TooManyCombinationsAreRefusedBeforeBuilding) {
  std::string s = kSpec;
  s.replace(s.find("units: [1, 2]"), 13, "units: [1, 2, 3, 4]");
  s.replace(s.find("max_seqs: [64, 128]"), 19,
            "max_seqs: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16], max_batch_tokens: [1, 2, 3, 4, 5, 6, 7, "
            "8, 9, 10, 11, 12, 13, 14, 15, 16]");
  auto spec = ParsePlanSpec(s, "tiny.yaml", "");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(std::string(spec.status().message()).find("more than the maximum of 4096"), std::string::npos)
      << spec.status();
}

// Roles with their own cards and MoE stepping choices: a prefill pool on H100 feeding decode on
// H200 is one shape, priced per pool, and the written plan keeps both.
TEST(PlanSpecTest, RolesChooseTheirOwnCardsAndMoeStepping) {
  std::string text = kSpec;
  text.replace(text.find("prefill: {layouts"), 17, "prefill: {gpus: [H100, H200], layouts");
  text.replace(text.find("decode: {layouts"), 16,
               "decode: {gpus: [H200], moe: [off, {placement: balanced, two_batch_overlap: true}], layouts");
  auto spec = ParsePlanSpec(text, "tiny.yaml", "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  // Disaggregated pairs have their own cards, so no shape-level card: 2 routers x (2 cards x 2
  // prefill units) x (2 max_seqs x 2 moe); colocated ones still take each of the 2 cards.
  EXPECT_EQ(spec->shapes.size(), 2u * (4 * 4) + 2u * 2 * 2);
  const PlanShape* mixed = nullptr;
  for (const PlanShape& sh : spec->shapes) {
    if (sh.pools.size() == 2 && sh.pools[0].gpu == 0 && sh.pools[0].units == 1 && sh.pools[1].moe == 1 &&
        sh.pools[1].max_seqs == 128) {
      mixed = &sh;
      break;
    }
  }
  ASSERT_NE(mixed, nullptr);
  EXPECT_DOUBLE_EQ(SliceDollarsPerHour(*spec, *mixed), 2.5 + 3.0);
  const std::string name = DescribeShape(*spec, *mixed);
  EXPECT_EQ(name.substr(0, 4), "H100") << name;
  EXPECT_NE(name.find(" D 1xH200(tp1 dp1 ep1, mbt 2048, seqs 128, moe balanced tbo)"), std::string::npos) << name;
  auto whole = BuildPlanScenario(*spec, *mixed, 3, true);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->hardware.gpu, "H100");
  EXPECT_EQ(whole->PoolGpu(0), "H100");
  EXPECT_EQ(whole->PoolGpu(1), "H200");
  EXPECT_EQ(whole->PoolPrice(0), 2.5);
  EXPECT_EQ(whole->PoolPrice(1), 3.0);
  EXPECT_TRUE(whole->pools[1].moe.enabled);
  EXPECT_TRUE(whole->pools[1].moe.two_batch_overlap);
  EXPECT_FALSE(whole->pools[0].moe.enabled);
  // Overlap is outside the plain step model's bound: such a shape is never rejected unrun.
  auto bound = SliceDecodeBound(*spec, *mixed);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_TRUE(std::isinf(*bound));

  const std::string yaml = FormatPlanScenarioYaml(*spec, *mixed, 3);
  auto back = ParseScenario(yaml, "plan.yaml");
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << yaml;
  EXPECT_EQ(back->PoolGpu(1), "H200");
  EXPECT_EQ(back->PoolPrice(1), 3.0);
  EXPECT_TRUE(back->pools[1].moe.two_batch_overlap);
  EXPECT_EQ(back->pools[1].moe.placement, "balanced");
  EXPECT_FALSE(back->pools[0].moe.enabled);

  const std::pair<std::string, std::string> bad[] = {
      {"gpus: [H100, H200], layouts", "gpus: [B200], layouts"},
      {"gpus: [H100, H200], layouts", "gpus: [H100, H100], layouts"},
      {"moe: [off, {placement: balanced", "moe: [on, {placement: balanced"},
      {"placement: balanced", "placement: random"},
  };
  const char* want[] = {"tiny.yaml:14: search.prefill.gpus[0]: 'B200' is not one of search.gpus' types",
                        "tiny.yaml:14: search.prefill.gpus[1]: 'H100' is listed twice",
                        "tiny.yaml:15: search.decode.moe[0]: expected off or a mapping",
                        "tiny.yaml:15: search.decode.moe[1].placement: 'random' is not eplb"};
  for (size_t i = 0; i < std::size(bad); ++i) {
    std::string t = text;
    t.replace(t.find(bad[i].first), bad[i].first.size(), bad[i].second);
    auto r = ParsePlanSpec(t, "tiny.yaml", "");
    ASSERT_FALSE(r.ok()) << want[i];
    EXPECT_NE(std::string(r.status().message()).find(want[i]), std::string::npos)
        << "want: " << want[i] << "\ngot:  " << r.status().message();
  }
}

TEST(PlanSpecTest, BaselineMustServeTheSpecsWorkloadUnderItsSlo) {
  auto spec = ParsePlanSpec(kSpec, "tiny.yaml", "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto same = BuildPlanScenario(*spec, spec->shapes[0], 2, true);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_TRUE(CheckPlanBaseline(*spec, *same).ok());
  Scenario other = *same;
  other.workload.synthetic.rate = 9;
  auto st = CheckPlanBaseline(*spec, other);
  EXPECT_NE(std::string(st.message()).find("its workload rate (9) is not the spec's (8)"), std::string::npos) << st;
  other = *same;
  other.slo.tpot = 60 * kMillisecond;
  EXPECT_NE(std::string(CheckPlanBaseline(*spec, other).message()).find("its SLO"), std::string::npos);
  other = *same;
  other.model = "DeepSeek-V3";
  EXPECT_NE(std::string(CheckPlanBaseline(*spec, other).message()).find("its model (DeepSeek-V3)"), std::string::npos);
}

}  // namespace
}  // namespace myriad::sim
