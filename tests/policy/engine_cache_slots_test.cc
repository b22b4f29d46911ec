// The gateway's model of a llama-server's slots (policy::EngineCacheModel over the one slot rule,
// policy/slot_cache.h) and how the engine's own GET /slots corrects it: a slot used behind the
// gateway's back, one the engine reports empty, busy slots, and a request still on its way.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "policy/engine_cache_model.h"

namespace myriad::policy {
namespace {

constexpr Nanos kLong = 3600 * kSecond;

struct World {
  PrefixIndex index{PrefixIndexOptions{.provisional_ttl = kLong}};
  EngineCacheModel model{&index};
  Nanos now = kSecond;

  World() { model.SetCapacity(0, {.kind = EngineCacheKind::kSlots, .slots = 2, .source = CapacitySource::kEngine}); }
  int Serve(const std::vector<BlockKey>& blocks) {
    index.AddProvisional(0, 0, blocks, now);
    return model.Served(0, blocks, 16);
  }
  uint32_t Held(const std::vector<BlockKey>& blocks) {
    std::vector<PrefixMatch> out;
    index.Match(blocks, now, &out);
    return out.empty() ? 0 : out[0].matched_blocks;
  }
};

std::vector<BlockKey> Chain(BlockKey first, int n) {
  std::vector<BlockKey> out;
  BlockKey parent = kRootBlockKey;
  for (int i = 0; i < n; ++i) out.push_back(parent = HashContentBlock(parent, first + static_cast<BlockKey>(i)));
  return out;
}

SlotObservation Slot(int id, std::optional<int64_t> task, bool processing = false,
                     std::optional<int64_t> tokens = std::nullopt) {
  return {.id = id, .processing = processing, .task = task, .tokens = tokens};
}
SlotObservation Idle(int id, int64_t task, int64_t tokens = 100) { return Slot(id, task, false, tokens); }
SlotObservation Unused(int id) { return Slot(id, std::nullopt); }

TEST(EngineCacheModelSlots, NeverUsedSlotsTieToTheLastAsLlamaServer) {
  World w;
  EXPECT_EQ(w.Serve(Chain(100, 4)), 1) << "get_available_slot's `<=`: the last never-used slot";
  EXPECT_EQ(w.Serve(Chain(200, 4)), 0);
  EXPECT_EQ(w.Serve(Chain(300, 4)), 1) << "then the least recently used";
}

TEST(EngineCacheModelSlots, ASlotUsedBehindTheGatewaysBackForgetsItsPrompt) {
  World w;
  const auto a = Chain(100, 4), b = Chain(200, 4);
  ASSERT_EQ(w.Serve(a), 1);
  ASSERT_EQ(w.Serve(b), 0);
  // The engine ran both: tasks 0 and 1, as the gateway sent them. Nothing to correct.
  const std::vector<SlotObservation> first = {Idle(0, 1), Idle(1, 0)};
  EXPECT_EQ(w.model.ObserveSlots(0, first), 0);
  EXPECT_EQ(w.Held(a), 4u);
  EXPECT_EQ(w.Held(b), 4u);
  // Then slot 1 took task 7, which the gateway did not send: a's prompt is gone from it.
  const std::vector<SlotObservation> second = {Idle(0, 1), Idle(1, 7)};
  EXPECT_EQ(w.model.ObserveSlots(0, second), 1);
  EXPECT_EQ(w.Held(a), 0u);
  EXPECT_EQ(w.Held(b), 4u);
  EXPECT_EQ(w.model.Occupancy(0).used_slots, 1) << "slot 1's content is unknown: it matches nothing";
  EXPECT_EQ(w.model.Occupancy(0).evictions, 4u);
  // Slot 1 counts as just used, so the next unrelated prompt replaces b's slot, as the engine
  // would.
  EXPECT_EQ(w.Serve(Chain(300, 4)), 0);
  EXPECT_EQ(w.Held(b), 0u);
}

TEST(EngineCacheModelSlots, AnEmptySlotIsEmptyUnlessARequestIsOnItsWay) {
  World w;
  const auto a = Chain(100, 4);
  ASSERT_EQ(w.Serve(a), 1);
  // Polled before the engine started it: slot 1 has no task yet; the request is on its way.
  const std::vector<SlotObservation> before = {Unused(0), Unused(1)};
  EXPECT_EQ(w.model.ObserveSlots(0, before), 0);
  EXPECT_EQ(w.Held(a), 4u);
  const std::vector<SlotObservation> ran = {Unused(0), Idle(1, 0)};
  EXPECT_EQ(w.model.ObserveSlots(0, ran), 0);
  // Then the engine cleared it (n_prompt_tokens 0, as after a restart or a slot erase).
  const std::vector<SlotObservation> cleared = {Unused(0), Idle(1, 0, 0)};
  EXPECT_EQ(w.model.ObserveSlots(0, cleared), 1);
  EXPECT_EQ(w.Held(a), 0u);
}

TEST(EngineCacheModelSlots, ABusySlotIsNotPickedUntilTheNextObservation) {
  World w;
  const auto a = Chain(100, 4);
  ASSERT_EQ(w.Serve(a), 1);
  auto a2 = a;
  a2.push_back(HashContentBlock(a.back(), 9));
  const std::vector<SlotObservation> busy = {Unused(0), Slot(1, 0, true, 64)};
  w.model.ObserveSlots(0, busy);
  // a's continuation would take a's slot, but llama-server skips a processing slot.
  EXPECT_EQ(w.Serve(a2), 0);
  const std::vector<SlotObservation> all_busy = {Slot(0, 1, true), Slot(1, 0, true)};
  w.model.ObserveSlots(0, all_busy);
  EXPECT_GE(w.Serve(Chain(300, 4)), 0) << "every slot busy: modelled as if idle, not refused";
}

TEST(EngineCacheModelSlots, OutOfRangeIdsAndOtherCachesAreIgnored) {
  World w;
  const std::vector<SlotObservation> odd = {Idle(-1, 3), Idle(2, 3), Idle(1 << 20, 3)};
  EXPECT_EQ(w.model.ObserveSlots(0, odd), 0);
  w.model.SetCapacity(1, {.kind = EngineCacheKind::kPaged, .tokens = 1024});
  EXPECT_EQ(w.model.ObserveSlots(1, odd), 0);
  EXPECT_EQ(w.model.ObserveSlots(9, odd), 0);
}

}  // namespace
}  // namespace myriad::policy
