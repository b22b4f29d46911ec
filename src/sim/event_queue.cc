#include "sim/event_queue.h"

#include <utility>

namespace myriad::sim {

void EventQueue::SiftUp(size_t i) {
  const Key k = heap_[i];
  while (i > 0) {
    const size_t parent = (i - 1) / 4;
    if (!Before(k, heap_[parent])) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = k;
}

void EventQueue::SiftDown(size_t i) {
  const size_t n = heap_.size();
  const Key k = heap_[i];
  for (;;) {
    const size_t first = 4 * i + 1;
    if (first >= n) break;
    size_t best = first;
    const size_t last = first + 4 < n ? first + 4 : n;
    for (size_t c = first + 1; c < last; ++c) {
      if (Before(heap_[c], heap_[best])) best = c;
    }
    if (!Before(heap_[best], k)) break;
    heap_[i] = heap_[best];
    i = best;
  }
  heap_[i] = k;
}

void EventQueue::At(Nanos at, Action action) {
  uint32_t slot;
  if (!free_actions_.empty()) {
    slot = free_actions_.back();
    free_actions_.pop_back();
    actions_[slot] = std::move(action);
  } else {
    slot = static_cast<uint32_t>(actions_.size());
    actions_.push_back(std::move(action));
  }
  heap_.push_back(Key{at < now_ ? now_ : at, next_seq_++, slot});
  SiftUp(heap_.size() - 1);
}

bool EventQueue::Step() {
  if (heap_.empty()) return false;
  const Key top = heap_.front();
  heap_.front() = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) SiftDown(0);
  // The action leaves the slab before it runs: it may schedule others, which may reuse or
  // grow the slab.
  Action action = std::move(actions_[top.action]);
  actions_[top.action] = nullptr;
  free_actions_.push_back(top.action);
  now_ = top.at;
  ++executed_;
  action();
  return true;
}

void EventQueue::RunUntil(Nanos until) {
  while (!heap_.empty() && heap_.front().at <= until) Step();
}

}  // namespace myriad::sim
