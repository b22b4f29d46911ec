#pragma once
// What an engine without KV events still holds, modelled from the requests the router sent it,
// so that the approximate prefix index (the router's own decisions, kept as provisional entries)
// forgets a prompt when the engine does, not only when a TTL runs out. Two kinds of cache:
//  - slots (llama.cpp's server): each of N slots keeps the last prompt it ran, at most n_ctx
//    tokens. A request takes the slot llama-server's get_available_slot would give it, by the
//    one rule the emulator's llama-server profile runs too (policy/slot_cache.h: the longest
//    prefix above `slot_similarity` of the prompt, else the least recently used), and the
//    prompt there before is gone. Which slots are busy, and what the engine served that the
//    gateway did not send, only its GET /slots says: ObserveSlots merges that in.
//  - paged (vLLM, SGLang): a pool of blocks evicted least recently used (by the same CLOCK as a
//    simulated engine's cache, policy/prefix_cache.h).
// A holder without a known capacity is not modelled: its entries live for the index's TTL.
// Blocks the model evicts are removed from the index for that holder. Pure: no I/O, no clock;
// the capacities come from the caller (the engine's own report, or configuration).
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/block_hash.h"
#include "core/time.h"
#include "policy/prefix_cache.h"
#include "policy/prefix_index.h"
#include "policy/slot_cache.h"

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

// One slot as llama-server's GET /slots reports it (server_slot::to_json): `id`,
// `is_processing`, `id_task` (the last task it took; absent until it took one) and, in
// versions that have it, `n_prompt_tokens` (what its cache holds).
struct SlotObservation {
  int id = 0;
  bool processing = false;
  std::optional<int64_t> task;
  std::optional<int64_t> tokens;
};

// Upper bound of the displaced prompts followed at once (ReturnProbability); 40 bytes each.
inline constexpr size_t kMaxFollowedDisplacements = 4096;
// The learned return probability is held within [0, this]: at 0.5 the router's displacement
// price sent new conversations to the few engines holding the shortest prompts
// (docs/PERFORMANCE.md, issue 25).
inline constexpr double kMaxReturnProbability = 0.4;

struct EngineCacheModelOptions {
  // llama-server's --slot-prompt-similarity (its default, common/common.h).
  double slot_similarity = 0.1;
  // A prompt displaced from a slot has returned when a later request (to any modelled engine)
  // extends it within this time; one that has not by then counts as gone (ReturnProbability).
  Nanos return_horizon = 30 * kSecond;
  // The prior's weight, in displacements: the learned probability starts at the router's
  // configured one and moves as displacements are decided.
  double return_prior_weight = 20;
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
  // Returns the slot the model put it in (slot caches), else -1.
  // `now` (any monotonic clock, the caller's) times the returns of displaced prompts.
  int Served(HolderId holder, std::span<const BlockKey> blocks, int64_t block_tokens, Nanos now = 0);

  // The engine's own account of its slots (llama-server's GET /slots), merged in: a slot the
  // engine reports empty is empty; a slot that took a task since the last observation while
  // the gateway sent it none was used behind the gateway's back, so what the model believed
  // it held is gone (its content is unknown: it matches nothing, and counts as just used);
  // busy slots are not picked until the next observation. A slot the gateway did send to
  // keeps the model's content (its id_task may not have changed yet: the request can still be
  // queued). Returns how many slots' content was dropped. Nothing for a holder that is not a
  // slot cache; ids outside its slots are ignored.
  int ObserveSlots(HolderId holder, std::span<const SlotObservation> slots);

  EngineCacheOccupancy Occupancy(HolderId holder) const;

  // Tokens of other prompts that sending these blocks to `holder` would displace: what the
  // slot it would take holds past the prompt's common prefix and that no other slot shares.
  // A conversation whose slot that is recomputes them on its next turn, which the router
  // prices (RouterOptions::evict_return_probability). No mutation; 0 for a holder that is not
  // a slot cache (a paged engine drops its least recently used blocks, not a whole prompt).
  int64_t DisplacedTokens(HolderId holder, std::span<const BlockKey> blocks) const;

  // How likely a prompt displaced from a slot comes back (a later request extends it within
  // options.return_horizon), learned from the slot engines' displacements: of those decided
  // (returned, or past the horizon), the share that returned, with `prior` weighing
  // options.return_prior_weight displacements; within [0, kMaxReturnProbability]. Unbiased by
  // displacements still open: a displacement counts only once its horizon has passed, so a
  // return seen early does not count before the non-returns of its time do.
  double ReturnProbability(double prior) const;
  struct ReturnStats {
    uint64_t decided = 0, returned = 0;
    size_t open = 0;  // followed, horizon not yet passed
  };
  ReturnStats returns() const { return {decided_, returned_, displaced_.size()}; }

 private:
  // What the model knows of a slot beyond its content: requests it sent there (a running
  // count) and, at the last observation, the engine's id_task and that count.
  struct SlotSeen {
    uint64_t served = 0;
    uint64_t served_at_task = 0;
    std::optional<int64_t> task;
  };
  struct Holder {
    EngineCacheCapacity capacity;
    std::optional<EngineSlotCache> slots;  // kSlots; LRU time is the model's request counter
    std::vector<SlotSeen> seen;            // kSlots, per slot
    PrefixCache paged;        // kPaged
    int64_t block_tokens = 1;  // of the last request: converts blocks to tokens
    uint64_t evictions = 0;
  };
  int ServeSlots(Holder& h, std::span<const BlockKey> blocks);
  // The slot ServeSlots would give `blocks` (already cut to a slot's context).
  static int PickSlot(const Holder& h, std::span<const BlockKey> blocks);
  // A prompt longer than a slot's context keeps only its head.
  static std::span<const BlockKey> FitSlot(const Holder& h, std::span<const BlockKey> blocks);
  // Empties `slot`'s modelled content (into evicted_), released at `now` (-1: never used).
  void DropSlot(Holder& h, int slot, int64_t now);
  // Adds to evicted_ the blocks of `before` that no slot holds now.
  void Evict(const Holder& h, const std::vector<BlockKey>& before);
  void ServePaged(HolderId id, Holder& h, std::span<const BlockKey> blocks);
  // Follows the prompt `lost` (its last block names it: chain keys) displaced at `now`.
  void FollowDisplaced(BlockKey lost, Nanos now);
  // A request for `blocks` came at `now`: marks displaced prompts it extends as returned, and
  // decides those past the horizon.
  void NoteReturns(std::span<const BlockKey> blocks, Nanos now);

  PrefixIndex* index_;
  EngineCacheModelOptions options_;
  absl::flat_hash_map<HolderId, Holder> holders_;
  uint64_t clock_ = 0;
  std::vector<BlockKey> evicted_;  // scratch
  // Displaced prompts followed, oldest first, and where each is by its last block's key.
  struct Displaced {
    BlockKey tip;
    Nanos at;
    bool returned;
  };
  std::deque<Displaced> displaced_;
  uint64_t displaced_seq_ = 0;  // sequence number of displaced_.front()
  absl::flat_hash_map<BlockKey, uint64_t> displaced_at_;  // tip -> sequence number
  uint64_t decided_ = 0, returned_ = 0;
};

}  // namespace myriad::policy
