#include "sim/finish_wheel.h"

#include <algorithm>

namespace myriad::sim {

void FinishWheel::Link(uint32_t n) {
  uint32_t& head = heads_[static_cast<size_t>(nodes_[n].e.step) & (heads_.size() - 1)];
  nodes_[n].next = head;
  head = n;
}

void FinishWheel::Grow(int64_t horizon) {
  size_t n = heads_.empty() ? 256 : heads_.size();
  while (static_cast<int64_t>(n) <= horizon) n *= 2;
  if (n == heads_.size()) return;
  std::vector<uint32_t> old = std::move(heads_);
  heads_.assign(n, kNone);
  for (uint32_t head : old) {
    for (uint32_t i = head; i != kNone;) {
      const uint32_t next = nodes_[i].next;
      Link(i);
      i = next;
    }
  }
}

void FinishWheel::Push(int64_t now, Entry e) {
  // Every entry lies less than a turn of the wheel ahead, so a bucket holds one step's only.
  const int64_t horizon = e.step - now;
  if (heads_.empty() || horizon >= static_cast<int64_t>(heads_.size())) Grow(horizon);
  uint32_t n = free_;
  if (n != kNone) {
    free_ = nodes_[n].next;
    nodes_[n].e = e;
  } else {
    n = static_cast<uint32_t>(nodes_.size());
    nodes_.push_back({e, kNone});
  }
  Link(n);
  ++size_;
}

void FinishWheel::TakeDue(int64_t step, std::vector<Entry>* out) {
  out->clear();
  if (size_ == 0) return;
  uint32_t* link = &heads_[static_cast<size_t>(step) & (heads_.size() - 1)];
  // Entries of a later turn cannot be here (see Push); keep any anyway rather than lose them.
  while (*link != kNone) {
    const uint32_t n = *link;
    Node& node = nodes_[n];
    if (node.e.step > step) {
      link = &node.next;
      continue;
    }
    out->push_back(node.e);
    *link = node.next;
    node.next = free_;
    free_ = n;
  }
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
  nodes_.clear();
  free_ = kNone;
  size_ = 0;
}

}  // namespace myriad::sim
