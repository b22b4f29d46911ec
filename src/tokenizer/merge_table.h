#pragma once
// BPE's merges as one open-addressing table: (left id, right id) -> (rank, merged id) in a
// single 16-byte slot, so applying a merge and ranking the pairs it creates cost one probe
// each and no second, dependent lookup of the merged id. A cold-cache encode spends most of
// its time waiting on these probes; Prefetch lets a caller overlap the waits of several words.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tokenizer/huge_array.h"

namespace myriad::tokenizer {

class MergeTable {
 public:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  struct Merge {
    uint32_t rank;    // kNone when the pair does not merge
    uint32_t result;  // the merged token's id
  };

  // Room for `merges` pairs at a load factor of at most 5/8.
  explicit MergeTable(size_t merges = 0);

  // A repeated pair keeps the last rank given, as Hugging Face's map insertion does.
  void Insert(uint32_t a, uint32_t b, uint32_t rank, uint32_t result);

  Merge Find(uint32_t a, uint32_t b) const {
    const uint64_t key = Key(a, b);
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return {s.rank, s.result};
      if (s.key == kEmpty) return {kNone, kNone};
    }
  }

  // A lookup split in two, so that the slot can be prefetched in between.
  struct Probe {
    uint64_t key;
    size_t home;
  };
  Probe Start(uint32_t a, uint32_t b) const {
    const uint64_t key = Key(a, b);
    const size_t home = Home(key);
    __builtin_prefetch(&slots_[home]);
    return {key, home};
  }
  // Start for a pair that may not exist: when `exists` is false, the probe reads a slot kept
  // empty (no memory traffic, no branch) and finds no merge.
  Probe StartIf(bool exists, uint32_t a, uint32_t b) const {
    const uint64_t key = Key(a, b);
    const size_t home = exists ? Home(key) : mask_ + 1;
    __builtin_prefetch(&slots_[home]);
    return {key, home};
  }
  Merge Finish(const Probe& p) const {
    for (size_t i = p.home;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == p.key) return {s.rank, s.result};
      if (s.key == kEmpty) return {kNone, kNone};
    }
  }

 private:
  struct Slot {
    uint64_t key;
    uint32_t rank, result;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t Key(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }
  size_t Home(uint64_t key) const { return ((key ^ (key >> 29)) * 0x9E3779B97F4A7C15ull) >> shift_; }

  HugeArray<Slot> slots_;  // mask_ + 1 of them, then one always empty (StartIf)
  size_t mask_ = 0;
  int shift_ = 63;
};

}  // namespace myriad::tokenizer
