#include "policy/load_balancer.h"
#include "policy/load_peek.h"
#include "policy/load_ranking.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace myriad::policy {
namespace {

TEST(LoadBalancer, LeastLoadedPicksFewestQueuedTokensAndSkipsUnavailable) {
  auto lb = *MakeLoadBalancer("least-loaded");
  Rng rng(1);
  std::vector<UnitLoad> c(3);
  c[0].queued_prefill_tokens = 500;
  c[1].queued_prefill_tokens = 100;
  c[1].available = false;
  c[2].queued_prefill_tokens = 200;
  EXPECT_EQ(lb->Pick(c, Phase::kPrefill, rng), 2);
  c[0].running = 1;
  c[2].running = 9;
  EXPECT_EQ(lb->Pick(c, Phase::kDecode, rng), 0);
}

// Least-loaded against a plain scan on random loads with many ties, for every candidate count
// up to 40 (the pick runs in lanes and must agree with the scan on ties too): the first minimum
// at or after the one after the previous pick of that phase, else the first minimum.
TEST(LoadBalancer, LeastLoadedTakesTurnsAmongTheMinima) {
  auto lb = *MakeLoadBalancer("least-loaded");
  Rng rng(11);
  size_t next[2] = {0, 0};
  for (int round = 0; round < 4000; ++round) {
    std::vector<UnitLoad> c(rng.Below(41));
    for (UnitLoad& u : c) {
      u.queued_prefill_tokens = static_cast<int64_t>(rng.Below(3));
      u.running = static_cast<int32_t>(rng.Below(3));
      u.waiting = static_cast<int32_t>(rng.Below(2));
      u.kv_usage = static_cast<double>(rng.Below(3)) / 4;
      u.available = rng.Below(5) != 0;
    }
    const auto pk = [&](size_t j) { return std::pair<int64_t, double>(c[j].queued_prefill_tokens, c[j].running + c[j].waiting); };
    const auto dk = [&](size_t j) { return std::pair<int64_t, double>(c[j].running + c[j].waiting, c[j].kv_usage); };
    auto want = [&](auto key, size_t& from) {
      int first = -1, turn = -1;
      for (size_t i = 0; i < c.size(); ++i) {
        if (!c[i].available) continue;
        if (first < 0 || key(i) < key(static_cast<size_t>(first))) first = static_cast<int>(i);
      }
      for (size_t i = from; i < c.size() && first >= 0; ++i) {
        if (c[i].available && key(i) == key(static_cast<size_t>(first))) {
          turn = static_cast<int>(i);
          break;
        }
      }
      const int pick = turn >= 0 ? turn : first;
      if (pick >= 0) from = static_cast<size_t>(pick) + 1;
      return pick;
    };
    const int want_prefill = want(pk, next[0]);
    const int want_decode = want(dk, next[1]);
    ASSERT_EQ(lb->Pick(c, Phase::kPrefill, rng), want_prefill) << "round " << round << ", " << c.size();
    ASSERT_EQ(lb->Pick(c, Phase::kDecode, rng), want_decode) << "round " << round << ", " << c.size();
  }
}

// An idle (or evenly loaded) set of units: requests go round, not all to the first.
TEST(LoadBalancer, LeastLoadedSpreadsAtZeroLoad) {
  auto lb = *MakeLoadBalancer("least-loaded");
  Rng rng(1);
  std::vector<UnitLoad> c(4);
  c[2].available = false;
  std::vector<int> seq;
  for (int i = 0; i < 6; ++i) seq.push_back(lb->Pick(c, Phase::kPrefill, rng));
  EXPECT_EQ(seq, (std::vector<int>{0, 1, 3, 0, 1, 3}));
  c[1].queued_prefill_tokens = 5;  // a load breaks the tie
  for (int i = 0; i < 4; ++i) EXPECT_NE(lb->Pick(c, Phase::kPrefill, rng), 1);
}

// A ranking kept current through random load changes gives the scan's first minimum after
// every change, and least-loaded answers the same with it as by scanning (turns included).
TEST(LoadBalancer, LoadRankingAgreesWithTheScan) {
  auto scan_lb = *MakeLoadBalancer("least-loaded");
  auto ranked_lb = *MakeLoadBalancer("least-loaded");
  auto first_lb = *MakeLoadBalancer("least-loaded");
  Rng rng(5);
  for (size_t n : {0, 1, 2, 3, 7, 8, 9, 133}) {
    for (Phase phase : {Phase::kPrefill, Phase::kDecode}) {
      std::vector<UnitLoad> c(n);
      LoadRanking ranking(phase, n);
      for (size_t i = 0; i < n; ++i) ranking.Update(i, c[i]);
      for (int change = 0; change < 3000 && n > 0; ++change) {
        const size_t i = rng.Below(n);
        c[i].queued_prefill_tokens = static_cast<int64_t>(rng.Below(4));
        c[i].running = static_cast<int32_t>(rng.Below(3));
        c[i].waiting = static_cast<int32_t>(rng.Below(2));
        c[i].kv_usage = static_cast<double>(rng.Below(3)) / 4;
        c[i].available = rng.Below(6) != 0;
        ranking.Update(i, c[i]);
        // A fresh balancer's first pick is the first minimum.
        first_lb = *MakeLoadBalancer("least-loaded");
        ASSERT_EQ(ranking.Best(), first_lb->Pick(c, phase, rng)) << "n " << n << ", change " << change;
        const int scan = scan_lb->Pick(c, phase, rng);
        // Asked beforehand (twice: asking takes no turn), the ranked balancer tells its pick.
        ASSERT_EQ(PeekLeastLoaded(*ranked_lb, ranking), scan) << "n " << n << ", change " << change;
        ASSERT_EQ(PeekLeastLoaded(*ranked_lb, ranking), scan) << "n " << n << ", change " << change;
        ASSERT_EQ(ranked_lb->Pick(LoadView(c).with_ranking(&ranking), phase, rng), scan)
            << "n " << n << ", change " << change;
      }
    }
  }
  // A view carrying a ranking of the other phase, or of other candidates, is scanned.
  std::vector<UnitLoad> c(3);
  c[1].queued_prefill_tokens = -1;
  LoadRanking decode(Phase::kDecode, 3);
  for (size_t i = 0; i < 3; ++i) decode.Update(i, c[i]);
  EXPECT_EQ(scan_lb->Pick(LoadView(c).with_ranking(&decode), Phase::kPrefill, rng), 1);
}

TEST(LoadBalancer, RoundRobinCyclesAndRandomCoversAll) {
  auto rr = *MakeLoadBalancer("round-robin");
  auto rnd = *MakeLoadBalancer("random");
  Rng rng(3);
  std::vector<UnitLoad> c(4);
  c[2].available = false;
  std::vector<int> seq;
  for (int i = 0; i < 6; ++i) seq.push_back(rr->Pick(c, Phase::kPrefill, rng));
  EXPECT_EQ(seq, (std::vector<int>{0, 1, 3, 0, 1, 3}));
  std::vector<int> hits(4);
  for (int i = 0; i < 3000; ++i) ++hits[static_cast<size_t>(rnd->Pick(c, Phase::kPrefill, rng))];
  EXPECT_EQ(hits[2], 0);
  for (int i : {0, 1, 3}) EXPECT_NEAR(hits[static_cast<size_t>(i)], 1000, 150);
  // Neither tells its next pick beforehand.
  LoadRanking ranking(Phase::kPrefill, c.size());
  for (size_t i = 0; i < c.size(); ++i) ranking.Update(i, c[i]);
  EXPECT_EQ(PeekLeastLoaded(*rr, ranking), -1);
  EXPECT_EQ(PeekLeastLoaded(*rnd, ranking), -1);
}

TEST(LoadBalancer, NoneAvailableAndUnknownName) {
  auto lb = *MakeLoadBalancer("random");
  Rng rng(1);
  std::vector<UnitLoad> c(2);
  c[0].available = c[1].available = false;
  EXPECT_EQ(lb->Pick(c, Phase::kPrefill, rng), -1);
  auto bad = MakeLoadBalancer("psychic");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("least-loaded"), std::string::npos);
}

}  // namespace
}  // namespace myriad::policy
