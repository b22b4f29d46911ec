#include "policy/kv_event_indexer.h"

#include <algorithm>
#include <deque>
#include <string_view>
#include <variant>

#include <fmt/format.h>

#include "core/block_hash.h"

namespace myriad::policy {
namespace {

constexpr std::string_view kDefaultMedium = "GPU";  // vLLM's MEDIUM_GPU

}  // namespace

// What a holder's engine hashes stand for. Forgetting is oldest-first by insertion: `order_`
// records (hash, stamp) and an entry is dropped only when its stamp still matches, so a hash
// removed and stored again is not forgotten by its old record.
struct KvEventIndexer::Holder {
  struct Entry {
    BlockKey key;
    uint32_t position;
    uint64_t stamp;
  };

  HolderId id = 0;
  std::string medium;
  absl::flat_hash_map<EngineBlockHash, Entry> hashes;
  std::deque<std::pair<EngineBlockHash, uint64_t>> order;
  uint64_t next_stamp = 0;

  const Entry* Find(EngineBlockHash h) const {
    const auto it = hashes.find(h);
    return it == hashes.end() ? nullptr : &it->second;
  }

  void Remember(EngineBlockHash h, BlockKey key, uint32_t position, size_t bound) {
    const uint64_t stamp = next_stamp++;
    hashes.insert_or_assign(h, Entry{key, position, stamp});
    order.emplace_back(h, stamp);
    while (hashes.size() > bound && !order.empty()) PopOldest();
    // Records of removed or re-stored hashes stay in `order` until they reach its front;
    // compacting keeps it within twice the live entries.
    if (order.size() > 2 * hashes.size() + 1024) {
      std::deque<std::pair<EngineBlockHash, uint64_t>> live;
      for (const auto& rec : order) {
        const Entry* e = Find(rec.first);
        if (e != nullptr && e->stamp == rec.second) live.push_back(rec);
      }
      order.swap(live);
    }
  }

  void Clear() {
    hashes.clear();
    order.clear();
  }

 private:
  void PopOldest() {
    const auto [h, stamp] = order.front();
    order.pop_front();
    const auto it = hashes.find(h);
    if (it != hashes.end() && it->second.stamp == stamp) hashes.erase(it);
  }
};

struct KvEventIndexer::Publisher {
  std::vector<Holder> holders;
  std::optional<HolderId> reach;
  // Blocks removed lately from any medium (KvEventIndexerOptions::recently_removed_per_publisher).
  Holder recent;

  Holder* ForMedium(const std::optional<std::string>& medium) {
    const std::string_view m = medium ? std::string_view(*medium) : kDefaultMedium;
    for (Holder& h : holders) {
      if (h.medium == m) return &h;
    }
    return nullptr;
  }
};

KvEventIndexer::KvEventIndexer(PrefixIndex* index, KvEventIndexerOptions options)
    : index_(*index), options_(options) {
  options_.recently_removed_per_publisher =
      std::min(options_.recently_removed_per_publisher, kMaxRecentlyRemoved);
}

KvEventIndexer::~KvEventIndexer() = default;

absl::Status KvEventIndexer::AddPublisher(PublisherId publisher,
                                          KvPublisherHolders holders) {
  if (holders.media.empty()) {
    return absl::InvalidArgumentError(fmt::format("publisher {}: no medium", publisher));
  }
  if (publishers_.contains(publisher)) {
    return absl::AlreadyExistsError(fmt::format("publisher {}: already added", publisher));
  }
  for (const auto& [medium, holder] : holders.media) {
    if (holders.reach && holder == *holders.reach) {
      return absl::InvalidArgumentError(
          fmt::format("publisher {}: holder {} is both medium {}'s and the reach", publisher, holder, medium));
    }
  }
  auto p = std::make_unique<Publisher>();
  p->reach = holders.reach;
  for (auto& [medium, holder] : holders.media) {
    Holder h;
    h.id = holder;
    h.medium = std::move(medium);
    p->holders.push_back(std::move(h));
  }
  publishers_.emplace(publisher, std::move(p));
  return absl::OkStatus();
}

size_t KvEventIndexer::remembered_hashes(PublisherId publisher) const {
  const auto it = publishers_.find(publisher);
  if (it == publishers_.end()) return 0;
  size_t n = 0;
  for (const Holder& h : it->second->holders) n += h.hashes.size();
  return n;
}

void KvEventIndexer::ClearAll(Publisher& p) {
  for (Holder& h : p.holders) {
    if (h.id != kUnindexedHolder) index_.Cleared(h.id);
    h.Clear();
  }
  p.recent.Clear();
  if (p.reach) index_.Cleared(*p.reach);
}

void KvEventIndexer::MarkAllSuspect(Publisher& p) {
  for (Holder& h : p.holders) {
    if (h.id != kUnindexedHolder) index_.MarkSuspect(h.id);
  }
  if (p.reach) index_.MarkSuspect(*p.reach);
}

bool KvEventIndexer::HeldElsewhere(const Publisher& p, const Holder* except, EngineBlockHash h) {
  for (const Holder& other : p.holders) {
    if (&other != except && other.Find(h) != nullptr) return true;
  }
  return false;
}

absl::Status KvEventIndexer::Apply(PublisherId publisher, uint64_t seq,
                                   const absl::StatusOr<KvEventBatch>& batch, Nanos now) {
  const auto it = publishers_.find(publisher);
  if (it == publishers_.end()) {
    return absl::NotFoundError(fmt::format("publisher {}: unknown", publisher));
  }
  Publisher& p = *it->second;
  switch (index_.ObserveSequence(publisher, seq)) {
    case SequenceVerdict::kInOrder:
      break;
    case SequenceVerdict::kGap:
      ++stats_.gaps;
      MarkAllSuspect(p);
      break;
    case SequenceVerdict::kRestart:
      ++stats_.restarts;
      ClearAll(p);
      break;
  }
  if (!batch.ok()) {
    // The batch is lost as surely as one never received.
    ++stats_.decode_errors;
    MarkAllSuspect(p);
    return batch.status();
  }
  ++stats_.batches;  // applied: a batch lost to decoding is counted in decode_errors alone
  stats_.unknown_event_tags += batch->unknown_events;
  absl::Status first_error;
  for (size_t i = 0; i < batch->events.size(); ++i) {
    absl::Status s = std::visit(
        [&](const auto& e) -> absl::Status {
          using T = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<T, BlockStored>) {
            return ApplyStored(p, e, i, now);
          } else if constexpr (std::is_same_v<T, BlockRemoved>) {
            return ApplyRemoved(p, e);
          } else {
            // AllBlocksCleared names no medium: every tier of the engine is dropped, since a
            // stale entry misroutes while a missing one only costs a cache hit.
            ++stats_.clears;
            ClearAll(p);
            return absl::OkStatus();
          }
        },
        batch->events[i]);
    if (first_error.ok()) first_error = std::move(s);
  }
  return first_error;
}

KvEventIndexer::Holder* KvEventIndexer::Target(Publisher& p, std::optional<int64_t> group_idx,
                                               const std::optional<std::string>& medium) {
  if (group_idx.value_or(0) != options_.group_idx) {
    ++stats_.other_group;
    return nullptr;
  }
  Holder* holder = p.ForMedium(medium);
  if (holder == nullptr) ++stats_.unknown_medium;
  return holder;
}

absl::Status KvEventIndexer::ApplyStored(Publisher& p, const BlockStored& e, size_t i,
                                         Nanos now) {
  Holder* holder = Target(p, e.group_idx, e.medium);
  if (holder == nullptr) return absl::OkStatus();
  if (e.block_size != options_.block_size) {
    ++stats_.invalid_events;
    return absl::InvalidArgumentError(
        fmt::format("events[{}].block_size: {} differs from the indexer's block size {}", i,
                    e.block_size, options_.block_size));
  }
  const size_t bs = options_.block_size;
  if (e.token_ids.size() != e.block_hashes.size() * bs) {
    ++stats_.invalid_events;
    return absl::InvalidArgumentError(
        fmt::format("events[{}].token_ids: {} tokens for {} blocks of {}", i, e.token_ids.size(),
                    e.block_hashes.size(), bs));
  }
  BlockKey parent = kRootBlockKey;
  uint32_t position = 0;
  if (e.parent_block_hash) {
    // The parent may sit in another tier of the same engine (a CPU block continuing a GPU one).
    const Holder::Entry* found = holder->Find(*e.parent_block_hash);
    for (size_t h = 0; found == nullptr && h < p.holders.size(); ++h) {
      found = p.holders[h].Find(*e.parent_block_hash);
    }
    if (found == nullptr) {
      // Or it has just left: the tier writing this block published HBM's removal of the
      // parent before this block's write landed.
      found = p.recent.Find(*e.parent_block_hash);
      if (found != nullptr) ++stats_.recalled_parents;
    }
    if (found == nullptr) {
      // Without the parent neither the chain's keys nor its position are known: placing the
      // blocks anywhere would index a prefix no request can have.
      ++stats_.orphans;
      return absl::OkStatus();
    }
    parent = found->key;
    position = found->position + 1;
  }
  const uint64_t extra = ExtraKeyOf(e.lora_name.value_or(std::string()));
  std::vector<BlockKey> keys;
  keys.reserve(e.block_hashes.size());
  const std::span<const uint32_t> tokens(e.token_ids);
  for (size_t b = 0; b < e.block_hashes.size(); ++b) {
    // Extra keys (a request's cache salt on its first block, multimodal inputs) seed the block
    // as they seed the engine's hash; requests key a salted first block the same way.
    uint64_t seed = extra;
    if (e.extra_keys && (*e.extra_keys)[b]) seed ^= DigestExtraKeys(*(*e.extra_keys)[b]);
    parent = HashTokenBlock(parent, tokens.subspan(b * bs, bs), seed);
    keys.push_back(parent);
    holder->Remember(e.block_hashes[b], parent, position + static_cast<uint32_t>(b),
                     options_.max_hashes_per_holder);
  }
  if (holder->id != kUnindexedHolder) index_.Stored(holder->id, position, keys, now);
  if (p.reach) index_.Stored(*p.reach, position, keys, now);
  stats_.blocks_stored += keys.size();
  return absl::OkStatus();
}

absl::Status KvEventIndexer::ApplyRemoved(Publisher& p, const BlockRemoved& e) {
  Holder* holder = Target(p, e.group_idx, e.medium);
  if (holder == nullptr) return absl::OkStatus();
  std::vector<BlockKey> keys, unreached;
  keys.reserve(e.block_hashes.size());
  for (EngineBlockHash h : e.block_hashes) {
    const auto it = holder->hashes.find(h);
    if (it == holder->hashes.end()) {
      ++stats_.unknown_removed;
      continue;
    }
    keys.push_back(it->second.key);
    if (options_.recently_removed_per_publisher > 0) {
      p.recent.Remember(h, it->second.key, it->second.position, options_.recently_removed_per_publisher);
    }
    holder->hashes.erase(it);
    // Evicted from HBM but still in the store tier (or the reverse): still within reach.
    if (p.reach && !HeldElsewhere(p, holder, h)) unreached.push_back(keys.back());
  }
  if (holder->id != kUnindexedHolder) index_.Removed(holder->id, keys);
  if (p.reach) index_.Removed(*p.reach, unreached);
  stats_.blocks_removed += keys.size();
  return absl::OkStatus();
}

}  // namespace myriad::policy
