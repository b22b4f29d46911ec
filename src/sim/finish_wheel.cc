#include "sim/finish_wheel.h"

#include <algorithm>

namespace myriad::sim {

void FinishWheel::Grow(int64_t horizon) {
  size_t n = buckets_.empty() ? 256 : buckets_.size();
  while (static_cast<int64_t>(n) <= horizon) n *= 2;
  if (n == buckets_.size()) return;
  std::vector<std::vector<Entry>> old = std::move(buckets_);
  buckets_.assign(n, {});
  for (auto& b : old) {
    for (const Entry& e : b) buckets_[static_cast<size_t>(e.step) & (n - 1)].push_back(e);
  }
}

void FinishWheel::Push(int64_t now, Entry e) {
  // Every entry lies less than a turn of the wheel ahead, so a bucket holds one step's only.
  const int64_t horizon = e.step - now;
  if (buckets_.empty() || horizon >= static_cast<int64_t>(buckets_.size())) Grow(horizon);
  buckets_[static_cast<size_t>(e.step) & (buckets_.size() - 1)].push_back(e);
  ++size_;
}

void FinishWheel::TakeDue(int64_t step, std::vector<Entry>* out) {
  out->clear();
  if (size_ == 0) return;
  std::vector<Entry>& b = buckets_[static_cast<size_t>(step) & (buckets_.size() - 1)];
  // Entries of a later turn cannot be here (see Push); keep any anyway rather than lose them.
  auto later = std::partition(b.begin(), b.end(), [step](const Entry& e) { return e.step <= step; });
  out->assign(b.begin(), later);
  b.erase(b.begin(), later);
  size_ -= out->size();
  std::sort(out->begin(), out->end(), [](const Entry& a, const Entry& b) {
    return a.slot != b.slot ? a.slot < b.slot : a.epoch < b.epoch;
  });
}

void FinishWheel::Clear() {
  for (auto& b : buckets_) b.clear();
  size_ = 0;
}

}  // namespace myriad::sim
