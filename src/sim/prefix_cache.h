#pragma once
// A unit's prefix cache: which KV blocks it still holds, evicted least-recently-used first.
// Its capacity moves with the KV the running sequences need, as in vLLM, where cached blocks
// are free blocks whose content has not been overwritten yet.
#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/block_hash.h"

namespace myriad::sim {

class PrefixCache {
 public:
  // Number of leading blocks of `blocks` present; they become most recently used.
  size_t MatchAndTouch(std::span<const BlockKey> blocks);
  // Number of leading blocks present, without touching recency.
  size_t Count(std::span<const BlockKey> blocks) const;
  // Inserts (or refreshes) every block, evicting LRU blocks beyond `capacity`; evicted keys
  // are appended to `evicted` when it is given. Returns the position of the first block that
  // was not already cached (blocks.size() when all were).
  size_t Insert(std::span<const BlockKey> blocks, size_t capacity, std::vector<BlockKey>* evicted = nullptr);
  // Evicts LRU blocks until at most `capacity` remain.
  void Shrink(size_t capacity, std::vector<BlockKey>* evicted = nullptr);
  void Clear();

  size_t size() const { return index_.size(); }
  uint64_t evictions() const { return evictions_; }

 private:
  static constexpr uint32_t kNil = UINT32_MAX;
  struct Node {
    BlockKey key;
    uint32_t prev, next;
  };
  void Unlink(uint32_t i);
  void PushFront(uint32_t i);
  void EvictOne(std::vector<BlockKey>* evicted);

  absl::flat_hash_map<BlockKey, uint32_t> index_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> free_;
  uint32_t head_ = kNil, tail_ = kNil;  // head: most recent
  uint64_t evictions_ = 0;
};

}  // namespace myriad::sim
