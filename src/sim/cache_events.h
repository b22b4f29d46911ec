#pragma once
// Carries the units' prefix-cache events to the router's prefix index the way engines'
// publishers do: in numbered batches, after a delay, some lost. The index learns of a loss
// from the next batch's sequence gap and marks that unit's entries suspect.
#include <cstdint>
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
  uint64_t blocks_stored = 0;
  uint64_t blocks_removed = 0;
};

class CacheEventBus {
 public:
  CacheEventBus(EventQueue& events, policy::PrefixIndex& index, Nanos delay, double loss, Rng rng);

  void Stored(int unit, uint32_t first_position, std::span<const BlockKey> blocks);
  void Removed(int unit, std::span<const BlockKey> blocks);

  const CacheEventStats& stats() const { return stats_; }

 private:
  void Publish(int unit, bool stored, uint32_t first_position, std::span<const BlockKey> blocks);

  EventQueue& events_;
  policy::PrefixIndex& index_;
  Nanos delay_;
  double loss_;
  Rng rng_;
  std::vector<uint64_t> next_seq_;  // per unit
  CacheEventStats stats_;
};

}  // namespace myriad::sim
