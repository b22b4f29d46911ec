#include "policy/elastic_ep.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/rng.h"
#include "perf/expert_load.h"
#include "perf/moe_step.h"
#include "policy/eplb_rebalancer.h"

namespace myriad::policy {
namespace {

// deepseek-ai/EPLB's README example: 12 experts, 16 replicas on 8 GPUs (2 slots each).
const std::vector<double> kWeights = {90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86,
                                      20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27};

EplbPlacement Readme() {
  auto p = RebalanceExperts(kWeights, 2, 12, 16, 4, 2, 8);
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

TEST(ElasticEp, SurvivesOnlyWhenEveryExpertKeepsACopy) {
  // The README placement has 4 spare slots for 12 experts: every GPU holds some expert's only
  // copy in some layer, so losing any one GPU stops the unit.
  const EplbPlacement p = Readme();
  for (int g = 0; g < 8; ++g) {
    auto v = CheckElasticEp(p, std::vector<int>{g});
    ASSERT_TRUE(v.ok());
    EXPECT_FALSE(v->survives) << "GPU " << g;
    EXPECT_FALSE(v->orphaned.empty());
  }
  // Two GPUs each holding both experts: either can go; both cannot.
  EplbPlacement mirrored;
  mirrored.layers = 1;
  mirrored.logical_experts = 2;
  mirrored.physical_experts = 4;
  mirrored.num_gpus = 2;
  mirrored.phy2log = {0, 1, 1, 0};
  auto one = CheckElasticEp(mirrored, std::vector<int>{1});
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(one->survives);
  EXPECT_EQ(one->live_gpus, 1);
  EXPECT_EQ(one->phy2log, (std::vector<int32_t>{0, 1, -1, -1}));
  EXPECT_FALSE(CheckElasticEp(mirrored, std::vector<int>{0, 1})->survives);
  EXPECT_FALSE(CheckElasticEp(mirrored, std::vector<int>{9}).ok());
}

TEST(ElasticEp, DegradedUnitCarriesTheLostLoadOnSurvivingCopies) {
  // 64 experts, two copies of each over 16 GPUs, the second copy on the next GPU (EPLB itself
  // does not spread copies: with uniform loads it puts both copies of an expert on one GPU,
  // which buys no fault tolerance, so this placement is built by hand).
  const auto pop = perf::ExpertPopularity::Zipf(4, 64, 0.5, 3);
  EplbPlacement placed;
  placed.layers = 4;
  placed.logical_experts = 64;
  placed.physical_experts = 128;
  placed.num_gpus = 16;
  for (int l = 0; l < 4; ++l) {
    for (int g = 0; g < 16; ++g) {
      for (int s = 0; s < 8; ++s) {
        // Slots 0-3: experts 4g..4g+3; slots 4-7: the previous GPU's four.
        const int owner = s < 4 ? g : (g + 15) % 16;
        placed.phy2log.push_back(owner * 4 + s % 4);
      }
    }
  }
  const EplbPlacement* p = &placed;
  int lost = -1;
  ElasticVerdict v;
  for (int g = 0; g < 16 && lost < 0; ++g) {
    auto t = CheckElasticEp(*p, std::vector<int>{g});
    if (t->survives) lost = g, v = *t;
  }
  ASSERT_GE(lost, 0);
  auto healthy = perf::ExpertLoad::FromPlacement(pop, p->phy2log, 128, 16);
  auto degraded = perf::ExpertLoad::FromPlacement(pop, v.phy2log, 128, 16);
  ASSERT_TRUE(healthy.ok() && degraded.ok());
  for (int l = 0; l < 4; ++l) EXPECT_EQ(degraded->share(l, lost), 0.0);
  EXPECT_GE(degraded->mean_imbalance(), healthy->mean_imbalance());
  // Every unit of load still lands somewhere.
  double sum = 0;
  for (int g = 0; g < 16; ++g) sum += degraded->share(0, g);
  EXPECT_NEAR(sum, 1.0, 1e-9);
}

TEST(EplbRebalancer, RebalancesWhenLoadsShiftAndChargesTheMove) {
  EplbLayout layout{.layers = 2, .logical_experts = 12, .physical_experts = 16, .groups = 4, .nodes = 2, .gpus = 8};
  auto r = EplbRebalancer::Create(layout, RebalancerOptions{.interval = 10 * kMinute, .ema_weight = 1.0,
                                                            .expert_bytes = 44e6, .fetch_bytes_per_s = 40e9},
                                  kWeights);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->MaybeRebalance(5 * kMinute).has_value()) << "not due yet";
  EXPECT_FALSE(r->MaybeRebalance(10 * kMinute).has_value()) << "same loads: nothing to gain";
  // The hot experts change: reverse each layer's loads.
  std::vector<double> shifted(kWeights.rbegin(), kWeights.rend());
  r->Observe(shifted);
  auto reb = r->MaybeRebalance(20 * kMinute);
  ASSERT_TRUE(reb.has_value());
  EXPECT_LT(reb->imbalance_after, reb->imbalance_before);
  EXPECT_GT(reb->moved_slots, 0);
  EXPECT_DOUBLE_EQ(reb->bytes, reb->moved_slots * 44e6);
  EXPECT_GT(reb->pause, 0);
  EXPECT_LE(reb->pause, SecondsToNanos(4 * 44e6 / 40e9) + 1) << "at most a GPU's 2 slots x 2 layers";
  EXPECT_EQ(r->placement().phy2log, reb->placement.phy2log);
}

TEST(EplbRebalancer, MovingAverage) {
  EplbLayout layout{.layers = 1, .logical_experts = 4, .physical_experts = 4, .groups = 1, .nodes = 1, .gpus = 2};
  auto r = EplbRebalancer::Create(layout, RebalancerOptions{.ema_weight = 0.5}, std::vector<double>{4, 4, 4, 4});
  ASSERT_TRUE(r.ok());
  r->Observe(std::vector<double>{0, 8, 4, 4});
  EXPECT_EQ(r->averaged_loads(), (std::vector<double>{2, 6, 4, 4}));
  EXPECT_FALSE(EplbRebalancer::Create(layout, {}, std::vector<double>{1, 2}).ok());
}

}  // namespace
}  // namespace myriad::policy
