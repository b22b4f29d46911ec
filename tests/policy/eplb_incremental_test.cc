#include "policy/eplb_incremental.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/rng.h"
#include "policy/elastic_ep.h"
#include "policy/eplb.h"
#include "policy/eplb_rebalancer.h"

namespace myriad::policy {
namespace {

std::vector<double> SkewedLoads(int layers, int experts, Rng& rng) {
  std::vector<double> w(static_cast<size_t>(layers) * static_cast<size_t>(experts));
  for (double& x : w) x = std::floor(rng.LogNormal(6, 1));
  return w;
}

// Popularity drift as the simulator makes it: a fraction of each layer's experts trade loads.
std::vector<double> Drift(std::vector<double> w, int experts, double fraction, Rng& rng) {
  const size_t layers = w.size() / static_cast<size_t>(experts);
  const auto trades = static_cast<int>(std::ceil(fraction * experts / 2));
  for (size_t l = 0; l < layers; ++l) {
    for (int t = 0; t < trades; ++t) {
      const size_t a = rng.Below(static_cast<uint64_t>(experts)), b = rng.Below(static_cast<uint64_t>(experts));
      std::swap(w[l * static_cast<size_t>(experts) + a], w[l * static_cast<size_t>(experts) + b]);
    }
  }
  return w;
}

std::vector<uint8_t> DeadMask(int gpus, const std::vector<int>& failed) {
  std::vector<uint8_t> dead(static_cast<size_t>(gpus), 0);
  for (int g : failed) dead[static_cast<size_t>(g)] = 1;
  return dead;
}

// Every live slot holds a valid expert, every dead one -1, and every expert has >= min_copies
// live copies in every layer.
void ExpectValid(const EplbPlacement& p, const std::vector<int>& failed, int min_copies) {
  const std::vector<uint8_t> dead = DeadMask(p.num_gpus, failed);
  const auto physical = static_cast<size_t>(p.physical_experts);
  const size_t per = physical / static_cast<size_t>(p.num_gpus);
  ASSERT_EQ(p.phy2log.size(), static_cast<size_t>(p.layers) * physical);
  for (size_t l = 0; l < static_cast<size_t>(p.layers); ++l) {
    std::vector<int> copies(static_cast<size_t>(p.logical_experts), 0);
    for (size_t q = 0; q < physical; ++q) {
      const int32_t e = p.phy2log[l * physical + q];
      if (dead[q / per] != 0) {
        EXPECT_EQ(e, -1) << "layer " << l << " slot " << q;
        continue;
      }
      ASSERT_GE(e, 0) << "layer " << l << " slot " << q;
      ASSERT_LT(e, p.logical_experts);
      ++copies[static_cast<size_t>(e)];
    }
    for (size_t e = 0; e < copies.size(); ++e) {
      EXPECT_GE(copies[e], min_copies) << "layer " << l << " expert " << e;
      EXPECT_EQ(p.logcnt[l * copies.size() + e], copies[e]);
    }
  }
}

double LayerRatio(const std::vector<double>& w, const EplbPlacement& p, size_t l, const std::vector<uint8_t>& dead) {
  const auto physical = static_cast<size_t>(p.physical_experts), logical = static_cast<size_t>(p.logical_experts);
  return LayerImbalance(std::span<const double>(w).subspan(l * logical, logical),
                        std::span<const int32_t>(p.phy2log).subspan(l * physical, physical), p.experts_per_gpu(), dead);
}

TEST(ReplaceMode, Parses) {
  EXPECT_EQ(*ParseReplaceMode("incremental"), ReplaceMode::kIncremental);
  EXPECT_EQ(*ParseReplaceMode("full"), ReplaceMode::kFull);
  EXPECT_FALSE(ParseReplaceMode("fresh").ok());
  EXPECT_EQ(ReplaceModeName(ReplaceMode::kIncremental), "incremental");
}

TEST(ReplaceIncrementally, UnchangedLoadsMoveNothing) {
  Rng rng(7);
  const std::vector<double> w = SkewedLoads(3, 64, rng);
  auto current = RebalanceExperts(w, 3, 64, 80, 8, 2, 16);
  ASSERT_TRUE(current.ok());
  auto inc = ReplaceIncrementally(w, *current, {}, *current);
  ASSERT_TRUE(inc.ok()) << inc.status();
  EXPECT_EQ(inc->moved_slots, 0);
  EXPECT_EQ(inc->placement.phy2log, current->phy2log);
}

// Random shapes and loads: the properties the header promises, against the fresh placement a
// full rebalance would move to, and a movement far below it in total.
TEST(ReplaceIncrementally, PropertiesOnRandomDrift) {
  Rng rng(2024);
  int64_t moved = 0, moved_full = 0;
  int reference_layers = 0, layers_seen = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int layers = 1 + static_cast<int>(rng.Below(3));
    const int nodes = 1 << rng.Below(3);                       // 1, 2, 4
    const int gpus = nodes * (2 << rng.Below(3));              // 2..8 per node
    const int experts = gpus * (2 + static_cast<int>(rng.Below(3)));  // 2..4 per GPU
    const int physical = experts + gpus * static_cast<int>(rng.Below(3));
    const int groups = nodes * 2;
    const int min_copies = physical >= 2 * experts && rng.Bernoulli(0.5) ? 2 : 1;
    const std::vector<double> w0 = SkewedLoads(layers, experts, rng);
    const std::vector<double> w1 = Drift(w0, experts, rng.Uniform(0.02, 0.5), rng);
    auto current = RebalanceExperts(w0, layers, experts, physical, groups, nodes, gpus, EplbTies::kStable, min_copies);
    auto fresh = RebalanceExperts(w1, layers, experts, physical, groups, nodes, gpus, EplbTies::kStable, min_copies);
    ASSERT_TRUE(current.ok() && fresh.ok()) << trial;
    const IncrementalOptions o{.tolerance = 0.05, .min_copies = min_copies};
    auto inc = ReplaceIncrementally(w1, *current, {}, *fresh, o);
    ASSERT_TRUE(inc.ok()) << inc.status();
    SCOPED_TRACE(trial);
    ExpectValid(inc->placement, {}, min_copies);
    const int64_t full = CountFetchedSlots(*current, *fresh);
    EXPECT_LE(inc->moved_slots, full);
    EXPECT_EQ(inc->moved_slots, CountFetchedSlots(*current, inc->placement));
    for (size_t l = 0; l < static_cast<size_t>(layers); ++l) {
      EXPECT_LE(LayerRatio(w1, inc->placement, l, {}), 1.05 * LayerRatio(w1, *fresh, l, {}) + 1e-9) << "layer " << l;
    }
    auto again = ReplaceIncrementally(w1, *current, {}, *fresh, o);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->placement.phy2log, inc->placement.phy2log);
    moved += inc->moved_slots;
    moved_full += full;
    reference_layers += inc->reference_layers;
    layers_seen += layers;
  }
  // Moving to the fresh placement would re-fetch most slots; the incremental policy moves a
  // fraction of that, and the search itself (not the fallback) reaches the balance in most layers.
  EXPECT_LT(static_cast<double>(moved), 0.5 * static_cast<double>(moved_full)) << moved << " vs " << moved_full;
  EXPECT_LT(reference_layers, layers_seen / 4) << reference_layers << " of " << layers_seen;
}

TEST(ReplaceIncrementally, AFewDriftedExpertsMoveFewSlots) {
  // DeepSeek-V3's shape on 32 GPUs: 5% of experts trading loads moves a handful of slots per
  // layer, where the fresh placement re-fetches most of the 288.
  Rng rng(11);
  const std::vector<double> w0 = SkewedLoads(8, 256, rng);
  const std::vector<double> w1 = Drift(w0, 256, 0.05, rng);
  auto current = RebalanceExperts(w0, 8, 256, 288, 8, 4, 32);
  auto fresh = RebalanceExperts(w1, 8, 256, 288, 8, 4, 32);
  ASSERT_TRUE(current.ok() && fresh.ok());
  auto inc = ReplaceIncrementally(w1, *current, {}, *fresh);
  ASSERT_TRUE(inc.ok()) << inc.status();
  const int64_t full = CountFetchedSlots(*current, *fresh);
  EXPECT_GT(full, 8 * 288 / 2);
  EXPECT_LT(inc->moved_slots, full / 4) << inc->moved_slots << " vs " << full;
  EXPECT_EQ(inc->reference_layers, 0);
}

TEST(ReplaceIncrementally, LostGpusRehomeOrphansAndMoveLessThanAFreshPlacement) {
  Rng rng(5);
  for (int trial = 0; trial < 12; ++trial) {
    SCOPED_TRACE(trial);
    // One copy of most experts: losing a node orphans the experts only it held.
    const std::vector<double> w = SkewedLoads(2, 64, rng);
    auto current = RebalanceExperts(w, 2, 64, 96, 8, 4, 16);
    ASSERT_TRUE(current.ok());
    const int node = static_cast<int>(rng.Below(4));
    const std::vector<int> failed = {4 * node, 4 * node + 1, 4 * node + 2, 4 * node + 3};
    auto full = ReplaceOnLiveGpus(w, *current, failed, 8, 1e9, 40e9, ReplaceMode::kFull);
    auto inc = ReplaceOnLiveGpus(w, *current, failed, 8, 1e9, 40e9, ReplaceMode::kIncremental);
    ASSERT_TRUE(full.ok() && inc.ok()) << inc.status();
    ExpectValid(inc->placement, failed, 1);
    EXPECT_LE(inc->moved_slots, full->moved_slots);
    EXPECT_DOUBLE_EQ(inc->bytes, static_cast<double>(inc->moved_slots) * 1e9);
    EXPECT_LE(inc->pause, full->pause);
    const std::vector<uint8_t> dead = DeadMask(16, failed);
    for (size_t l = 0; l < 2; ++l) {
      EXPECT_LE(LayerRatio(w, inc->placement, l, dead), 1.05 * LayerRatio(w, full->placement, l, dead) + 1e-9);
    }
  }
}

TEST(ReplaceIncrementally, NodeLossWithTwoCopiesMovesAFractionOfTheFreshPlacement) {
  // Elastic EP's placement: two copies of every expert, spread over the nodes; a node dies.
  Rng rng(3);
  const std::vector<double> w = SkewedLoads(4, 256, rng);
  auto current = RebalanceExperts(w, 4, 256, 576, 8, 8, 64, EplbTies::kStable, 2);
  ASSERT_TRUE(current.ok());
  ASSERT_TRUE(SpreadReplicas(w, 8, &*current).ok());
  const std::vector<int> failed = {8, 9, 10, 11, 12, 13, 14, 15};
  auto full = ReplaceOnLiveGpus(w, *current, failed, 8, 1e9, 40e9, ReplaceMode::kFull);
  auto inc = ReplaceOnLiveGpus(w, *current, failed, 8, 1e9, 40e9, ReplaceMode::kIncremental);
  ASSERT_TRUE(full.ok() && inc.ok()) << inc.status();
  ExpectValid(inc->placement, failed, 1);
  EXPECT_LT(inc->moved_slots, full->moved_slots / 3) << inc->moved_slots << " vs " << full->moved_slots;
}

TEST(ReplaceIncrementally, BudgetStopsTheSearch) {
  Rng rng(9);
  const std::vector<double> w0 = SkewedLoads(2, 128, rng);
  const std::vector<double> w1 = Drift(w0, 128, 0.5, rng);
  auto current = RebalanceExperts(w0, 2, 128, 160, 8, 2, 16);
  auto fresh = RebalanceExperts(w1, 2, 128, 160, 8, 2, 16);
  ASSERT_TRUE(current.ok() && fresh.ok());
  auto inc = ReplaceIncrementally(w1, *current, {}, *fresh, IncrementalOptions{.tolerance = 0, .max_fetches_per_layer = 3});
  ASSERT_TRUE(inc.ok());
  ExpectValid(inc->placement, {}, 1);
  EXPECT_LE(inc->moved_slots, 2 * 4);  // a swap may overshoot the budget by one fetch
}

TEST(ReplaceIncrementally, RejectsMismatchedInputs) {
  Rng rng(1);
  const std::vector<double> w = SkewedLoads(1, 16, rng);
  auto a = RebalanceExperts(w, 1, 16, 16, 4, 1, 4);
  auto b = RebalanceExperts(w, 1, 16, 32, 4, 1, 4);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(ReplaceIncrementally(w, *a, {}, *b).ok());
  EXPECT_FALSE(ReplaceIncrementally(std::vector<double>(3, 1.0), *a, {}, *a).ok());
  EXPECT_FALSE(ReplaceIncrementally(w, *a, std::vector<int>{4}, *a).ok());
  // 3 live GPUs of 4 slots cannot hold 16 experts.
  EXPECT_FALSE(ReplaceIncrementally(w, *a, std::vector<int>{0}, *a).ok());
}

TEST(EplbRebalancer, IncrementalModeMovesLessThanFull) {
  Rng rng(21);
  const std::vector<double> w0 = SkewedLoads(4, 256, rng);
  const std::vector<double> w1 = Drift(w0, 256, 0.2, rng);
  const EplbLayout layout{.layers = 4, .logical_experts = 256, .physical_experts = 288, .groups = 8, .nodes = 4, .gpus = 32};
  double bytes[2] = {0, 0}, after[2] = {0, 0}, fresh[2] = {0, 0};
  for (ReplaceMode mode : {ReplaceMode::kIncremental, ReplaceMode::kFull}) {
    const int i = mode == ReplaceMode::kFull ? 1 : 0;
    auto r = EplbRebalancer::Create(layout, RebalancerOptions{.interval = 1, .ema_weight = 1, .expert_bytes = 1e6, .mode = mode},
                                    w0);
    ASSERT_TRUE(r.ok());
    r->Observe(w1);
    auto reb = r->MaybeRebalance(10);
    ASSERT_TRUE(reb.has_value());
    bytes[i] = reb->bytes;
    after[i] = reb->imbalance_after;
    fresh[i] = reb->imbalance_fresh;
    EXPECT_EQ(r->placement().phy2log, reb->placement.phy2log);
  }
  EXPECT_LT(bytes[0], 0.5 * bytes[1]);
  EXPECT_DOUBLE_EQ(fresh[0], fresh[1]);
  EXPECT_DOUBLE_EQ(after[1], fresh[1]);
  EXPECT_LE(after[0], 1.05 * fresh[0]);
}

}  // namespace
}  // namespace myriad::policy
