#pragma once
// The prompt cache of an engine like llama.cpp's llama-server: a fixed number of slots (its
// --parallel), each keeping the KV of the last sequence it processed and nothing else. A new
// request takes an idle slot chosen as llama-server's get_available_slot chooses
// (tools/server/server-context.cpp): the idle slot whose cached tokens share the longest
// common prefix with the prompt, as a fraction of the prompt, above --slot-prompt-similarity;
// failing that (or with the similarity 0), the least recently released idle slot, where
// `slot.t_last_used <= t_last` lets the last of equally old slots win (so of never-used slots,
// t_last_used -1, the highest id). The chosen slot's cache is reused up to the common prefix;
// the rest of it is overwritten.
// One rule for both of its users, over the key each has: the emulator's llama-server profile
// over token ids (SlotCache), the gateway's model of such an engine over block keys
// (EngineSlotCache, policy/engine_cache_model.h), so the two pick the same slot.
// Pure: the driver gives the time (any monotonic count) as `now`.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/block_hash.h"

namespace myriad::policy {

template <typename Key>
class BasicSlotCache {
 public:
  // `slots` >= 1; `similarity` in [0, 1], 0 turning the similarity rule off.
  BasicSlotCache(int slots, double similarity);

  // The slot a request for `prompt` takes now; none while every slot is processing (the
  // request then waits, deferred, as llama-server defers it).
  std::optional<int> Pick(std::span<const Key> prompt) const;
  // `slot` starts processing `prompt`: returns the keys of KV it reuses, the common prefix
  // with what it held, less one when that is the whole prompt (llama-server evaluates at least
  // the last token, for its logits).
  int64_t Start(int slot, std::span<const Key> prompt);
  // `slot` is idle again, its cache holding `keys` (the prompt and the output so far), released
  // at `now` (-1: as if never used).
  void Release(int slot, std::vector<Key> keys, int64_t now);
  // Marks `slot` busy or idle without changing what it holds: what an observer of the engine
  // (its GET /slots) saw, for a driver that does not run the requests itself.
  void SetProcessing(int slot, bool processing) { slots_[static_cast<size_t>(slot)].processing = processing; }
  // Drops every idle slot's cache (a processing slot keeps the KV it computes).
  void ClearIdle();

  int size() const { return static_cast<int>(slots_.size()); }
  bool processing(int slot) const { return slots_[static_cast<size_t>(slot)].processing; }
  int idle() const;
  const std::vector<Key>& tokens(int slot) const { return slots_[static_cast<size_t>(slot)].keys; }

  static size_t CommonPrefix(std::span<const Key> a, std::span<const Key> b);

 private:
  struct Slot {
    std::vector<Key> keys;
    bool processing = false;
    int64_t last_used = -1;  // llama-server's t_last_used: -1 until first released
  };
  std::vector<Slot> slots_;
  double similarity_;
};

extern template class BasicSlotCache<uint32_t>;
extern template class BasicSlotCache<BlockKey>;

using SlotCache = BasicSlotCache<uint32_t>;        // over token ids: the emulator
using EngineSlotCache = BasicSlotCache<BlockKey>;  // over block keys: the gateway's model

}  // namespace myriad::policy
