#pragma once
// A unit's prefix cache: which KV blocks it still holds, evicted in approximately
// least-recently-used order by CLOCK (second chance), as page caches do: a hit sets a bit
// instead of relinking a list, which halves the cache misses per block at full-cluster scale.
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
  // Number of leading blocks of `blocks` present; they are marked recently used.
  size_t MatchAndTouch(std::span<const BlockKey> blocks);
  // Number of leading blocks present, without touching recency.
  size_t Count(std::span<const BlockKey> blocks) const;
  // Inserts every block (new ones unreferenced, present ones marked used), evicting blocks beyond `capacity`; evicted keys are
  // appended to `evicted` when it is given. Returns the position of the first block that was
  // not already cached (blocks.size() when all were).
  size_t Insert(std::span<const BlockKey> blocks, size_t capacity, std::vector<BlockKey>* evicted = nullptr);
  // Evicts blocks until at most `capacity` remain.
  void Shrink(size_t capacity, std::vector<BlockKey>* evicted = nullptr);
  // Drops every block (appending the keys to `evicted` when given).
  void Clear(std::vector<BlockKey>* evicted = nullptr);

  size_t size() const { return index_.size(); }
  uint64_t evictions() const { return evictions_; }

 private:
  static constexpr uint8_t kEmpty = 2;
  void EvictOne(std::vector<BlockKey>* evicted);

  absl::flat_hash_map<BlockKey, uint32_t> index_;  // key -> slot
  std::vector<BlockKey> keys_;                       // slot -> key
  std::vector<uint8_t> used_;                        // slot -> 1 referenced, 0 not, kEmpty
  std::vector<uint32_t> free_;
  size_t hand_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace myriad::sim
