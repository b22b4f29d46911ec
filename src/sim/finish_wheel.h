#pragma once
// When each decoding sequence of a unit finishes, by decode step: a timing wheel with one
// bucket per step (a power of two of them, beyond the longest remaining output), so pushing is
// O(1) and each step takes exactly its own bucket. A binary heap did the same in O(log n) with
// a cache miss per level: a decode unit runs up to 18,432 sequences. A bucket is a list of
// pooled 64-byte chunks of six entries each, so taking a step's entries reads one or two
// cache lines (a list of one node per entry cost a dependent miss per entry), and only buckets
// that hold entries take memory.
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

  // Starts loading the first chunk of `step`'s bucket (for a TakeDue a step later).
  void PrefetchBucket(int64_t step) const {
    if (size_ == 0) return;
    const uint32_t head = heads_[static_cast<size_t>(step) & (heads_.size() - 1)];
    if (head != kNone) __builtin_prefetch(&chunks_[head >> kCountBits]);
  }
  // The order TakeDue returns entries in.
  static void SortEntries(std::vector<Entry>* entries);

 private:
  static constexpr uint32_t kNone = ~uint32_t{0};
  static constexpr uint32_t kPerChunk = 6;
  static constexpr uint32_t kCountBits = 3;
  // Entries of one step. A bucket's newest chunk comes first and is the one filling; the
  // others are full. Its count lives in the bucket's head word, so a push reads one word and
  // only writes the chunk.
  struct alignas(64) Chunk {
    int64_t step;
    uint32_t next;  // chunk index
    uint32_t slot[kPerChunk];
    uint32_t epoch[kPerChunk];
  };
  static_assert(sizeof(Chunk) == 64);
  void Grow(int64_t horizon);
  uint32_t& Head(int64_t step) { return heads_[static_cast<size_t>(step) & (heads_.size() - 1)]; }
  uint32_t NewChunk(int64_t step, uint32_t next);

  // Per bucket (a power of two of them, or none yet): kNone, or the first chunk's index
  // shifted left kCountBits, with the entries in that chunk in the low bits.
  std::vector<uint32_t> heads_;
  std::vector<Chunk> chunks_;
  uint32_t free_ = kNone;
  size_t size_ = 0;
};

}  // namespace myriad::sim
