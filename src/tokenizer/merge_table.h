#pragma once
// BPE's merges as one open-addressing table: (left id, right id) -> (rank, merged id) in one
// slot, so applying a merge and ranking the pairs it creates cost one probe each and no
// second, dependent lookup of the merged id. A cold-cache encode spends much of its time on
// these probes (the table is several MiB, probed at random), so the slot is as small as the
// file allows: 8 bytes when the merged ids rise with the rank (Qwen, DeepSeek, GPT-2 style
// files: the merged id then orders merges as the rank does, and stands for it), else 16.
// Start / Finish split a lookup so a caller can prefetch the slot and overlap several waits.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/huge_array.h"

namespace myriad::tokenizer {

class MergeTable {
 public:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  struct Merge {
    // Orders merges as their ranks do (the rank, or the merged id when those rise together);
    // kNone when the pair does not merge.
    uint32_t rank;
    uint32_t result;  // the merged token's id
  };
  struct Entry {
    uint32_t a, b, result;
  };

  MergeTable() : MergeTable(std::vector<Entry>{}) {}
  // The merges in rank order. A repeated pair keeps its last rank, as Hugging Face's map does.
  explicit MergeTable(const std::vector<Entry>& merges);

  Merge Find(uint32_t a, uint32_t b) const { return Finish(Start(a, b)); }

  struct Probe {
    uint64_t key;
    size_t home;
  };
  Probe Start(uint32_t a, uint32_t b) const { return StartIf(true, a, b); }
  // Start for a pair that may not exist: when `exists` is false, the probe reads a slot kept
  // empty (no memory traffic, no branch) and finds no merge.
  Probe StartIf(bool exists, uint32_t a, uint32_t b) const {
    const uint64_t key = narrow_ ? NarrowKey(a, b) : WideKey(a, b);
    const size_t home = exists ? Home(key) : mask_ + 1;
    __builtin_prefetch(narrow_ ? static_cast<const void*>(&narrow_slots_[home]) : &wide_slots_[home]);
    return {key, home};
  }
  Merge Finish(const Probe& p) const {
    if (narrow_) {
      for (size_t i = p.home;; i = (i + 1) & mask_) {
        const uint64_t s = narrow_slots_[i];
        if ((s & ~kResultMask) == p.key) {
          const auto result = static_cast<uint32_t>(s & kResultMask);
          return {result, result};
        }
        if (s == kEmpty) return {kNone, kNone};
      }
    }
    for (size_t i = p.home;; i = (i + 1) & mask_) {
      const Wide& s = wide_slots_[i];
      if (s.key == p.key) return {s.rank, s.result};
      if (s.key == kEmpty) return {kNone, kNone};
    }
  }

  bool narrow() const { return narrow_; }

 private:
  // Narrow slot: left id << 44 | right id << 24 | merged id (20 bits each; ids below 2^20 - 1).
  static constexpr int kIdBits = 20;
  static constexpr uint64_t kResultMask = (uint64_t{1} << 24) - 1;
  struct Wide {
    uint64_t key;
    uint32_t rank, result;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t WideKey(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }
  static uint64_t NarrowKey(uint32_t a, uint32_t b) {
    return (static_cast<uint64_t>(a) << (24 + kIdBits)) | (static_cast<uint64_t>(b) << 24);
  }
  size_t Home(uint64_t key) const { return ((key ^ (key >> 29)) * 0x9E3779B97F4A7C15ull) >> shift_; }

  bool narrow_ = false;
  HugeArray<uint64_t> narrow_slots_;  // mask_ + 1 of them, then one always empty (StartIf)
  HugeArray<Wide> wide_slots_;        // the same
  size_t mask_ = 0;
  int shift_ = 63;
};

}  // namespace myriad::tokenizer
