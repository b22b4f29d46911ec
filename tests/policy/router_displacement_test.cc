// kv-aware placement on slot engines (llama.cpp-like, no KV events) prices what it displaces:
// the prompt in the slot a request takes is gone, and its conversation recomputes it on its
// next turn (RouterOptions::evict_return_probability, EngineCacheModel::DisplacedTokens).
#include <gtest/gtest.h>

#include <vector>

#include "policy/engine_cache_model.h"
#include "block_chain.h"
#include "policy/router.h"

namespace myriad::policy {
namespace {

constexpr int64_t kBlockTokens = 512;

using routing_test::Chain;

// Two CPU-like engines of one slot each, the gateway's view of them.
struct SlotWorld {
  // About llama.cpp on CPU: 0.75 ms per computed prompt token, 10 us per cached one.
  PrefillCost cost = PrefillCost::Linear(0.02, 7.5e-4, 1e-5, 7.5e-4, 0);
  PrefixIndex index;
  EngineCacheModel caches{&index};
  Router router{RouterOptions{.policy = RoutingPolicy::kKvAware, .block_tokens = kBlockTokens}, &index};
  std::vector<Candidate> units;
  Rng rng{1};

  explicit SlotWorld(int slots_each = 1) {
    for (HolderId h = 0; h < 2; ++h) {
      caches.SetCapacity(h, {.kind = EngineCacheKind::kSlots, .slots = slots_each, .source = CapacitySource::kConfig});
      units.emplace_back();
      units.back().holder = h;
      units.back().cost = &cost;
    }
    router.UseEngineCaches(&caches);
  }
  // What the gateway does after routing: the index believes it, the model places it.
  void Serve(HolderId h, const std::vector<BlockKey>& blocks) {
    index.AddProvisional(h, 0, blocks, 0);
    caches.Served(h, blocks, kBlockTokens);
  }
  RouteDecision Route(const std::vector<BlockKey>& blocks) {
    return router.Route(RouteRequest{.blocks = blocks,
                                     .input_tokens = static_cast<int64_t>(blocks.size()) * kBlockTokens,
                                     .output_tokens = 100},
                        units, {}, rng);
  }
};

TEST(EngineCacheModelDisplacement, CountsWhatTheTakenSlotLosesAndNoOtherSlotHolds) {
  PrefixIndex index;
  EngineCacheModel m(&index);
  m.SetCapacity(0, {.kind = EngineCacheKind::kSlots, .slots = 2, .source = CapacitySource::kConfig});
  EXPECT_EQ(m.DisplacedTokens(0, Chain(1, 4)), 0) << "an empty slot displaces nothing";
  const auto a = Chain(100, 6), b = Chain(200, 3);
  m.Served(0, a, 16);  // slot 1 (the last never used)
  m.Served(0, b, 16);  // slot 0
  EXPECT_EQ(m.DisplacedTokens(0, Chain(300, 2)), 6 * 16) << "the least recently used slot: a's";
  auto a_next = a;
  a_next.push_back(HashContentBlock(a.back(), 7));
  EXPECT_EQ(m.DisplacedTokens(0, a_next), 0) << "a's next turn extends a's slot";
  // A prompt sharing a's first 2 blocks takes a's slot (over 10% of it in common) and loses the rest.
  auto fork = std::vector<BlockKey>(a.begin(), a.begin() + 2);
  fork.push_back(HashContentBlock(a[1], 999));
  EXPECT_EQ(m.DisplacedTokens(0, fork), 4 * 16);
  EXPECT_EQ(m.DisplacedTokens(1, Chain(300, 2)), 0) << "not modelled";
  EXPECT_EQ(m.Occupancy(0).used_slots, 2) << "asking changes nothing";
}

// A new conversation misses everywhere. Engine 0 is a little faster to answer it now, but its
// one slot holds a long conversation that would have to recompute 8k tokens on its next turn;
// engine 1's holds a short one. Priced by TTFT alone the request goes to 0.
TEST(RouterDisplacement, AMissGoesWhereItDisplacesTheLeast) {
  SlotWorld w;
  w.Serve(0, Chain(100, 16));
  w.Serve(1, Chain(200, 2));
  w.units[1].load.queued_prefill_tokens = 500;  // 0.375 s more to wait on engine 1
  const RouteDecision d = w.Route(Chain(300, 4));
  EXPECT_EQ(d.entry, 1) << "displacing 16 blocks costs 0.5 x 6 s of recompute, more than 0.375 s of queue";
  EXPECT_NEAR(d.estimated_ttft_s, 0.02 + 7.5e-4 * (4 * 512 + 500), 1e-6) << "the estimate stays a TTFT";

  // Displacement priced at 0: TTFT alone decides.
  SlotWorld off;
  off.router = Router(RouterOptions{.policy = RoutingPolicy::kKvAware, .block_tokens = kBlockTokens,
                                    .evict_return_probability = 0},
                      &off.index);
  off.router.UseEngineCaches(&off.caches);
  off.Serve(0, Chain(100, 16));
  off.Serve(1, Chain(200, 2));
  off.units[1].load.queued_prefill_tokens = 500;
  EXPECT_EQ(off.Route(Chain(300, 4)).entry, 0);
}

// The cost only counts others' loss: a conversation's next turn still goes to the engine that
// holds it, even where that engine's queue is a little longer.
TEST(RouterDisplacement, ReturningConversationKeepsItsEngine) {
  SlotWorld w;
  const auto a = Chain(100, 8);
  w.Serve(0, a);
  w.Serve(1, Chain(200, 8));
  w.units[0].load.queued_prefill_tokens = 300;
  auto next = a;
  for (int i = 0; i < 2; ++i) next.push_back(HashContentBlock(next.back(), 50 + i));
  const RouteDecision d = w.Route(next);
  EXPECT_EQ(d.entry, 0);
  EXPECT_EQ(d.expected_cached_tokens, 8 * kBlockTokens);
}

// With empty slots everywhere nothing is displaced: distinct prompts still spread over the
// engines (item 4 of issue 25), and an engine with an empty slot is preferred over one whose
// every slot holds a conversation.
TEST(RouterDisplacement, EmptySlotsAreFreeAndIdleEnginesStillSpread) {
  SlotWorld w(2);
  std::vector<int> count(2);
  for (BlockKey p = 0; p < 200; ++p) ++count[static_cast<size_t>(w.Route(Chain(1000 + p * 10, 3)).entry)];
  EXPECT_GT(count[0], 60);
  EXPECT_GT(count[1], 60);
  w.Serve(0, Chain(100, 6));
  w.Serve(0, Chain(200, 6));  // engine 0: both slots hold a conversation
  w.Serve(1, Chain(300, 6));  // engine 1: one slot still empty
  for (BlockKey p = 0; p < 20; ++p) EXPECT_EQ(w.Route(Chain(5000 + p * 10, 3)).entry, 1);
}

}  // namespace
}  // namespace myriad::policy
