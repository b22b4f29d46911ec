#pragma once
// What an engine without KV events still holds, modelled from the requests the router sent it,
// so that the approximate prefix index (the router's own decisions, kept as provisional entries)
// forgets a prompt when the engine does, not only when a TTL runs out. Two kinds of cache:
//  - slots (llama.cpp's server): each of N slots keeps the last prompt it ran, at most n_ctx
//    tokens. A request takes the slot whose cached prompt shares the longest prefix with it, if
//    that prefix is more than `slot_similarity` of the request's prompt, else the least
//    recently used slot (llama-server's get_available_slot, tools/server/server-context.cpp;
//    the emulator's policy/slot_cache.h follows the same rule over token ids), and the prompt
//    there before is gone. Which slots are busy the gateway does not know: all count as idle.
//  - paged (vLLM, SGLang): a pool of blocks evicted least recently used (by the same CLOCK as a
//    simulated engine's cache, policy/prefix_cache.h).
// A holder without a known capacity is not modelled: its entries live for the index's TTL.
// Blocks the model evicts are removed from the index for that holder. Pure: no I/O, no clock;
// the capacities come from the caller (the engine's own report, or configuration).
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/block_hash.h"
#include "policy/prefix_cache.h"
#include "policy/prefix_index.h"

namespace myriad::policy {

enum class EngineCacheKind { kUnknown, kSlots, kPaged };
enum class CapacitySource { kDefault, kConfig, kEngine };
std::string_view EngineCacheKindName(EngineCacheKind kind);
std::string_view CapacitySourceName(CapacitySource source);

// Upper bounds of what a capacity may say (configuration and engine reports alike).
inline constexpr int kMaxEngineSlots = 1024;
inline constexpr int64_t kMaxEngineCacheTokens = int64_t{1} << 40;

struct EngineCacheCapacity {
  EngineCacheKind kind = EngineCacheKind::kUnknown;
  int slots = 0;         // kSlots: how many
  // kSlots: tokens one slot holds (n_ctx per slot; 0: unbounded); kPaged: tokens of the pool.
  int64_t tokens = 0;
  CapacitySource source = CapacitySource::kDefault;

  bool operator==(const EngineCacheCapacity&) const = default;
};

struct EngineCacheOccupancy {
  EngineCacheCapacity capacity;
  int64_t tokens = 0;      // modelled tokens held (blocks x block tokens)
  int used_slots = 0;      // kSlots: slots holding a prompt
  uint64_t evictions = 0;  // blocks the model dropped from the index since the capacity was set
};

struct EngineCacheModelOptions {
  // llama-server's --slot-prompt-similarity (its default, common/common.h).
  double slot_similarity = 0.1;
};

class EngineCacheModel {
 public:
  // `index` (required, outliving the model) is where evicted blocks are removed.
  explicit EngineCacheModel(PrefixIndex* index, EngineCacheModelOptions options = {});

  // Sets (or changes) the holder's cache. A change of kind or shape restarts the model of that
  // holder empty (its index entries stay until their TTL: the engine may still hold them).
  void SetCapacity(HolderId holder, EngineCacheCapacity capacity);
  // The holder is gone (backend removed, engine restarted): its model is dropped.
  void Forget(HolderId holder);

  // A request whose prompt has these blocks (a chain from position 0, `block_tokens` tokens
  // each) was sent to `holder`: the engine now holds them, and what it evicted for them leaves
  // the index. Nothing happens for a holder of unknown capacity.
  void Served(HolderId holder, std::span<const BlockKey> blocks, int64_t block_tokens);

  EngineCacheOccupancy Occupancy(HolderId holder) const;

 private:
  struct Slot {
    std::vector<BlockKey> blocks;
    uint64_t last_used = 0;  // the model's own request counter: LRU order
  };
  struct Holder {
    EngineCacheCapacity capacity;
    std::vector<Slot> slots;  // kSlots
    PrefixCache paged;        // kPaged
    int64_t block_tokens = 1;  // of the last request: converts blocks to tokens
    uint64_t evictions = 0;
  };
  void ServeSlots(HolderId id, Holder& h, std::span<const BlockKey> blocks);
  void ServePaged(HolderId id, Holder& h, std::span<const BlockKey> blocks);

  PrefixIndex* index_;
  EngineCacheModelOptions options_;
  absl::flat_hash_map<HolderId, Holder> holders_;
  uint64_t clock_ = 0;
  std::vector<BlockKey> evicted_;  // scratch
};

}  // namespace myriad::policy
