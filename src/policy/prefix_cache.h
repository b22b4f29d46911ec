#pragma once
// An engine's prefix cache: which KV blocks it still holds, evicted in approximately
// least-recently-used order by CLOCK (second chance), as page caches do: a hit sets a bit
// instead of relinking a list. Its capacity moves with the KV the running sequences need, as
// in vLLM, where cached blocks are free blocks whose content has not been overwritten yet.
// One cache for both worlds: a simulated unit (sim/unit.h) and the emulated engine
// (emu/engine.h) keep their blocks here, so they evict the same blocks.
//
// Layout, for full-cluster runs where every probe is a cache miss (hundreds of units, millions
// of blocks): one open-addressing table of 8-byte slots (linear probing, backward-shift
// deletion), and the CLOCK hand sweeps that table itself, so a block costs one random memory
// access per lookup and evicting costs none (the hand's walk is sequential). Lookups of a
// prompt's blocks are independent (the keys are given), so their lines are prefetched together
// before any is read.
//
// A slot holds the key's hash h = key * M (M odd, so h gives the key back exactly) shifted left
// by three bits, with the CLOCK state in the freed low bits. The three top bits of h that the
// shift drops are the top bits of the block's home slot, and they come back from where the
// block sits: no block is ever placed an eighth of the table or more past its home (an insert
// that would be grows the table instead), so the home is the one candidate within that
// distance. The same bound makes comparing the low 61 bits exact: two keys that share them have
// homes an eighth of the table apart or more, and a lookup never walks that far.
//
// The hand visits blocks in table (hash) order, so a new block waits between none and one
// rotation for its first visit; to give every block about one rotation before it can go, as a
// CLOCK over insertion order does, a new block carries the hand's lap parity and is passed
// over by the hand in the lap it was inserted in.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "core/block_hash.h"

namespace myriad::policy {

class PrefixCache {
 public:
  // Number of leading blocks of `blocks` present; they are marked recently used.
  size_t MatchAndTouch(std::span<const BlockKey> blocks);
  // Starts loading the table lines that looking up (the first of) `blocks` will read.
  void PrefetchLookups(std::span<const BlockKey> blocks) const { Prefetch(blocks.first(std::min(blocks.size(), kBatch))); }
  // Number of leading blocks present, without touching recency.
  size_t Count(std::span<const BlockKey> blocks) const;
  // Inserts every block (new ones unreferenced, present ones marked used), evicting blocks
  // beyond `capacity`; evicted keys are appended to `evicted` when it is given. Returns the
  // position of the first block that was not already cached (blocks.size() when all were).
  size_t Insert(std::span<const BlockKey> blocks, size_t capacity, std::vector<BlockKey>* evicted = nullptr);
  // Evicts blocks until at most `capacity` remain.
  void Shrink(size_t capacity, std::vector<BlockKey>* evicted = nullptr);
  // Drops every block (appending the keys to `evicted` when given, in key order).
  void Clear(std::vector<BlockKey>* evicted = nullptr);

  size_t size() const { return size_; }
  uint64_t evictions() const { return evictions_; }

 private:
  // Slot states (the low three bits). kNew* : inserted and not used since, in the hand's even /
  // odd lap.
  enum : uint64_t { kEmpty = 0, kNewEven = 1, kNewOdd = 2, kCold = 3, kUsed = 4, kStateMask = 7 };
  using Slot = uint64_t;  // 0 when empty, else (h << 3) | state
  static constexpr size_t kBatch = 32;  // blocks whose lines are prefetched together

  static uint64_t Hash(BlockKey k);
  static BlockKey KeyOf(uint64_t h);
  size_t HomeOfHash(uint64_t h) const { return static_cast<size_t>(h >> shift_); }
  uint64_t HashAt(size_t i) const;  // h of the block in (occupied) slot i
  size_t reach() const { return (mask_ + 1) >> 3; }  // no block lies this far past its home
  size_t Probe(uint64_t h) const;
  size_t Find(BlockKey k) const;  // the slot holding k, or npos
  void Prefetch(std::span<const BlockKey> blocks) const;
  void Grow();
  void EraseAt(size_t i);
  void EvictOne(std::vector<BlockKey>* evicted);

  std::vector<Slot> table_;  // empty, or a power of two of slots
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
  size_t hand_ = 0;
  uint8_t lap_ = 0;  // parity of the hand's laps
  uint64_t evictions_ = 0;
};

}  // namespace myriad::policy
