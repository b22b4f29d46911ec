#include "sim/event_queue.h"

#include <cassert>
#include <utility>

namespace myriad::sim {

namespace {
// (time, sequence) as one number, so a comparison is one 128-bit compare, not two branches.
inline unsigned __int128 Order(Nanos at, uint64_t seq) {
  return (static_cast<unsigned __int128>(static_cast<uint64_t>(at)) << 64) | seq;
}
}  // namespace

bool EventQueue::Before(const Key& a, const Key& b) { return Order(a.at, a.seq) < Order(b.at, b.seq); }

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

// Removes the root the bottom-up way: the hole left at i walks down to a leaf through the
// smaller child of each level (for four children, two rounds of selects rather than three
// dependent branches), then `k`, the element that replaces it, rises from there. The
// replacement came from the bottom and usually belongs near it, so this compares less than
// sifting `k` down from the top.
void EventQueue::SiftDown(size_t i) {
  const size_t n = heap_.size();
  const Key k = heap_[i];
  for (;;) {
    const size_t first = 4 * i + 1;
    if (first >= n) break;
    size_t best;
    if (first + 4 <= n) {
      const Key* c = &heap_[first];
      const auto o0 = Order(c[0].at, c[0].seq), o1 = Order(c[1].at, c[1].seq);
      const auto o2 = Order(c[2].at, c[2].seq), o3 = Order(c[3].at, c[3].seq);
      const size_t a = o1 < o0 ? 1 : 0, b = o3 < o2 ? 3 : 2;
      const auto oa = o1 < o0 ? o1 : o0, ob = o3 < o2 ? o3 : o2;
      best = first + (ob < oa ? b : a);
    } else {
      best = first;
      for (size_t c = first + 1; c < n; ++c) {
        if (Before(heap_[c], heap_[best])) best = c;
      }
    }
    heap_[i] = heap_[best];
    i = best;
  }
  heap_[i] = k;
  SiftUp(i);
}

void EventQueue::At(Nanos at, Action action) {
  heap_.push_back(Key{at < now_ ? now_ : at, next_seq_++, actions_.Put(std::move(action))});
  SiftUp(heap_.size() - 1);
}

void EventQueue::ScheduleStream(Nanos at) {
  // One pending at a time, and an action to run: a second call would drop the first arrival.
  assert(!stream_pending_ && stream_action_);
  stream_at_ = at < now_ ? now_ : at;
  stream_seq_ = next_seq_++;
  stream_pending_ = true;
}

bool EventQueue::Step() {
  if (stream_pending_ &&
      (heap_.empty() || Order(stream_at_, stream_seq_) < Order(heap_.front().at, heap_.front().seq))) {
    stream_pending_ = false;
    now_ = stream_at_;
    ++executed_;
    stream_action_();
    return true;
  }
  if (heap_.empty()) return false;
  const Key top = heap_.front();
  heap_.front() = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) SiftDown(0);
  // The action leaves the slab before it runs: it may schedule others, which may reuse or
  // grow the slab.
  Action action = actions_.Take(top.action);
  now_ = top.at;
  ++executed_;
  action();
  return true;
}

// Flattened: Step (and the heap's sift) inline into the loop that runs nearly every event; as a
// call, its prologue and epilogue cost about 1% of a run's instructions (callgrind, default
// scenario at 1/16).
[[gnu::flatten]] void EventQueue::RunUntil(Nanos until) {
  for (;;) {
    const bool heap_due = !heap_.empty() && heap_.front().at <= until;
    if (!heap_due && !(stream_pending_ && stream_at_ <= until)) return;
    Step();
  }
}

}  // namespace myriad::sim
