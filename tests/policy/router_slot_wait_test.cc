// kv-aware on slot engines (llama.cpp-like: N sequences at once, a request beyond them waits
// for one to finish): the estimate adds the learned wait for a slot (SlotWaits x
// PrefillCost::SlotWaitSeconds), so a later turn whose prefix holder has every slot taken is
// weighed against recomputing the prefix on an engine with a slot free.
#include <gtest/gtest.h>

#include <vector>

#include "block_chain.h"
#include "policy/router.h"

namespace myriad::policy {
namespace {

constexpr int64_t kBlockTokens = 512;

using routing_test::Chain;

TEST(SlotWaits, CountsTheRequestsAheadOnceEverySlotIsTaken) {
  Candidate c;
  EXPECT_EQ(SlotWaits(c), 0) << "no slots known: a batching engine";
  c.load.running = 5;
  EXPECT_EQ(SlotWaits(c), 0);
  c.slots = 2;
  c.load.running = 1;
  EXPECT_EQ(SlotWaits(c), 0) << "a slot is free";
  c.load.running = 2;
  EXPECT_EQ(SlotWaits(c), 1) << "both taken: one must finish";
  c.load.waiting = 1;
  EXPECT_EQ(SlotWaits(c), 2) << "and one already waits";
}

TEST(SlotWaits, TheDispatchSampleCarriesThemToTheCostModel) {
  Candidate c{.load = {.queued_prefill_tokens = 700, .running = 2}, .slots = 2};
  RouteDecision d;
  d.expected_cached_tokens = 1000;
  const CostSample s = DispatchSample(d, c, 3000);
  EXPECT_EQ(s.uncached, 2000);
  EXPECT_EQ(s.cached, 1000);
  EXPECT_EQ(s.queued, 700);
  EXPECT_EQ(s.slot_waits, 1);
}

// Engine 0 holds the conversation's last turn (4 blocks of 512 tokens); the new turn adds 2.
// Engine 1 holds nothing and has a slot free. CPU speed: 0.75 ms a computed token, so the
// recompute of the prefix costs about 1.5 s; engine 0's slot wait is learned at `wait_s`.
struct HolderBusy {
  PrefixIndex index;
  PrefillCost cost;
  Router router{RouterOptions{.policy = RoutingPolicy::kKvAware, .block_tokens = kBlockTokens}, &index};
  std::vector<Candidate> units;
  Rng rng{1};
  std::vector<BlockKey> turn = Chain(100, 6);

  HolderBusy(double wait_s, int holder_running) : cost(PrefillCost::Linear(0.02, 7.5e-4, 1e-5, 7.5e-4, 0, wait_s)) {
    index.AddProvisional(0, 0, std::vector<BlockKey>(turn.begin(), turn.begin() + 4), 0);
    for (HolderId h = 0; h < 2; ++h) {
      units.push_back(Candidate{.holder = h, .load = {.running = h == 0 ? holder_running : 0}, .cost = &cost, .slots = 2});
    }
  }
  RouteDecision Route() {
    return router.Route(RouteRequest{.blocks = turn, .input_tokens = 6 * kBlockTokens, .output_tokens = 100}, units, {},
                        rng);
  }
};

TEST(RouterSlotWait, ALaterTurnLeavesItsHolderWhenWaitingForASlotCostsMoreThanRecomputing) {
  // Both of engine 0's slots taken, a slot there learned to take 2 s to free: 2 s + 1,024
  // tokens (0.8 s) there against 3,072 tokens (2.3 s) on engine 1.
  HolderBusy w(/*wait_s=*/2.0, /*holder_running=*/2);
  const RouteDecision d = w.Route();
  EXPECT_EQ(d.entry, 1);
  EXPECT_EQ(d.expected_cached_tokens, 0);
  EXPECT_NEAR(d.estimated_ttft_s, w.cost.PrefillSeconds(6 * kBlockTokens, 0), 1e-9);
}

TEST(RouterSlotWait, ItStaysWhenTheWaitIsShortOrASlotIsFree) {
  // A short wait (0.5 s): waiting and reusing beats recomputing.
  HolderBusy short_wait(/*wait_s=*/0.5, /*holder_running=*/2);
  RouteDecision d = short_wait.Route();
  EXPECT_EQ(d.entry, 0);
  EXPECT_EQ(d.expected_cached_tokens, 4 * kBlockTokens);
  EXPECT_NEAR(d.estimated_ttft_s, 0.5 + short_wait.cost.PrefillSeconds(2 * kBlockTokens, 4 * kBlockTokens), 1e-9);
  // One slot busy, one free: no wait, whatever a wait would cost.
  HolderBusy free_slot(/*wait_s=*/2.0, /*holder_running=*/1);
  d = free_slot.Route();
  EXPECT_EQ(d.entry, 0);
  EXPECT_NEAR(d.estimated_ttft_s, free_slot.cost.PrefillSeconds(2 * kBlockTokens, 4 * kBlockTokens), 1e-9);
}

}  // namespace
}  // namespace myriad::policy
