#pragma once
// When each decoding sequence of a unit finishes, by decode step: a timing wheel with one
// bucket per step (a power of two of them, beyond the longest remaining output), so pushing is
// O(1) and each step takes exactly its own bucket. A binary heap did the same in O(log n) with
// a cache miss per level: a decode unit runs up to 18,432 sequences. A bucket is a list
// threaded through pooled nodes, so a push writes one node (recycled, usually in cache) and one
// head, not a vector per bucket.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace myriad::sim {

class FinishWheel {
 public:
  struct Entry {
    int64_t step;  // the decode step at whose end the sequence has its last token
    uint32_t slot;
    uint32_t epoch;
  };

  // `e.step` must be later than `now` (the unit's current step).
  void Push(int64_t now, Entry e);
  // The entries due at or before `step`, in slot order, into `out` (cleared first); they leave
  // the wheel.
  void TakeDue(int64_t step, std::vector<Entry>* out);
  void Clear();
  size_t size() const { return size_; }

  // Starts loading the first node of `step`'s bucket (for a TakeDue a step later).
  void PrefetchBucket(int64_t step) const {
    if (size_ == 0) return;
    const uint32_t head = heads_[static_cast<size_t>(step) & (heads_.size() - 1)];
    if (head != kNone) __builtin_prefetch(&nodes_[head]);
  }
  // The order TakeDue returns entries in.
  static void SortEntries(std::vector<Entry>* entries);

 private:
  static constexpr uint32_t kNone = ~uint32_t{0};
  struct Node {
    Entry e;
    uint32_t next;
  };
  void Grow(int64_t horizon);
  void Link(uint32_t n);  // into its step's bucket

  std::vector<uint32_t> heads_;  // per bucket, a power of two of them, or none yet
  std::vector<Node> nodes_;
  uint32_t free_ = kNone;
  size_t size_ = 0;
};

}  // namespace myriad::sim
