#include "policy/elastic_ep.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// Single-node losses (nodes of `per_node` GPUs) the placement survives.
int SurvivableNodes(const EplbPlacement& p, int per_node) {
  int ok = 0;
  for (int n = 0; n < p.num_gpus / per_node; ++n) {
    std::vector<int> dead;
    for (int g = 0; g < per_node; ++g) dead.push_back(n * per_node + g);
    auto v = CheckElasticEp(p, dead);
    EXPECT_TRUE(v.ok());
    ok += v->survives ? 1 : 0;
  }
  return ok;
}

// Each layer's replicas as a sorted list, and log2phy agreeing with phy2log.
void ExpectSameReplicas(const EplbPlacement& a, const EplbPlacement& b) {
  ASSERT_EQ(a.phy2log.size(), b.phy2log.size());
  const auto phys = static_cast<size_t>(a.physical_experts);
  for (size_t l = 0; l < static_cast<size_t>(a.layers); ++l) {
    std::vector<int32_t> x(a.phy2log.begin() + l * phys, a.phy2log.begin() + (l + 1) * phys);
    std::vector<int32_t> y(b.phy2log.begin() + l * phys, b.phy2log.begin() + (l + 1) * phys);
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    EXPECT_EQ(x, y) << "layer " << l;
  }
  EXPECT_EQ(a.logcnt, b.logcnt);
  const auto maxr = static_cast<size_t>(b.max_replicas);
  for (size_t l = 0; l < static_cast<size_t>(b.layers); ++l) {
    for (size_t e = 0; e < static_cast<size_t>(b.logical_experts); ++e) {
      for (size_t k = 0; k < maxr; ++k) {
        const int32_t q = b.log2phy[(l * b.logical_experts + e) * maxr + k];
        EXPECT_EQ(q >= 0, k < static_cast<size_t>(b.logcnt[l * b.logical_experts + e]));
        if (q >= 0) {
          EXPECT_EQ(b.Phy2Log(static_cast<int>(l), q), static_cast<int32_t>(e));
        }
      }
    }
  }
}

TEST(ElasticEp, SpreadingCopiesOverNodesLetsTheUnitSurviveANodeLoss) {
  // Even loads, two copies of each of 64 experts over 16 GPUs in 4 nodes: EPLB puts both copies
  // of an expert on one GPU, so no node can be lost; spread over nodes, any one can.
  const auto pop = perf::ExpertPopularity::Zipf(4, 64, 0.0, 1);
  std::vector<double> w(pop.p.begin(), pop.p.end());
  auto eplb = RebalanceExperts(w, 4, 64, 128, 8, 4, 16);
  ASSERT_TRUE(eplb.ok()) << eplb.status();
  EXPECT_EQ(SurvivableNodes(*eplb, 4), 0);
  EplbPlacement spread = *eplb;
  auto swaps = SpreadReplicas(w, 4, &spread);
  ASSERT_TRUE(swaps.ok()) << swaps.status();
  EXPECT_GT(*swaps, 0);
  ExpectSameReplicas(*eplb, spread);
  EXPECT_EQ(SurvivableNodes(spread, 4), 4);
  auto before = MeasureImbalance(w, *eplb), after = MeasureImbalance(w, spread);
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_NEAR(after->max_after, before->max_after, 1e-9) << "equal loads: swaps change nothing";
  // Spreading again finds nothing to do; the same input gives the same placement.
  EplbPlacement again = spread;
  EXPECT_EQ(*SpreadReplicas(w, 4, &again), 0);
  EplbPlacement twice = *eplb;
  ASSERT_TRUE(SpreadReplicas(w, 4, &twice).ok());
  EXPECT_EQ(twice.phy2log, spread.phy2log);
}

TEST(ElasticEp, SpreadingSkewedLoadsKeepsTheBalance) {
  // Zipf 0.8 over 64 experts, 64 redundant copies: the hot experts get several copies, the cold
  // ones one. Spreading never adds a same-node pair, keeps every GPU's slots, and moves little
  // load because it swaps replicas of similar load.
  const auto pop = perf::ExpertPopularity::Zipf(6, 64, 0.8, 5);
  std::vector<double> w(pop.p.begin(), pop.p.end());
  for (double& x : w) x *= 1e6;
  auto eplb = RebalanceExperts(w, 6, 64, 128, 8, 4, 16);
  ASSERT_TRUE(eplb.ok());
  EplbPlacement spread = *eplb;
  ASSERT_TRUE(SpreadReplicas(w, 4, &spread).ok());
  ExpectSameReplicas(*eplb, spread);
  for (int l = 0; l < 6; ++l) {
    for (int n = 0; n < 4; ++n) {
      std::vector<int> seen(64);
      for (int q = n * 32; q < (n + 1) * 32; ++q) ++seen[static_cast<size_t>(spread.Phy2Log(l, q))];
      for (int e = 0; e < 64; ++e) {
        EXPECT_LE(seen[static_cast<size_t>(e)], std::max(1, (spread.logcnt[l * 64 + e] + 3) / 4))
            << "layer " << l << " node " << n << " expert " << e;
      }
    }
  }
  auto before = MeasureImbalance(w, *eplb), after = MeasureImbalance(w, spread);
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_LE(after->max_after, before->max_after * 1.15);
  EXPECT_GE(SurvivableNodes(spread, 4), SurvivableNodes(*eplb, 4));
  // Bad input is named.
  EplbPlacement bad = *eplb;
  EXPECT_FALSE(SpreadReplicas(w, 3, &bad).ok());
  EXPECT_FALSE(SpreadReplicas(std::span<const double>(w).first(10), 4, &bad).ok());
}

TEST(ElasticEp, TwoCopiesOfEveryExpertSpreadOverNodesSurviveAnyNodeLoss) {
  // Skewed loads: DeepSeek's EPLB gives the hot experts the redundant slots and leaves cold ones
  // a single copy, so some node's loss always orphans an expert. With two copies of each first
  // (min_copies) and the copies spread over nodes, every single-node loss is survivable.
  const auto pop = perf::ExpertPopularity::Zipf(4, 64, 0.8, 7);
  std::vector<double> w(pop.p.begin(), pop.p.end());
  for (double& x : w) x *= 1e6;
  auto plain = RebalanceExperts(w, 4, 64, 160, 8, 4, 16);
  ASSERT_TRUE(plain.ok());
  EXPECT_LT(SurvivableNodes(*plain, 4), 4);
  auto two = RebalanceExperts(w, 4, 64, 160, 8, 4, 16, EplbTies::kStable, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  for (int32_t c : two->logcnt) EXPECT_GE(c, 2);
  int total = 0;
  for (int e = 0; e < 64; ++e) total += two->logcnt[static_cast<size_t>(e)];
  EXPECT_EQ(total, 160);
  ASSERT_TRUE(SpreadReplicas(w, 4, &*two).ok());
  EXPECT_EQ(SurvivableNodes(*two, 4), 4);
  // The global policy too (4 groups over 16 nodes cannot be hierarchical).
  auto global = RebalanceExperts(w, 4, 64, 128, 4, 16, 16, EplbTies::kStable, 2);
  ASSERT_TRUE(global.ok()) << global.status();
  EXPECT_FALSE(global->hierarchical);
  for (int32_t c : global->logcnt) EXPECT_EQ(c, 2);
  // Asking for more copies than there are slots is an error naming min_copies.
  auto bad = RebalanceExperts(w, 4, 64, 128, 8, 4, 16, EplbTies::kStable, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("min_copies"), std::string::npos);
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

namespace myriad::policy {
namespace {

TEST(ElasticEp, ReplacingOnTheLiveGpusBalancesThemAndChargesTheFetches) {
  // 64 experts with skewed loads, two spread copies of each on 4 nodes of 4 GPUs; node 0 dies.
  const auto pop = perf::ExpertPopularity::Zipf(4, 64, 1.0, 11);
  std::vector<double> w(pop.p.begin(), pop.p.end());
  for (double& x : w) x *= 1e6;
  auto placed = RebalanceExperts(w, 4, 64, 128, 8, 4, 16, EplbTies::kStable, 2);
  ASSERT_TRUE(placed.ok()) << placed.status();
  ASSERT_TRUE(SpreadReplicas(w, 4, &*placed).ok());
  const std::vector<int> dead = {0, 1, 2, 3};
  auto kept = CheckElasticEp(*placed, dead);
  ASSERT_TRUE(kept.ok() && kept->survives);
  auto re = ReplaceOnLiveGpus(w, *placed, dead, 8, 1e9, 1e10);
  ASSERT_TRUE(re.ok()) << re.status();
  const EplbPlacement& p = re->placement;
  ASSERT_EQ(p.phy2log.size(), placed->phy2log.size());
  for (int l = 0; l < 4; ++l) {
    std::vector<int> copies(64, 0);
    for (int q = 0; q < 128; ++q) {
      const int32_t e = p.Phy2Log(l, q);
      if (q / 8 < 4) {
        EXPECT_EQ(e, -1) << "a dead GPU's slot";
      } else {
        ASSERT_GE(e, 0) << "a live GPU keeps every slot";
        ++copies[static_cast<size_t>(e)];
      }
    }
    for (int e = 0; e < 64; ++e) {
      EXPECT_GE(copies[static_cast<size_t>(e)], 1);
      EXPECT_EQ(p.logcnt[static_cast<size_t>(l) * 64 + static_cast<size_t>(e)], copies[static_cast<size_t>(e)]);
    }
  }
  // The hottest live GPU carries less than when the lost copies' load stays on their twins.
  auto before = perf::ExpertLoad::FromPlacement(pop, kept->phy2log, 128, 16);
  auto after = perf::ExpertLoad::FromPlacement(pop, p.phy2log, 128, 16);
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_LT(after->mean_imbalance(), before->mean_imbalance());
  // The fetches: every slot whose expert its GPU did not hold, the slowest GPU's at 10 GB/s.
  int64_t moved = 0, worst = 0;
  for (int g = 4; g < 16; ++g) {
    int64_t in = 0;
    for (int l = 0; l < 4; ++l) {
      for (int s = 0; s < 8; ++s) {
        const int32_t e = p.Phy2Log(l, g * 8 + s);
        bool held = false;
        for (int t = 0; t < 8; ++t) held = held || placed->Phy2Log(l, g * 8 + t) == e;
        in += held ? 0 : 1;
      }
    }
    moved += in;
    worst = std::max(worst, in);
  }
  EXPECT_EQ(re->moved_slots, moved);
  EXPECT_GT(moved, 0);
  EXPECT_DOUBLE_EQ(re->bytes, static_cast<double>(moved) * 1e9);
  EXPECT_EQ(re->pause, SecondsToNanos(static_cast<double>(worst) * 1e9 / 1e10));
  // Deterministic; impossible when the live slots cannot hold every expert.
  EXPECT_EQ(ReplaceOnLiveGpus(w, *placed, dead, 8, 1e9, 1e10)->placement.phy2log, p.phy2log);
  const std::vector<int> most = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_FALSE(ReplaceOnLiveGpus(w, *placed, most, 8, 1e9, 1e10).ok());
}

}  // namespace
}  // namespace myriad::policy
