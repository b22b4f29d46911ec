#pragma once
// Feeds vLLM's KV-cache events into the prefix index. Engines name blocks by their own hash
// (sha256 over a pickle: not reproducible here), Myriad by its token-block chain
// (core/block_hash.h), so on BlockStored the indexer computes our keys from the event's tokens
// and remembers engine hash -> (key, position), per holder; BlockRemoved, which carries only
// engine hashes, is applied through that map, and a BlockStored whose parent is a known engine
// hash continues that chain at the right position.
//
// Pure: no threads, no I/O, time passed in. Its input is plain data (core/kv_events.h): the
// gateway feeds it what net's subscriber decodes (net/kv_event_subscriber.h), on one thread or
// under the caller's lock. The simulator needs no engine-hash mapping (its units report
// Myriad's keys), so its event bus (sim/cache_events.h) applies them to the index directly.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/kv_events.h"
#include "core/time.h"
#include "policy/prefix_index.h"

namespace myriad::policy {

struct KvEventIndexerOptions {
  // Tokens per block of Myriad's keys. An event of another block size is refused (counted in
  // invalid_events): cutting it into our blocks would need the tokens of the blocks before it
  // whenever the sizes do not align, and the engine's block size is a deployment constant, so
  // a mismatch is a configuration error to surface, not to paper over.
  uint32_t block_size = 16;
  // Per holder, the most engine hashes remembered; the oldest are forgotten first. A block whose
  // hash was forgotten cannot be removed from the index by its BlockRemoved (the index's own LRU
  // bound drops it later) and a child of it becomes an orphan.
  size_t max_hashes_per_holder = size_t{1} << 20;
  // Per publisher, the most removed engine hashes remembered (with their key and position),
  // about 50 bytes each; at most kMaxRecentlyRemoved. An offloading tier publishes a block's
  // BlockStored (medium "CPU") when its write lands, after HBM's BlockRemoved of its parent
  // when HBM evicted the parent first or in the same sweep: the child still chains to the
  // parent that just left instead of being dropped as an orphan. Sized to cover the tier's
  // queue of writes (emu/kv_store_tier.h: 4,096 blocks by default); 0 remembers none.
  size_t recently_removed_per_publisher = 8192;
  // Hybrid models publish one stream of blocks per KV-cache group; only this group (by default
  // the first, vLLM's full-attention group) is indexed. A nil group_idx counts as 0.
  int64_t group_idx = 0;
};

inline constexpr size_t kMaxRecentlyRemoved = size_t{1} << 20;

// A medium whose blocks are tracked (their removals, the publisher's reach) without a holder
// of their own in the index.
inline constexpr HolderId kUnindexedHolder = ~HolderId{0};

// The holders one publisher (one engine process / DP rank) speaks for, one per medium.
struct KvPublisherHolders {
  // medium as vLLM names it ("GPU", "CPU", ...) -> holder. Events with a nil medium (older
  // vLLM) belong to "GPU", vLLM's MEDIUM_GPU.
  std::vector<std::pair<std::string, HolderId>> media;
  // Optional: a holder of every block the publisher has in any of its media. An engine whose
  // HBM holds a prompt's first blocks and whose store tier (vLLM's CPU offload, an engine on
  // Myriad's KV store: medium "CPU") holds the next can serve the whole run without
  // recomputing, which no single medium's holder shows: the index matches a holder's chain
  // from the first block. A block leaves it when no medium holds it any more.
  std::optional<HolderId> reach{};
};

struct KvEventIndexerStats {
  uint64_t batches = 0;            // decoded and applied (their events may still be skipped)
  uint64_t blocks_stored = 0;
  uint64_t blocks_removed = 0;
  uint64_t clears = 0;             // AllBlocksCleared events
  uint64_t orphans = 0;            // BlockStored events whose parent hash is unknown: skipped
  uint64_t recalled_parents = 0;   // BlockStored events chained to a recently removed parent
  uint64_t unknown_removed = 0;    // removed hashes never seen stored, or forgotten
  uint64_t unknown_medium = 0;     // events for a medium with no holder: skipped
  uint64_t other_group = 0;        // events of another KV-cache group: skipped
  uint64_t invalid_events = 0;     // wrong block size or token count: skipped
  uint64_t unknown_event_tags = 0; // events the decoder did not know
  uint64_t decode_errors = 0;      // batches lost to decoding; the holders become suspect
  uint64_t gaps = 0;               // sequence gaps left after replay; the holders become suspect
  uint64_t restarts = 0;           // sequence went backwards; the holders were cleared
};

class KvEventIndexer {
 public:
  // `index` must outlive the indexer.
  explicit KvEventIndexer(PrefixIndex* index, KvEventIndexerOptions options = {});
  ~KvEventIndexer();
  KvEventIndexer(const KvEventIndexer&) = delete;
  KvEventIndexer& operator=(const KvEventIndexer&) = delete;

  // Declares a publisher before its first batch. Fails when it is already known or names no
  // medium.
  absl::Status AddPublisher(PublisherId publisher, KvPublisherHolders holders);

  // Applies the publisher's batch number `seq` (or the decoding error in its place): the
  // sequence verdict first (a gap marks the publisher's holders suspect, a restart clears
  // them), then each event in order. Events that cannot be applied are skipped and counted;
  // the first of them, or the decoding error, is returned, naming the event and the field.
  // NotFound for an unknown publisher.
  absl::Status Apply(PublisherId publisher, uint64_t seq,
                     const absl::StatusOr<KvEventBatch>& batch, Nanos now);

  const KvEventIndexerStats& stats() const { return stats_; }
  // Engine hashes remembered for `publisher`, all its holders together.
  size_t remembered_hashes(PublisherId publisher) const;

 private:
  struct Publisher;
  struct Holder;
  // The holder an event of this group and medium applies to; null (counted) when it is skipped.
  Holder* Target(Publisher& p, std::optional<int64_t> group_idx, const std::optional<std::string>& medium);
  absl::Status ApplyStored(Publisher& p, const BlockStored& e, size_t i, Nanos now);
  absl::Status ApplyRemoved(Publisher& p, const BlockRemoved& e);
  void ClearAll(Publisher& p);
  // Whether a medium of `p` other than `except` still holds the engine hash.
  static bool HeldElsewhere(const Publisher& p, const Holder* except, EngineBlockHash h);
  void MarkAllSuspect(Publisher& p);

  PrefixIndex& index_;
  KvEventIndexerOptions options_;
  KvEventIndexerStats stats_;
  absl::flat_hash_map<PublisherId, std::unique_ptr<Publisher>> publishers_;
};

}  // namespace myriad::policy
