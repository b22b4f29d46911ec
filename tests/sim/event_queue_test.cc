#include "sim/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <utility>
#include <vector>

#include "core/rng.h"

namespace myriad::sim {
namespace {

TEST(EventQueue, OrdersByTimeThenScheduling) {
  EventQueue q;
  std::vector<int> order;
  q.At(20, [&] { order.push_back(3); });
  q.At(10, [&] { order.push_back(1); });
  q.At(10, [&] { order.push_back(2); q.After(0, [&] { order.push_back(4); }); });
  q.At(30, [&] { order.push_back(5); });
  q.RunUntil(25);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 4, 3}));
  EXPECT_EQ(q.now(), 20);
  EXPECT_EQ(q.pending(), 1u);
  q.At(5, [&] { order.push_back(6); });  // the past is clamped to now
  q.RunUntil(100);
  EXPECT_EQ(order.back(), 5);
  EXPECT_EQ(order[4], 6);
}

// Random schedules, with events that schedule more while they run, against a model ordered by
// (time, scheduling order): the heap's bottom-up removal and its four-way child choice must
// give exactly that order, ties included.
TEST(EventQueue, MatchesAnOrderedModelUnderRandomSchedules) {
  EventQueue q;
  Rng rng(9);
  std::set<std::pair<Nanos, uint64_t>> model;  // (time, id), ids in scheduling order
  std::vector<uint64_t> ran;
  uint64_t next_id = 0;
  std::function<void(Nanos)> schedule = [&](Nanos at) {
    const uint64_t id = next_id++;
    const Nanos when = std::max(at, q.now());
    model.insert({when, id});
    q.At(at, [&, id] {
      ran.push_back(id);
      for (uint64_t k = rng.Below(3); k > 0; --k) schedule(q.now() + static_cast<Nanos>(rng.Below(50)));
    });
  };
  for (int i = 0; i < 300; ++i) schedule(static_cast<Nanos>(rng.Below(100)));
  while (q.Step() && ran.size() < 20000) {
  }
  std::vector<uint64_t> want;
  for (auto it = model.begin(); want.size() < ran.size(); ++it) want.push_back(it->second);
  EXPECT_EQ(ran, want);
  EXPECT_GT(ran.size(), 1000u);
}

// The stream's events (one pending at a time, beside the heap) must run in the same
// (time, scheduling) order as events scheduled with At, ties with heap events included.
TEST(EventQueue, StreamEventsKeepTheOrderOfScheduling) {
  EventQueue q;
  Rng rng(4);
  std::set<std::pair<Nanos, uint64_t>> model;  // (time, id), ids in scheduling order
  std::vector<uint64_t> ran;
  uint64_t next_id = 0, stream_id = 0;
  std::function<void(Nanos)> schedule = [&](Nanos at) {
    const uint64_t id = next_id++;
    model.insert({std::max(at, q.now()), id});
    q.At(at, [&, id] {
      ran.push_back(id);
      if (rng.Below(2) == 0) schedule(q.now() + static_cast<Nanos>(rng.Below(20)));
    });
  };
  auto schedule_stream = [&](Nanos at) {
    stream_id = next_id++;
    model.insert({std::max(at, q.now()), stream_id});
    q.ScheduleStream(at);
  };
  q.SetStreamAction([&] {
    ran.push_back(stream_id);
    for (uint64_t k = rng.Below(3); k > 0; --k) schedule(q.now() + static_cast<Nanos>(rng.Below(30)));
    if (ran.size() < 5000) schedule_stream(q.now() + static_cast<Nanos>(rng.Below(10)));  // 0: a tie
  });
  for (int i = 0; i < 50; ++i) schedule(static_cast<Nanos>(rng.Below(100)));
  schedule_stream(3);
  EXPECT_EQ(q.pending(), 51u);
  q.RunUntil(1'000'000'000);
  std::vector<uint64_t> want;
  for (const auto& [at, id] : model) want.push_back(id);
  EXPECT_EQ(ran, want);
  EXPECT_GT(ran.size(), 5000u);
  EXPECT_EQ(q.pending(), 0u);
}

}  // namespace
}  // namespace myriad::sim
