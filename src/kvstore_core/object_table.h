#pragma once
// Internal layout of the master's metadata (not an API). See kvstore_core/master.h for the model.
//
// Per namespace, 1,024 shards by block-key hash; shard s of namespace n is one ObjectTable:
//   - `index`: every block key of the namespace that hashes to s -> where its run lives
//     (shard, slot) and the block's position in the run. 16 bytes per slot of the hash table.
//   - `runs`: a slab of the runs whose *last* key hashes to s; free slots are chained. A run's
//     record is 64 bytes; its other keys (needed to erase them from the index) sit in one
//     out-of-line array, none for a one-block run.
// The slab is also the CLOCK ring of the shard's eviction hand (approximate LRU per shard).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/block_hash.h"
#include "core/time.h"
#include "kvstore_core/types.h"

namespace myriad::kvstore::internal {

inline constexpr uint32_t kNoSlot = UINT32_MAX;
// A run's block positions take the index value's low bits.
inline constexpr int kOffsetBits = 22;
inline constexpr uint32_t kMaxRunBlocks = (uint32_t{1} << kOffsetBits) - 1;

// Index value: slot (32 bits) | shard (10 bits) | block offset in the run (22 bits).
inline uint64_t MakeRef(uint32_t shard, uint32_t slot, uint32_t offset) {
  return (uint64_t{slot} << 32) | (uint64_t{shard} << kOffsetBits) | offset;
}
inline uint32_t RefSlot(uint64_t ref) { return static_cast<uint32_t>(ref >> 32); }
inline uint32_t RefShard(uint64_t ref) {
  return static_cast<uint32_t>(ref >> kOffsetBits) & (kShardCount - 1);
}
inline uint32_t RefOffset(uint64_t ref) {
  return static_cast<uint32_t>(ref) & ((uint32_t{1} << kOffsetBits) - 1);
}

enum RunState : uint8_t { kFree = 0, kPending = 1, kComplete = 2 };
enum RunFlags : uint8_t { kPinned = 1, kReferenced = 2 };

struct Run {
  // Keys of blocks 0 .. blocks-2; null for a one-block run.
  std::unique_ptr<BlockKey[]> keys;
  // The object's name; the next free slot while the slot is free.
  BlockKey last_key = 0;
  uint64_t size = 0;
  // The writer's ObjectChecksum of the bytes (0: none, e.g. an object from an older log).
  uint64_t checksum = 0;
  // Complete: leased until. Pending: revoked at this time unless PutEnd comes first.
  Nanos deadline = 0;
  std::array<NodeId, kMaxReplicas> replicas{kNoNode, kNoNode, kNoNode, kNoNode};
  uint32_t blocks = 0;
  uint8_t state = kFree;
  uint8_t target = 0;
  uint8_t flags = 0;
  // Bit r: replicas[r] is being written by a repair and is not yet readable.
  uint8_t pending_mask = 0;

  BlockKey KeyAt(uint32_t i) const { return i + 1 == blocks ? last_key : keys[i]; }
  int ReplicaCount() const {
    int c = 0;
    while (c < kMaxReplicas && replicas[c] != kNoNode) ++c;
    return c;
  }
  int CompleteCount() const { return ReplicaCount() - __builtin_popcount(pending_mask); }
};
static_assert(sizeof(Run) == 64, "the per-object memory budget counts on a 64-byte record");

struct ObjectTable {
  absl::flat_hash_map<BlockKey, uint64_t> index;
  std::vector<Run> runs;
  uint32_t free_head = kNoSlot;
  uint32_t live = 0;  // runs in use
  uint32_t hand = 0;  // CLOCK hand over `runs`
  uint64_t key_bytes = 0;  // heap bytes of the runs' out-of-line key arrays

  uint32_t Allocate() {
    if (free_head != kNoSlot) {
      const uint32_t slot = free_head;
      free_head = static_cast<uint32_t>(runs[slot].last_key);
      ++live;
      return slot;
    }
    runs.emplace_back();
    ++live;
    return static_cast<uint32_t>(runs.size() - 1);
  }
  void Free(uint32_t slot) {
    Run& r = runs[slot];
    r = Run{};
    r.last_key = free_head;
    free_head = slot;
    --live;
  }
};

enum class NamespaceState : uint8_t { kLive, kDropping, kGone };

struct Namespace {
  std::string name;
  NamespaceState state = NamespaceState::kLive;
  // Latest lease granted on any of its objects: a dropped namespace keeps its bytes until then.
  Nanos lease_horizon = 0;
  uint64_t objects = 0;
  uint64_t blocks = 0;
  // Bytes its replicas take on each node, so a drop refunds the nodes without a scan.
  absl::flat_hash_map<NodeId, uint64_t> node_bytes;
  std::array<std::unique_ptr<ObjectTable>, kShardCount> tables;

  ObjectTable& Table(uint32_t shard) {
    if (!tables[shard]) tables[shard] = std::make_unique<ObjectTable>();
    return *tables[shard];
  }
};

// Heap bytes of a run's out-of-line key array: glibc's chunk for the request (8-byte header,
// 16-byte granularity, 32-byte minimum). The benchmark checks this accounting against RSS.
inline size_t KeyArrayBytes(uint32_t blocks) {
  if (blocks <= 1) return 0;
  const size_t want = size_t{blocks - 1} * sizeof(BlockKey) + 8;
  return std::max<size_t>(32, (want + 15) & ~size_t{15});
}

}  // namespace myriad::kvstore::internal
