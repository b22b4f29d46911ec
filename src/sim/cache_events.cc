#include "sim/cache_events.h"

namespace myriad::sim {

CacheEventBus::CacheEventBus(EventQueue& events, policy::PrefixIndex& index, Nanos delay, double loss, Rng rng)
    : events_(events), index_(index), delay_(delay), loss_(loss), rng_(rng) {}

void CacheEventBus::Stored(int unit, uint32_t first_position, std::span<const BlockKey> blocks) {
  Publish(unit, true, first_position, blocks);
}

void CacheEventBus::Removed(int unit, std::span<const BlockKey> blocks) { Publish(unit, false, 0, blocks); }

void CacheEventBus::Publish(int unit, bool stored, uint32_t first_position, std::span<const BlockKey> blocks) {
  const auto u = static_cast<size_t>(unit);
  if (next_seq_.size() <= u) next_seq_.resize(u + 1, 0);
  const uint64_t seq = next_seq_[u]++;
  ++stats_.batches;
  if (loss_ > 0 && rng_.Bernoulli(loss_)) {
    ++stats_.lost;
    return;
  }
  events_.After(delay_, [this, unit, seq, stored, first_position,
                         keys = std::vector<BlockKey>(blocks.begin(), blocks.end())] {
    const auto holder = static_cast<policy::HolderId>(unit);
    if (index_.ObserveSequence(static_cast<policy::PublisherId>(unit), seq) == policy::SequenceVerdict::kGap) {
      ++stats_.gaps_seen;
      index_.MarkSuspect(holder);
    }
    if (stored) {
      stats_.blocks_stored += keys.size();
      index_.Stored(holder, first_position, keys, events_.now());
    } else {
      stats_.blocks_removed += keys.size();
      index_.Removed(holder, keys);
    }
  });
}

}  // namespace myriad::sim
