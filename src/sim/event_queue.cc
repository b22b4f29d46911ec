#include "sim/event_queue.h"

namespace myriad::sim {

void EventQueue::At(Nanos at, Action action) {
  heap_.push(Entry{at < now_ ? now_ : at, next_seq_++, std::move(action)});
}

bool EventQueue::Step() {
  if (heap_.empty()) return false;
  // priority_queue::top is const; move the action out before popping.
  Entry e = std::move(const_cast<Entry&>(heap_.top()));
  heap_.pop();
  now_ = e.at;
  ++executed_;
  e.action();
  return true;
}

void EventQueue::RunUntil(Nanos until) {
  while (!heap_.empty() && heap_.top().at <= until) Step();
}

}  // namespace myriad::sim
