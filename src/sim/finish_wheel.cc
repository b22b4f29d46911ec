#include "sim/finish_wheel.h"

#include <algorithm>
#include <stdexcept>

namespace myriad::sim {

uint32_t FinishWheel::NewChunk(int64_t step, uint32_t next) {
  uint32_t c = free_;
  if (c != kNone) {
    free_ = chunks_[c].next;
  } else {
    c = static_cast<uint32_t>(chunks_.size());
    if (c >= (kNone >> kCountBits)) throw std::length_error("FinishWheel: too many entries");
    chunks_.emplace_back();
  }
  chunks_[c].step = step;
  chunks_[c].next = next;
  return c;
}

void FinishWheel::Grow(int64_t horizon) {
  size_t n = heads_.empty() ? 256 : heads_.size();
  while (static_cast<int64_t>(n) <= horizon) n *= 2;
  if (n == heads_.size()) return;
  std::vector<uint32_t> old = std::move(heads_);
  heads_.assign(n, kNone);
  // A bucket holds one step's entries, so its chain moves whole.
  for (uint32_t head : old) {
    if (head != kNone) Head(chunks_[head >> kCountBits].step) = head;
  }
}

void FinishWheel::Push(int64_t now, Entry e) {
  // Every entry lies less than a turn of the wheel ahead, and a step's bucket is emptied when
  // the step is taken, so a bucket holds one step's entries only.
  const int64_t horizon = e.step - now;
  if (heads_.empty() || horizon >= static_cast<int64_t>(heads_.size())) Grow(horizon);
  uint32_t& head = Head(e.step);
  uint32_t c, count;
  if (head == kNone || (head & ((1u << kCountBits) - 1)) == kPerChunk) {
    c = NewChunk(e.step, head == kNone ? kNone : head >> kCountBits);
    count = 0;
  } else {
    c = head >> kCountBits;
    count = head & ((1u << kCountBits) - 1);
  }
  chunks_[c].slot[count] = e.slot;
  chunks_[c].epoch[count] = e.epoch;
  head = c << kCountBits | (count + 1);
  ++size_;
}

void FinishWheel::TakeDue(int64_t step, std::vector<Entry>* out) {
  out->clear();
  if (size_ == 0) return;
  uint32_t& head = Head(step);
  if (head == kNone) return;
  const uint32_t first = head >> kCountBits;
  // Entries of a later turn cannot be here (see Push); keep them anyway rather than lose them.
  if (chunks_[first].step > step) return;
  uint32_t count = head & ((1u << kCountBits) - 1);
  for (uint32_t c = first; c != kNone; count = kPerChunk) {
    Chunk& chunk = chunks_[c];
    const uint32_t next = chunk.next;
    if (next != kNone) __builtin_prefetch(&chunks_[next]);
    for (uint32_t i = 0; i < count; ++i) out->push_back({chunk.step, chunk.slot[i], chunk.epoch[i]});
    chunk.next = free_;
    free_ = c;
    c = next;
  }
  head = kNone;
  size_ -= out->size();
  SortEntries(out);
}

void FinishWheel::SortEntries(std::vector<Entry>* entries) {
  std::sort(entries->begin(), entries->end(), [](const Entry& a, const Entry& b) {
    return a.slot != b.slot ? a.slot < b.slot : a.epoch < b.epoch;
  });
}

void FinishWheel::Clear() {
  std::fill(heads_.begin(), heads_.end(), kNone);
  chunks_.clear();
  free_ = kNone;
  size_ = 0;
}

}  // namespace myriad::sim
