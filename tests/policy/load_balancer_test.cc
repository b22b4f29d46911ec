#include "policy/load_balancer.h"
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

// Least-loaded against a plain first-minimum scan on random loads with many ties, for every
// candidate count up to 40 (the pick runs in lanes and must agree with the scan on ties too).
TEST(LoadBalancer, LeastLoadedIsTheFirstMinimum) {
  auto lb = *MakeLoadBalancer("least-loaded");
  Rng rng(11);
  for (int round = 0; round < 4000; ++round) {
    std::vector<UnitLoad> c(rng.Below(41));
    for (UnitLoad& u : c) {
      u.queued_prefill_tokens = static_cast<int64_t>(rng.Below(3));
      u.running = static_cast<int32_t>(rng.Below(3));
      u.waiting = static_cast<int32_t>(rng.Below(2));
      u.kv_usage = static_cast<double>(rng.Below(3)) / 4;
      u.available = rng.Below(5) != 0;
    }
    int want_prefill = -1, want_decode = -1;
    for (size_t i = 0; i < c.size(); ++i) {
      if (!c[i].available) continue;
      const auto pk = [&](size_t j) { return std::pair(c[j].queued_prefill_tokens, c[j].running + c[j].waiting); };
      const auto dk = [&](size_t j) { return std::pair(c[j].running + c[j].waiting, c[j].kv_usage); };
      if (want_prefill < 0 || pk(i) < pk(static_cast<size_t>(want_prefill))) want_prefill = static_cast<int>(i);
      if (want_decode < 0 || dk(i) < dk(static_cast<size_t>(want_decode))) want_decode = static_cast<int>(i);
    }
    ASSERT_EQ(lb->Pick(c, Phase::kPrefill, rng), want_prefill) << "round " << round << ", " << c.size();
    ASSERT_EQ(lb->Pick(c, Phase::kDecode, rng), want_decode) << "round " << round << ", " << c.size();
  }
}

// A ranking kept current through random load changes gives the scan's answer after every
// change, and least-loaded answers from it when the view carries it.
TEST(LoadBalancer, LoadRankingAgreesWithTheScan) {
  auto lb = *MakeLoadBalancer("least-loaded");
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
        const int scan = lb->Pick(c, phase, rng);
        ASSERT_EQ(ranking.Best(), scan) << "n " << n << ", change " << change;
        ASSERT_EQ(lb->Pick(LoadView(c).with_ranking(&ranking), phase, rng), scan);
      }
      EXPECT_EQ(ranking.Best(), lb->Pick(c, phase, rng));
    }
  }
  // A view carrying a ranking of the other phase, or of other candidates, is scanned.
  std::vector<UnitLoad> c(3);
  c[1].queued_prefill_tokens = -1;
  LoadRanking decode(Phase::kDecode, 3);
  for (size_t i = 0; i < 3; ++i) decode.Update(i, c[i]);
  EXPECT_EQ(lb->Pick(LoadView(c).with_ranking(&decode), Phase::kPrefill, rng), 1);
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
