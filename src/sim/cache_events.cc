#include "sim/cache_events.h"

namespace myriad::sim {

CacheEventBus::CacheEventBus(EventQueue& events, policy::PrefixIndex& index, Nanos delay, double loss, Rng rng,
                             bool replay, size_t buffer_batches)
    : events_(events), index_(index), delay_(delay), loss_(loss), rng_(rng), replay_(replay),
      buffer_batches_(buffer_batches) {}

void CacheEventBus::Stored(int unit, uint32_t first_position, std::span<const BlockKey> blocks) {
  Publish(unit, true, first_position, blocks);
}

void CacheEventBus::Removed(int unit, std::span<const BlockKey> blocks) { Publish(unit, false, 0, blocks); }

void CacheEventBus::Publish(int unit, bool stored, uint32_t first_position, std::span<const BlockKey> blocks) {
  const auto u = static_cast<size_t>(unit);
  if (next_seq_.size() <= u) {
    next_seq_.resize(u + 1, 0);
    delivered_.resize(u + 1, -1);
    buffers_.resize(u + 1);
  }
  Batch batch{next_seq_[u]++, stored, first_position, std::vector<BlockKey>(blocks.begin(), blocks.end())};
  ++stats_.batches;
  if (replay_) {
    buffers_[u].push_back(batch);
    if (buffers_[u].size() > buffer_batches_) buffers_[u].pop_front();
  }
  if (loss_ > 0 && rng_.Bernoulli(loss_)) {
    ++stats_.lost;
    return;
  }
  events_.After(delay_, [this, unit, b = std::move(batch)] { Deliver(unit, b); });
}

void CacheEventBus::Deliver(int unit, const Batch& batch) {
  const auto u = static_cast<size_t>(unit);
  const auto holder = static_cast<policy::HolderId>(unit);
  if (index_.ObserveSequence(static_cast<policy::PublisherId>(unit), batch.seq) == policy::SequenceVerdict::kGap) {
    ++stats_.gaps_seen;
    // Ask for [last seen + 1, this one) before applying this batch, so order is kept.
    bool recovered = replay_;
    for (int64_t want = delivered_[u] + 1; recovered && want < static_cast<int64_t>(batch.seq); ++want) {
      const auto& buf = buffers_[u];
      if (buf.empty() || static_cast<int64_t>(buf.front().seq) > want) {
        recovered = false;
        break;
      }
      const Batch& missing = buf[static_cast<size_t>(want - static_cast<int64_t>(buf.front().seq))];
      Apply(unit, missing);
      ++stats_.replayed;
    }
    if (!recovered) {
      ++stats_.unrecoverable;
      index_.MarkSuspect(holder);
    }
  }
  delivered_[u] = static_cast<int64_t>(batch.seq);
  Apply(unit, batch);
}

void CacheEventBus::Apply(int unit, const Batch& batch) {
  const auto holder = static_cast<policy::HolderId>(unit);
  if (batch.stored) {
    stats_.blocks_stored += batch.keys.size();
    index_.Stored(holder, batch.first_position, batch.keys, events_.now());
  } else {
    stats_.blocks_removed += batch.keys.size();
    index_.Removed(holder, batch.keys);
  }
}

}  // namespace myriad::sim
