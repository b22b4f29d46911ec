#pragma once
// The prompt cache of an engine like llama.cpp's llama-server: a fixed number of slots (its
// --parallel), each keeping the KV of the last sequence it processed and nothing else. A new
// request takes an idle slot chosen as llama-server's get_available_slot chooses
// (tools/server/server-context.cpp): the idle slot whose cached tokens share the longest
// common prefix with the prompt, as a fraction of the prompt, above --slot-prompt-similarity;
// failing that (or with the similarity 0), the least recently released idle slot. The chosen
// slot's cache is reused up to the common prefix; the rest of it is overwritten.
// Pure: the engine emulator's driver gives the time (any monotonic count) as `now`.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace myriad::policy {

class SlotCache {
 public:
  // `slots` >= 1; `similarity` in [0, 1], 0 turning the similarity rule off.
  SlotCache(int slots, double similarity);

  // The slot a request for `prompt` takes now; none while every slot is processing (the
  // request then waits, deferred, as llama-server defers it).
  std::optional<int> Pick(std::span<const uint32_t> prompt) const;
  // `slot` starts processing `prompt`: returns the tokens of KV it reuses, the common prefix
  // with what it held, less one when that is the whole prompt (llama-server evaluates at least
  // the last token, for its logits).
  int64_t Start(int slot, std::span<const uint32_t> prompt);
  // `slot` is idle again, its cache holding `tokens` (the prompt and the output so far).
  void Release(int slot, std::vector<uint32_t> tokens, int64_t now);
  // Drops every idle slot's cache (a processing slot keeps the KV it computes).
  void ClearIdle();

  int size() const { return static_cast<int>(slots_.size()); }
  bool processing(int slot) const { return slots_[static_cast<size_t>(slot)].processing; }
  int idle() const;
  const std::vector<uint32_t>& tokens(int slot) const { return slots_[static_cast<size_t>(slot)].tokens; }

  static size_t CommonPrefix(std::span<const uint32_t> a, std::span<const uint32_t> b);

 private:
  struct Slot {
    std::vector<uint32_t> tokens;
    bool processing = false;
    int64_t last_used = -1;  // llama-server's t_last_used: -1 until first released
  };
  std::vector<Slot> slots_;
  double similarity_;
};

}  // namespace myriad::policy
