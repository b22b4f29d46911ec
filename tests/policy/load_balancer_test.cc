#include "policy/load_balancer.h"

#include <gtest/gtest.h>

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
