#include "sim/finish_wheel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "core/rng.h"

namespace myriad::sim {
namespace {

TEST(FinishWheel, TakesEachStepsEntriesInSlotOrderAndGrowsPastItsHorizon) {
  FinishWheel w;
  std::vector<FinishWheel::Entry> due;
  w.Push(0, {3, 9, 1});
  w.Push(0, {3, 2, 1});
  w.Push(0, {5000, 4, 2});  // beyond the initial 256 buckets: the wheel grows
  w.Push(1, {3, 7, 1});
  EXPECT_EQ(w.size(), 4u);
  w.TakeDue(1, &due);
  EXPECT_TRUE(due.empty());
  w.TakeDue(3, &due);
  ASSERT_EQ(due.size(), 3u);
  EXPECT_EQ(due[0].slot, 2u);
  EXPECT_EQ(due[1].slot, 7u);
  EXPECT_EQ(due[2].slot, 9u);
  w.TakeDue(5000, &due);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].epoch, 2u);
  EXPECT_EQ(w.size(), 0u);
  w.Push(5000, {5001, 1, 1});
  w.Clear();
  w.TakeDue(5001, &due);
  EXPECT_TRUE(due.empty());
}

// Against a model: a unit's steps advance one at a time and every step takes its bucket.
TEST(FinishWheel, MatchesAnOrderedModelUnderRandomPushes) {
  FinishWheel w;
  std::multimap<int64_t, uint32_t> model;
  Rng rng(11);
  std::vector<FinishWheel::Entry> due;
  uint32_t next_slot = 0;
  for (int64_t step = 0; step < 20000; ++step) {
    w.TakeDue(step, &due);
    auto [lo, hi] = model.equal_range(step);
    std::vector<uint32_t> want;
    for (auto it = lo; it != hi; ++it) want.push_back(it->second);
    model.erase(lo, hi);
    ASSERT_EQ(due.size(), want.size()) << "step " << step;
    for (size_t i = 0; i < due.size(); ++i) EXPECT_EQ(due[i].slot, want[i]);  // slots rise
    for (uint64_t k = rng.Below(4); k > 0; --k) {
      const int64_t at = step + 1 + static_cast<int64_t>(rng.Below(step < 10000 ? 300 : 3000));
      w.Push(step, {at, next_slot, 0});
      model.emplace(at, next_slot++);
    }
    ASSERT_EQ(w.size(), model.size());
  }
}

// Many finishes per step (a bucket spans several chunks of six entries), with
// repeated slots of other epochs, and pushes that grow the wheel while buckets hold spills.
TEST(FinishWheel, CrowdedStepsSpillAndComeBackInOrder) {
  FinishWheel w;
  std::multimap<int64_t, std::pair<uint32_t, uint32_t>> model;  // step -> (slot, epoch)
  Rng rng(5);
  std::vector<FinishWheel::Entry> due;
  for (int64_t step = 0; step < 3000; ++step) {
    w.TakeDue(step, &due);
    auto [lo, hi] = model.equal_range(step);
    std::vector<std::pair<uint32_t, uint32_t>> want;
    for (auto it = lo; it != hi; ++it) want.push_back(it->second);
    model.erase(lo, hi);
    std::sort(want.begin(), want.end());
    ASSERT_EQ(due.size(), want.size()) << "step " << step;
    for (size_t i = 0; i < due.size(); ++i) {
      EXPECT_EQ(due[i].step, step);
      EXPECT_EQ(std::pair(due[i].slot, due[i].epoch), want[i]) << "step " << step << ", " << i;
    }
    for (uint64_t k = rng.Below(25); k > 0; --k) {
      const int64_t reach = step % 500 == 499 ? 40000 : 4;  // now and then, far ahead: a grow
      const int64_t at = step + 1 + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(reach)));
      const auto slot = static_cast<uint32_t>(rng.Below(50));
      const auto epoch = static_cast<uint32_t>(rng.Below(3));
      w.Push(step, {at, slot, epoch});
      model.emplace(at, std::pair(slot, epoch));
    }
    ASSERT_EQ(w.size(), model.size());
  }
}

}  // namespace
}  // namespace myriad::sim
