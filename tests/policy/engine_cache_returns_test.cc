// The return probability the router prices displacement with is learned from what the slot
// engines' model sees: a prompt displaced from a slot returns when a later request extends it
// within the horizon (EngineCacheModel::ReturnProbability).
#include <gtest/gtest.h>

#include <vector>

#include "policy/engine_cache_model.h"
#include "block_chain.h"
#include "policy/router.h"

namespace myriad::policy {
namespace {

constexpr int64_t kBlockTokens = 512;

using routing_test::Chain;

std::vector<BlockKey> Extend(std::vector<BlockKey> turn, int blocks) {
  for (int i = 0; i < blocks; ++i) turn.push_back(HashContentBlock(turn.back(), 7000 + static_cast<BlockKey>(i)));
  return turn;
}

TEST(EngineCacheReturns, ADisplacedPromptCountsOnceItsHorizonHasPassedReturnedOrNot) {
  PrefixIndex index;
  EngineCacheModel m(&index, {.return_horizon = 30 * kSecond, .return_prior_weight = 20});
  m.SetCapacity(0, {.kind = EngineCacheKind::kSlots, .slots = 1, .source = CapacitySource::kConfig});
  const auto a = Chain(100, 4), b = Chain(200, 4), c = Chain(300, 4);
  m.Served(0, a, kBlockTokens, 0);
  m.Served(0, b, kBlockTokens, 1 * kSecond);  // a displaced
  m.Served(0, c, kBlockTokens, 2 * kSecond);  // b displaced
  m.Served(0, Extend(a, 2), kBlockTokens, 3 * kSecond);  // a returns; c displaced
  EXPECT_EQ(m.returns().decided, 0u) << "a's return counts only with the non-returns of its time";
  EXPECT_EQ(m.returns().open, 3u);
  EXPECT_DOUBLE_EQ(m.ReturnProbability(0.15), 0.15);
  m.Served(0, Chain(400, 4), kBlockTokens, 40 * kSecond);
  EXPECT_EQ(m.returns().decided, 3u);
  EXPECT_EQ(m.returns().returned, 1u);
  EXPECT_DOUBLE_EQ(m.ReturnProbability(0.15), (1 + 0.15 * 20) / (3 + 20));
  // Two conversations taking turns in the one slot: each turn displaces the other, which comes
  // back next. The probability rises, but no further than the bound.
  std::vector<BlockKey> x = Chain(1000, 2), y = Chain(2000, 2);
  for (int i = 0; i < 200; ++i) {
    m.Served(0, x, kBlockTokens, (50 + 2 * i) * kSecond);
    m.Served(0, y, kBlockTokens, (51 + 2 * i) * kSecond);
    x = Extend(x, 1);
    y = Extend(y, 1);
  }
  m.Served(0, Chain(400, 4), kBlockTokens, 1000 * kSecond);
  EXPECT_GT(m.returns().decided, 400u);
  EXPECT_DOUBLE_EQ(m.ReturnProbability(0.15), kMaxReturnProbability);
}

TEST(EngineCacheReturns, FollowingIsBounded) {
  PrefixIndex index;
  EngineCacheModel m(&index);
  m.SetCapacity(0, {.kind = EngineCacheKind::kSlots, .slots = 1, .source = CapacitySource::kConfig});
  for (int i = 0; i < 3 * static_cast<int>(kMaxFollowedDisplacements); ++i) {
    m.Served(0, Chain(10 * static_cast<BlockKey>(i), 2), kBlockTokens, i);
  }
  EXPECT_EQ(m.returns().open, kMaxFollowedDisplacements);
  EXPECT_EQ(m.returns().decided, 0u) << "left undecided, not counted as gone";
}

// A miss chooses between displacing a long conversation (engine 0, 16 blocks) and a short
// queue (engine 1). With the configured prior (0.15) the displacement costs 0.15 x 6 s, more
// than engine 1's 0.375 s of queue; once the model has seen a hundred displaced prompts never
// come back, it costs a fraction of that and the queue decides.
TEST(EngineCacheReturns, TheRouterPricesDisplacementWithTheLearnedProbability) {
  auto run = [](bool learned) {
    PrefillCost cost = PrefillCost::Linear(0.02, 7.5e-4, 1e-5, 7.5e-4, 0);
    PrefixIndex index;
    EngineCacheModel caches(&index);
    Router router(RouterOptions{.policy = RoutingPolicy::kKvAware, .block_tokens = kBlockTokens}, &index);
    router.UseEngineCaches(&caches);
    std::vector<Candidate> units;
    for (HolderId h = 0; h < 3; ++h) {
      caches.SetCapacity(h, {.kind = EngineCacheKind::kSlots, .slots = 1, .source = CapacitySource::kConfig});
      units.push_back(Candidate{.holder = h, .load = {}, .cost = &cost});
    }
    if (learned) {  // engine 2 sees 100 conversations displaced, none returning
      for (int i = 0; i <= 100; ++i) caches.Served(2, Chain(90000 + 10 * static_cast<BlockKey>(i), 2), kBlockTokens, i);
    }
    auto serve = [&](HolderId h, const std::vector<BlockKey>& blocks) {
      index.AddProvisional(h, 0, blocks, 0);
      caches.Served(h, blocks, kBlockTokens, 60 * kSecond);
    };
    serve(0, Chain(100, 16));
    serve(1, Chain(200, 2));
    units[1].load.queued_prefill_tokens = 500;
    units[2].load.available = false;
    Rng rng(1);
    const auto prompt = Chain(300, 4);
    return router.Route(RouteRequest{.blocks = prompt, .input_tokens = 4 * kBlockTokens, .output_tokens = 100}, units,
                        {}, rng);
  };
  EXPECT_EQ(run(false).entry, 1);
  EXPECT_EQ(run(true).entry, 0);
}

}  // namespace
}  // namespace myriad::policy
