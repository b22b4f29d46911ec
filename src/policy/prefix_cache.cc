#include "policy/prefix_cache.h"

#include <algorithm>

namespace myriad::policy {
namespace {

constexpr size_t kNpos = ~size_t{0};
constexpr size_t kMinSlots = 64;
// Load factor at most 3/8. The hand evicts where it stands while inserts land anywhere, so
// the table is sparse just behind the hand and about twice as dense just ahead of it; at 3/4
// on average, runs ahead of the hand grew to hundreds of slots (measured: 143 slots walked
// per erase, 36 probes per insert, in the full-cluster failures scenario).
constexpr size_t kLoadNum = 3, kLoadDen = 8;
constexpr uint64_t kMix = 0x9E3779B97F4A7C15ull;  // Fibonacci hashing: the top bits mix every key bit

// The multiplicative inverse of an odd number modulo 2^64 (Newton's iteration doubles the
// correct low bits each round, from three).
constexpr uint64_t Inverse(uint64_t a) {
  uint64_t x = a;
  for (int i = 0; i < 5; ++i) x *= 2 - a * x;
  return x;
}
constexpr uint64_t kMixInverse = Inverse(kMix);
static_assert(kMix * kMixInverse == 1);

// h of the block stored as `s` in slot i of a table of 2^(64 - shift) slots. The slot keeps h's
// low 61 bits; its top three are the top bits of the home, which lies less than an eighth of
// the table before i (cyclically): the home's other bits are h's, so the top three are i's, or
// one less when the home's low bits exceed i's (the block wrapped into the next eighth).
uint64_t HashIn(uint64_t s, size_t i, int shift) {
  const uint64_t low = s >> 3;
  const int eighth_bits = 64 - shift - 3;
  const uint64_t home_low = low >> shift;  // the home's low bits
  const uint64_t i_low = i & ((uint64_t{1} << eighth_bits) - 1);
  const uint64_t top = ((i >> eighth_bits) - (home_low > i_low ? 1 : 0)) & 7;
  return (top << 61) | low;
}

}  // namespace

uint64_t PrefixCache::Hash(BlockKey k) { return k * kMix; }
BlockKey PrefixCache::KeyOf(uint64_t h) { return h * kMixInverse; }
uint64_t PrefixCache::HashAt(size_t i) const { return HashIn(table_[i], i, shift_); }

// The slot holding h, or the empty slot where it would go, or npos when the probe reaches an
// eighth of the table past the home (h is then absent, and an insert must grow the table).
size_t PrefixCache::Probe(uint64_t h) const {
  const uint64_t want = h << 3;
  size_t i = HomeOfHash(h);
  for (size_t d = 0; d < reach(); ++d, i = (i + 1) & mask_) {
    const Slot s = table_[i];
    if (s == 0 || (s & ~kStateMask) == want) return i;
  }
  return kNpos;
}

size_t PrefixCache::Find(BlockKey k) const {
  if (table_.empty()) return kNpos;
  const size_t i = Probe(Hash(k));
  return i != kNpos && table_[i] != 0 ? i : kNpos;
}

void PrefixCache::Prefetch(std::span<const BlockKey> blocks) const {
  if (table_.empty()) return;
  for (BlockKey k : blocks) __builtin_prefetch(&table_[HomeOfHash(Hash(k))]);
}

void PrefixCache::Grow() {
  const std::vector<Slot> old = std::move(table_);
  const int old_shift = shift_;
  for (size_t slots = old.empty() ? kMinSlots : old.size() * 2;; slots *= 2) {
    table_.assign(slots, 0);
    mask_ = slots - 1;
    shift_ = 64 - __builtin_ctzll(slots);
    bool placed = true;
    for (size_t i = 0; i < old.size() && placed; ++i) {
      if (old[i] == 0) continue;
      const uint64_t h = HashIn(old[i], i, old_shift);
      const size_t j = Probe(h);  // absent: the first empty slot, if within reach
      placed = j != kNpos;
      if (placed) table_[j] = (h << 3) | (old[i] & kStateMask);
    }
    if (placed) break;
  }
  hand_ = 0;
}

// Backward-shift deletion: later members of the probe run move up into the hole when their
// home allows, so lookups never need tombstones (and no block moves further from its home).
void PrefixCache::EraseAt(size_t i) {
  for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
    const Slot s = table_[j];
    if (s == 0) break;
    const size_t home = HomeOfHash(HashAt(j));
    // The entry at j may fill the hole at i unless its home lies cyclically in (i, j].
    if (((j - home) & mask_) >= ((j - i) & mask_)) {
      table_[i] = s;
      i = j;
    }
  }
  table_[i] = 0;
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
    const uint64_t state = s & kStateMask;
    if (state == kEmpty || state == (lap_ == 0 ? kNewEven : kNewOdd)) {  // a new block's first lap is its grace
      ++hand_;
      continue;
    }
    if (state == kUsed) {  // second chance
      s = (s & ~kStateMask) | kCold;
      ++hand_;
      continue;
    }
    if (evicted != nullptr) evicted->push_back(KeyOf(HashAt(hand_)));
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
      table_[i] = (table_[i] & ~kStateMask) | kUsed;
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
    if ((size_ + 1) * kLoadDen > table_.size() * kLoadNum) Grow();
    const uint64_t h = Hash(blocks[pos]);
    size_t i;
    while ((i = Probe(h)) == kNpos) Grow();
    if (table_[i] != 0) {
      table_[i] = (table_[i] & ~kStateMask) | kUsed;
      continue;
    }
    if (first_new == blocks.size()) first_new = pos;
    // Not referenced until used again: blocks that stream through once go first, so a hot
    // prefix survives a flood of one-off prompts (CLOCK's scan resistance).
    table_[i] = (h << 3) | (lap_ == 0 ? kNewEven : kNewOdd);
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
    for (size_t i = 0; i < table_.size(); ++i) {
      if (table_[i] != 0) evicted->push_back(KeyOf(HashAt(i)));
    }
    std::sort(evicted->begin() + static_cast<std::ptrdiff_t>(before), evicted->end());
  }
  std::fill(table_.begin(), table_.end(), Slot{0});
  size_ = 0;
  hand_ = 0;
}

}  // namespace myriad::policy
