#pragma once
// The storage under PrefixIndex: an open-addressing (linear probing) table of blocks whose
// 16-byte slot holds the block key and one 64-bit word. A block with one holder keeps that
// holder's word inline; a block with more points to a chain of pooled 32-byte nodes of three
// words each. The table (a multiple of four slots: 64-byte lines) grows by 1.5x at 3/4 load,
// so it is 1/2 to 3/4 full (21-32 bytes per single-holder block), and maps keys to slots with
// a multiply-shift ("fastrange"), which allows capacities that are not powers of two. Erase
// shifts the rest of the run back (no tombstones).
//
// Large arrays (the table past 2 MiB, node chunks) are 2 MiB-aligned and advised as huge pages:
// probes land on random pages of a table of hundreds of MiB, and TLB misses (two-level page
// walks under virtualisation) otherwise double the cost of each probe.
//
// Word bits 63..61 belong to the store (occupied, overflow, referenced); bits 60..0 are the
// caller's payload. An empty slot has word 0. Slot indices stay valid until the next Insert
// (which may grow the table) or erase (which may shift later slots back by one).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/block_hash.h"
#include "core/huge_array.h"

namespace myriad::policy::prefix_index_internal {

class BlockStore {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr uint64_t kOcc = uint64_t{1} << 63;
  static constexpr uint64_t kOvf = uint64_t{1} << 62;
  static constexpr uint64_t kRef = uint64_t{1} << 61;
  static constexpr uint64_t kPayload = kRef - 1;

  BlockStore();

  size_t size() const { return size_; }          // blocks
  size_t capacity() const { return capacity_; }  // slots
  size_t memory_bytes() const;

  uint32_t Home(BlockKey key) const {
    return static_cast<uint32_t>((static_cast<unsigned __int128>(Mix(key)) * capacity_) >> 64);
  }
  // The home slot's line and the next, into L1: an insert's probe (a miss) often runs on.
  // (Prefetching past the table's end is harmless: a prefetch never faults.)
  void Prefetch(BlockKey key) const {
    const uintptr_t p = reinterpret_cast<uintptr_t>(&slots_[Home(key)]);
    __builtin_prefetch(reinterpret_cast<const void*>(p));
    __builtin_prefetch(reinterpret_cast<const void*>(p + 64));
  }
  // Into L2 (hint 2): more of these can be in flight than of L1 fills.
  void PrefetchSlot(uint32_t slot) const { __builtin_prefetch(&slots_[slot], 0, 2); }
  void PrefetchChain(uint32_t slot) const {
    const uint64_t w = slots_[slot].word;
    if (w & kOvf) __builtin_prefetch(&node(static_cast<uint32_t>(w)), 0, 2);
  }

  uint32_t Find(BlockKey key) const { return FindFrom(Home(key), key); }
  uint32_t FindFrom(uint32_t i, BlockKey key) const {
    for (;;) {
      const Slot& s = slots_[i];
      if (s.word == 0) return kNone;
      if (s.key == key) return i;
      if (++i == capacity_) i = 0;
    }
  }
  // The first step of a Find that touches only the home slot's line (four slots; the table is
  // line-aligned and its capacity a multiple of four), without branching on each slot: the
  // slot, kNone, or kMore when the probe goes on in the next line (FindFrom(NextLine(home))).
  static constexpr uint32_t kMore = kNone - 1;
  uint32_t FindInLine(uint32_t home, BlockKey key) const {
    const Slot* line = &slots_[home & ~3u];
    uint32_t found = 0;
    uint32_t empty = 0;
    for (uint32_t k = 0; k < 4; ++k) {
      found |= static_cast<uint32_t>((line[k].key == key) & (line[k].word != 0)) << k;
      empty |= static_cast<uint32_t>(line[k].word == 0) << k;
    }
    if (found != 0) return (home & ~3u) + static_cast<uint32_t>(__builtin_ctz(found));
    return (empty >> (home & 3)) != 0 ? kNone : kMore;
  }
  uint32_t NextLine(uint32_t home) const {
    const uint32_t next = (home | 3u) + 1;
    return next == capacity_ ? 0 : next;
  }
  // Adds a block (absent) with one word; may grow the table, invalidating slot indices.
  uint32_t Insert(BlockKey key, uint64_t payload, bool ref);
  // Removes the block and its chain; the block that shifts into `slot`, if any, is there now.
  void EraseBlock(uint32_t slot);

  BlockKey key(uint32_t slot) const { return slots_[slot].key; }
  bool empty(uint32_t slot) const { return slots_[slot].word == 0; }
  bool ref(uint32_t slot) const { return slots_[slot].word & kRef; }
  void set_ref(uint32_t slot) { slots_[slot].word |= kRef; }
  void clear_ref(uint32_t slot) { slots_[slot].word &= ~kRef; }

  // Calls f(payload) for each word of the block.
  template <class F>
  void ForEach(uint32_t slot, F&& f) const {
    const uint64_t w = slots_[slot].word;
    if (!(w & kOvf)) {
      f(w & kPayload);
      return;
    }
    for (uint32_t n = static_cast<uint32_t>(w); n != kNone;) {
      const Node& nd = node(n);
      for (uint32_t j = 0; j < nd.n; ++j) f(nd.w[j] & kPayload);
      n = nd.next;
    }
  }
  // The stored word whose payload satisfies `pred`, or nullptr. Write it back only through
  // SetPayload.
  template <class P>
  uint64_t* FindWord(uint32_t slot, P&& pred) {
    uint64_t& w = slots_[slot].word;
    if (!(w & kOvf)) return pred(w & kPayload) ? &w : nullptr;
    for (uint32_t n = static_cast<uint32_t>(w); n != kNone;) {
      Node& nd = node(n);
      for (uint32_t j = 0; j < nd.n; ++j) {
        if (pred(nd.w[j] & kPayload)) return &nd.w[j];
      }
      n = nd.next;
    }
    return nullptr;
  }
  static void SetPayload(uint64_t* word, uint64_t payload) {
    *word = (*word & ~kPayload) | payload;
  }
  void AddWord(uint32_t slot, uint64_t payload);
  // Removes every word whose payload satisfies `drop` (calling it once per word), erasing the
  // block when none is left. Returns true when the block was erased.
  template <class D>
  bool RemoveIf(uint32_t slot, D&& drop) {
    const uint64_t w = slots_[slot].word;
    if (!(w & kOvf)) {
      if (!drop(w & kPayload)) return false;
      EraseBlock(slot);
      return true;
    }
    scratch_.clear();
    bool changed = false;
    ForEach(slot, [&](uint64_t p) {
      if (drop(p)) {
        changed = true;
      } else {
        scratch_.push_back(p);
      }
    });
    if (!changed) return false;
    return Rebuild(slot);
  }

 private:
  struct Slot {
    BlockKey key;
    uint64_t word;
  };
  struct Node {
    uint64_t w[3];
    uint32_t next;
    uint32_t n;
  };
  static constexpr uint32_t kChunkBits = 16;  // 65,536 nodes (2 MiB) per chunk

  static uint64_t Mix(uint64_t k) {
    k ^= k >> 32;
    k *= 0xd6e8feb86659fd93ULL;
    k ^= k >> 32;
    return k;
  }
  Node& node(uint32_t i) { return chunks_[i >> kChunkBits][i & ((1u << kChunkBits) - 1)]; }
  const Node& node(uint32_t i) const {
    return chunks_[i >> kChunkBits][i & ((1u << kChunkBits) - 1)];
  }
  uint32_t NewNode();
  void FreeChain(uint32_t head);
  bool Rebuild(uint32_t slot);  // rewrites the block from scratch_
  void Grow();
  void Place(Slot s);

  std::unique_ptr<Slot[], FreeDeleter> slots_;
  size_t slot_bytes_ = 0;  // allocated for slots_
  uint32_t capacity_ = 0;
  size_t size_ = 0;
  std::vector<std::unique_ptr<Node[], FreeDeleter>> chunks_;
  uint32_t nodes_used_ = 0;  // nodes handed out from the chunks, free ones included
  uint32_t free_nodes_ = kNone;
  std::vector<uint64_t> scratch_;
};

}  // namespace myriad::policy::prefix_index_internal
