#pragma once
// The simulator's clock and agenda: events ordered by (time, sequence of scheduling), so two
// events at the same instant run in the order they were scheduled, on every platform.
#include <cstdint>
#include <functional>
#include <vector>

#include "core/slab.h"
#include "core/time.h"

namespace myriad::sim {

class EventQueue {
 public:
  using Action = std::function<void()>;

  Nanos now() const { return now_; }
  uint64_t executed() const { return executed_; }
  size_t pending() const { return heap_.size() + (stream_pending_ ? 1 : 0); }

  // Schedules `action` at absolute time `at` (clamped to now: the past cannot be changed).
  void At(Nanos at, Action action);
  void After(Nanos delay, Action action) { At(now_ + delay, std::move(action)); }

  // A stream: a source with at most one event pending at a time, always running the same
  // action (a workload's next arrival). Its event is ordered exactly as one scheduled with At
  // at the same moment would be, but waits beside the heap, not in it: a quarter of a
  // full-cluster run's events are arrivals, and each would cost a push and a pop.
  void SetStreamAction(Action action) { stream_action_ = std::move(action); }
  // Schedules the stream's event at `at` (clamped to now); none may be pending.
  void ScheduleStream(Nanos at);

  // Runs events until none is left or the next one is later than `until`; the clock ends at
  // the last executed event (or `until` if the queue emptied earlier is not implied).
  void RunUntil(Nanos until);
  bool Step();  // runs one event; false when empty

 private:
  // The heap orders small keys; the actions stay put in a slab (reused through a free list),
  // so sifting moves 24-byte keys, not std::function objects. Four children per node: half
  // the levels of a binary heap, and a node's children share a cache line or two.
  struct Key {
    Nanos at;
    uint64_t seq;
    uint32_t action;  // index into actions_
  };
  static bool Before(const Key& a, const Key& b);  // by (time, sequence)
  void SiftUp(size_t i);
  void SiftDown(size_t i);

  std::vector<Key> heap_;
  Action stream_action_;
  Nanos stream_at_ = 0;
  uint64_t stream_seq_ = 0;
  bool stream_pending_ = false;
  Slab<Action> actions_;
  Nanos now_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t executed_ = 0;
};

}  // namespace myriad::sim
