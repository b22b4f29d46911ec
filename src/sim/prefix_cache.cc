#include "sim/prefix_cache.h"

namespace myriad::sim {

void PrefixCache::Unlink(uint32_t i) {
  Node& n = nodes_[i];
  if (n.prev != kNil) nodes_[n.prev].next = n.next; else head_ = n.next;
  if (n.next != kNil) nodes_[n.next].prev = n.prev; else tail_ = n.prev;
}

void PrefixCache::PushFront(uint32_t i) {
  Node& n = nodes_[i];
  n.prev = kNil;
  n.next = head_;
  if (head_ != kNil) nodes_[head_].prev = i;
  head_ = i;
  if (tail_ == kNil) tail_ = i;
}

void PrefixCache::EvictOne(std::vector<BlockKey>* evicted) {
  uint32_t i = tail_;
  Unlink(i);
  if (evicted != nullptr) evicted->push_back(nodes_[i].key);
  index_.erase(nodes_[i].key);
  free_.push_back(i);
  ++evictions_;
}

size_t PrefixCache::MatchAndTouch(std::span<const BlockKey> blocks) {
  size_t matched = 0;
  for (BlockKey k : blocks) {
    auto it = index_.find(k);
    if (it == index_.end()) break;
    if (head_ != it->second) {
      Unlink(it->second);
      PushFront(it->second);
    }
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
    auto [it, inserted] = index_.try_emplace(k, kNil);
    if (!inserted) {
      if (head_ != it->second) {
        Unlink(it->second);
        PushFront(it->second);
      }
      continue;
    }
    if (first_new == blocks.size()) first_new = pos;
    uint32_t i;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
    } else {
      i = static_cast<uint32_t>(nodes_.size());
      nodes_.push_back({});
    }
    nodes_[i].key = k;
    it->second = i;
    PushFront(i);
    // Evict after linking so the new block is never its own victim while capacity >= 1.
    while (index_.size() > capacity) EvictOne(evicted);
  }
  return first_new;
}

void PrefixCache::Shrink(size_t capacity, std::vector<BlockKey>* evicted) {
  while (index_.size() > capacity) EvictOne(evicted);
}

void PrefixCache::Clear() {
  index_.clear();
  nodes_.clear();
  free_.clear();
  head_ = tail_ = kNil;
}

}  // namespace myriad::sim
