#include "sim/prefix_cache.h"

#include <algorithm>

namespace myriad::sim {
namespace {

constexpr size_t kNpos = ~size_t{0};
constexpr size_t kMinSlots = 64;
// Load factor at most 3/8. The hand evicts where it stands while inserts land anywhere, so
// the table is sparse just behind the hand and about twice as dense just ahead of it; at 3/4
// on average, runs ahead of the hand grew to hundreds of slots (measured: 143 slots walked
// per erase, 36 probes per insert, in the full-cluster failures scenario).
constexpr size_t kLoadNum = 3, kLoadDen = 8;
constexpr uint64_t kMix = 0x9E3779B97F4A7C15ull;  // Fibonacci hashing: the top bits mix every key bit

}  // namespace

size_t PrefixCache::Home(BlockKey k) const { return static_cast<size_t>((k * kMix) >> shift_); }

size_t PrefixCache::Find(BlockKey k) const {
  if (table_.empty()) return kNpos;
  for (size_t i = Home(k);; i = (i + 1) & mask_) {
    const Slot& s = table_[i];
    if (s.state == kEmpty) return kNpos;
    if (s.key == k) return i;
  }
}

void PrefixCache::Prefetch(std::span<const BlockKey> blocks) const {
  if (table_.empty()) return;
  for (BlockKey k : blocks) __builtin_prefetch(&table_[Home(k)]);
}

void PrefixCache::Grow() {
  std::vector<Slot> old = std::move(table_);
  const size_t slots = old.empty() ? kMinSlots : old.size() * 2;
  table_.assign(slots, Slot{0, kEmpty});
  mask_ = slots - 1;
  shift_ = 64 - __builtin_ctzll(slots);
  hand_ = 0;
  for (const Slot& s : old) {
    if (s.state == kEmpty) continue;
    size_t i = Home(s.key);
    while (table_[i].state != kEmpty) i = (i + 1) & mask_;
    table_[i] = s;
  }
}

// Backward-shift deletion: later members of the probe run move up into the hole when their
// home allows, so lookups never need tombstones.
void PrefixCache::EraseAt(size_t i) {
  for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
    const Slot& s = table_[j];
    if (s.state == kEmpty) break;
    const size_t home = Home(s.key);
    // The entry at j may fill the hole at i unless its home lies cyclically in (i, j].
    if (((j - home) & mask_) >= ((j - i) & mask_)) {
      table_[i] = s;
      i = j;
    }
  }
  table_[i].state = kEmpty;
  --size_;
}

void PrefixCache::EvictOne(std::vector<BlockKey>* evicted) {
  for (;;) {
    if (hand_ > mask_) {
      hand_ = 0;
      lap_ ^= 1;
      continue;
    }
    Slot& s = table_[hand_];
    if (s.state == kEmpty || s.state == (lap_ == 0 ? kNewEven : kNewOdd)) {  // a new block's first lap is its grace
      ++hand_;
      continue;
    }
    if (s.state == kUsed) {  // second chance
      s.state = kCold;
      ++hand_;
      continue;
    }
    if (evicted != nullptr) evicted->push_back(s.key);
    ++evictions_;
    // The hand stays: the shift may have moved a block it has not visited into this slot.
    EraseAt(hand_);
    return;
  }
}

size_t PrefixCache::MatchAndTouch(std::span<const BlockKey> blocks) {
  size_t matched = 0;
  for (size_t k = 0; k < blocks.size(); k += kBatch) {
    const auto batch = blocks.subspan(k, std::min(kBatch, blocks.size() - k));
    Prefetch(batch);
    for (BlockKey key : batch) {
      const size_t i = Find(key);
      if (i == kNpos) return matched;
      table_[i].state = kUsed;
      ++matched;
    }
  }
  return matched;
}

size_t PrefixCache::Count(std::span<const BlockKey> blocks) const {
  size_t matched = 0;
  for (size_t k = 0; k < blocks.size(); k += kBatch) {
    const auto batch = blocks.subspan(k, std::min(kBatch, blocks.size() - k));
    Prefetch(batch);
    for (BlockKey key : batch) {
      if (Find(key) == kNpos) return matched;
      ++matched;
    }
  }
  return matched;
}

size_t PrefixCache::Insert(std::span<const BlockKey> blocks, size_t capacity, std::vector<BlockKey>* evicted) {
  if (capacity == 0) {
    Shrink(0, evicted);
    return blocks.size();
  }
  size_t first_new = blocks.size();
  for (size_t pos = 0; pos < blocks.size(); ++pos) {
    if (pos % kBatch == 0) Prefetch(blocks.subspan(pos, std::min(kBatch, blocks.size() - pos)));
    const BlockKey k = blocks[pos];
    if ((size_ + 1) * kLoadDen > table_.size() * kLoadNum) Grow();
    size_t i = Home(k);
    while (table_[i].state != kEmpty && table_[i].key != k) i = (i + 1) & mask_;
    if (table_[i].state != kEmpty) {
      table_[i].state = kUsed;
      continue;
    }
    if (first_new == blocks.size()) first_new = pos;
    // Not referenced until used again: blocks that stream through once go first, so a hot
    // prefix survives a flood of one-off prompts (CLOCK's scan resistance).
    table_[i] = Slot{k, lap_ == 0 ? kNewEven : kNewOdd};
    ++size_;
    while (size_ > capacity) EvictOne(evicted);
  }
  return first_new;
}

void PrefixCache::Shrink(size_t capacity, std::vector<BlockKey>* evicted) {
  while (size_ > capacity) EvictOne(evicted);
}

void PrefixCache::Clear(std::vector<BlockKey>* evicted) {
  if (evicted != nullptr) {
    const size_t before = evicted->size();
    for (const Slot& s : table_) {
      if (s.state != kEmpty) evicted->push_back(s.key);
    }
    std::sort(evicted->begin() + static_cast<std::ptrdiff_t>(before), evicted->end());
  }
  std::fill(table_.begin(), table_.end(), Slot{0, kEmpty});
  size_ = 0;
  hand_ = 0;
}

}  // namespace myriad::sim
