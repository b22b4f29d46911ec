#pragma once
// Carries the units' prefix-cache events to the router's prefix index the way engines'
// publishers do: in numbered batches, after a delay, some lost. The index learns of a loss
// from the next batch's sequence gap and marks that unit's entries suspect.
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "core/rng.h"
#include "policy/prefix_index.h"
#include "sim/event_queue.h"

namespace myriad::sim {

struct CacheEventStats {
  uint64_t batches = 0;
  uint64_t lost = 0;
  uint64_t gaps_seen = 0;
  uint64_t replayed = 0;      // lost batches recovered from the publisher's replay buffer
  uint64_t unrecoverable = 0;  // gaps the buffer no longer covered: the unit went suspect
  uint64_t blocks_stored = 0;
  uint64_t blocks_removed = 0;
};

class CacheEventBus {
 public:
  // With `replay`, a subscriber that sees a gap asks the publisher's replay socket for the
  // missing batches, as vLLM's replay endpoint serves them from its last `buffer_batches`
  // (vLLM's default buffer_steps is 10,000); only what the buffer no longer holds marks the
  // unit suspect.
  CacheEventBus(EventQueue& events, policy::PrefixIndex& index, Nanos delay, double loss, Rng rng,
                bool replay = false, size_t buffer_batches = 10000);

  void Stored(int unit, uint32_t first_position, std::span<const BlockKey> blocks);
  void Removed(int unit, std::span<const BlockKey> blocks);

  const CacheEventStats& stats() const { return stats_; }

 private:
  struct Batch {
    uint64_t seq;
    bool stored;
    uint32_t first_position;
    std::vector<BlockKey> keys;
  };
  void Publish(int unit, bool stored, uint32_t first_position, std::span<const BlockKey> blocks);
  void Deliver(int unit, const Batch& batch);
  void Apply(int unit, const Batch& batch);

  EventQueue& events_;
  policy::PrefixIndex& index_;
  Nanos delay_;
  double loss_;
  Rng rng_;
  bool replay_;
  size_t buffer_batches_;
  std::vector<uint64_t> next_seq_;             // per unit: the publisher's next sequence
  std::vector<int64_t> delivered_;             // per unit: last sequence the index saw, -1 none
  std::vector<std::deque<Batch>> buffers_;     // per unit: the publisher's replay buffer
  CacheEventStats stats_;
};

}  // namespace myriad::sim
