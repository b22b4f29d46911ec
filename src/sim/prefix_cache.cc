#include "sim/prefix_cache.h"

#include <algorithm>

namespace myriad::sim {

void PrefixCache::EvictOne(std::vector<BlockKey>* evicted) {
  for (;;) {
    if (hand_ >= keys_.size()) hand_ = 0;
    const size_t s = hand_++;
    if (used_[s] == kEmpty) continue;
    if (used_[s] == 1) {  // second chance
      used_[s] = 0;
      continue;
    }
    index_.erase(keys_[s]);
    if (evicted != nullptr) evicted->push_back(keys_[s]);
    used_[s] = kEmpty;
    free_.push_back(static_cast<uint32_t>(s));
    ++evictions_;
    return;
  }
}

size_t PrefixCache::MatchAndTouch(std::span<const BlockKey> blocks) {
  size_t matched = 0;
  for (BlockKey k : blocks) {
    auto it = index_.find(k);
    if (it == index_.end()) break;
    used_[it->second] = 1;
    ++matched;
  }
  return matched;
}

size_t PrefixCache::Count(std::span<const BlockKey> blocks) const {
  size_t matched = 0;
  for (BlockKey k : blocks) {
    if (!index_.contains(k)) break;
    ++matched;
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
    const BlockKey k = blocks[pos];
    auto [it, inserted] = index_.try_emplace(k, 0);
    if (!inserted) {
      used_[it->second] = 1;
      continue;
    }
    if (first_new == blocks.size()) first_new = pos;
    uint32_t s;
    if (!free_.empty()) {
      s = free_.back();
      free_.pop_back();
    } else {
      s = static_cast<uint32_t>(keys_.size());
      keys_.push_back(0);
      used_.push_back(kEmpty);
    }
    keys_[s] = k;
    // Not referenced until used again: blocks that stream through once go first, so a hot
    // prefix survives a flood of one-off prompts (CLOCK's scan resistance).
    used_[s] = 0;
    it->second = s;
    while (index_.size() > capacity) EvictOne(evicted);
  }
  return first_new;
}

void PrefixCache::Shrink(size_t capacity, std::vector<BlockKey>* evicted) {
  while (index_.size() > capacity) EvictOne(evicted);
}

void PrefixCache::Clear(std::vector<BlockKey>* evicted) {
  if (evicted != nullptr) {
    for (const auto& [key, slot] : index_) evicted->push_back(key);
    // Hash-map order is not stable across library versions: sort for deterministic events.
    std::sort(evicted->end() - static_cast<std::ptrdiff_t>(index_.size()), evicted->end());
  }
  index_.clear();
  keys_.clear();
  used_.clear();
  free_.clear();
  hand_ = 0;
}

}  // namespace myriad::sim
