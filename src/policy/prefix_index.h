#pragma once
// The cluster-wide prefix index: token-block key -> which holders (a serving unit's DP rank in
// one cache tier) hold that block. Fed by engines' cache events, it is always somewhat stale,
// so it is a hint: engines re-verify on load. Pure: time comes in as `now`.
//
// Holders and publishers are small integers the caller assigns. A publisher is one event
// stream (one engine process / DP rank) with its own sequence numbers; the caller knows which
// holders (tiers) a publisher speaks for and applies the verdict of ObserveSequence to them.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/block_hash.h"
#include "core/time.h"

namespace myriad::policy {

using HolderId = uint32_t;
using PublisherId = uint32_t;

struct PrefixIndexOptions {
  // Bound on (block, holder) entries; beyond it the least-recently-used blocks (by store or
  // match) are dropped with all their holders.
  size_t max_entries = size_t{64} << 20;
  // Index every Nth block of a chain (engine blocks of 16 tokens indexed every 32 blocks give
  // 512-token granularity). Positions are 0-based: block i is indexed when (i + 1) % N == 0.
  int index_every = 1;
  // Provisional entries (added when the router sends a request, before the engine's event)
  // expire after this long unless a real event confirms them.
  Nanos provisional_ttl = 2 * kSecond;
};

enum class SequenceVerdict {
  kInOrder,  // seq == last + 1 (or the first seen)
  kGap,      // seq > last + 1: events were lost; the publisher's holders become suspect
  kRestart,  // seq <= last: the publisher restarted; its holders must be cleared
};

struct PrefixMatch {
  HolderId holder = 0;
  // Blocks of the query (in the caller's block units, i.e. counting every block, indexed or
  // not) covered by the longest prefix this holder holds.
  uint32_t matched_blocks = 0;
  bool suspect = false;      // the holder's publisher lost events since this was learned
  bool provisional = false;  // at least part of the match rests on a provisional entry
};

class PrefixIndex {
 public:
  explicit PrefixIndex(PrefixIndexOptions options = {});

  // Tracks `publisher`'s sequence numbers; see SequenceVerdict.
  SequenceVerdict ObserveSequence(PublisherId publisher, uint64_t seq);

  // `blocks` are consecutive blocks of one chain whose first has 0-based position
  // `first_position`. A stored entry confirms (replaces) a provisional one and clears the
  // suspect mark of that (block, holder).
  void Stored(HolderId holder, uint32_t first_position, std::span<const BlockKey> blocks, Nanos now);
  void Removed(HolderId holder, std::span<const BlockKey> blocks);
  // Drops every entry of the holder (engine restart, AllBlocksCleared).
  void Cleared(HolderId holder);
  // Marks every entry the holder has now as suspect (after a gap); a later Stored of the same
  // block clears the mark.
  void MarkSuspect(HolderId holder);
  // The router's own prediction: the holder will hold these blocks once the request runs.
  void AddProvisional(HolderId holder, uint32_t first_position, std::span<const BlockKey> blocks,
                      Nanos now);

  // For every holder holding a prefix of `blocks` (a whole chain from position 0), the length
  // of its longest held prefix. Expired provisional entries do not count. Order of `out` is
  // by holder id. Matched blocks refresh their recency.
  void Match(std::span<const BlockKey> blocks, Nanos now, std::vector<PrefixMatch>* out);

  size_t entries() const;       // (block, holder) pairs, provisional included
  size_t blocks() const;        // distinct indexed blocks
  size_t memory_bytes() const;  // an honest estimate of heap bytes in use

  ~PrefixIndex();
  PrefixIndex(PrefixIndex&&) noexcept;
  PrefixIndex& operator=(PrefixIndex&&) noexcept;

 private:
  struct Impl;  // defined in prefix_index.cc, with the layout described there
  std::unique_ptr<Impl> impl_;
};

}  // namespace myriad::policy
