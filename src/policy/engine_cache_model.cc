#include "policy/engine_cache_model.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"

namespace myriad::policy {

std::string_view EngineCacheKindName(EngineCacheKind kind) {
  switch (kind) {
    case EngineCacheKind::kSlots: return "slots";
    case EngineCacheKind::kPaged: return "paged";
    case EngineCacheKind::kUnknown: break;
  }
  return "unknown";
}

std::string_view CapacitySourceName(CapacitySource source) {
  switch (source) {
    case CapacitySource::kConfig: return "config";
    case CapacitySource::kEngine: return "engine";
    case CapacitySource::kDefault: break;
  }
  return "default";
}

EngineCacheModel::EngineCacheModel(PrefixIndex* index, EngineCacheModelOptions options)
    : index_(index), options_(options) {}

void EngineCacheModel::SetCapacity(HolderId holder, EngineCacheCapacity capacity) {
  capacity.slots = std::clamp(capacity.slots, 0, kMaxEngineSlots);
  capacity.tokens = std::clamp<int64_t>(capacity.tokens, 0, kMaxEngineCacheTokens);
  if (capacity.kind == EngineCacheKind::kSlots && capacity.slots == 0) capacity.kind = EngineCacheKind::kUnknown;
  if (capacity.kind == EngineCacheKind::kPaged && capacity.tokens == 0) capacity.kind = EngineCacheKind::kUnknown;
  auto it = holders_.find(holder);
  if (it != holders_.end()) {
    EngineCacheCapacity& old = it->second.capacity;
    const bool same_shape = old.kind == capacity.kind && old.slots == capacity.slots && old.tokens == capacity.tokens;
    if (same_shape) {
      old.source = capacity.source;
      return;
    }
    holders_.erase(it);
  }
  Holder& h = holders_[holder];
  h.capacity = capacity;
  if (capacity.kind == EngineCacheKind::kSlots) h.slots.resize(static_cast<size_t>(capacity.slots));
}

void EngineCacheModel::Forget(HolderId holder) { holders_.erase(holder); }

void EngineCacheModel::Served(HolderId holder, std::span<const BlockKey> blocks, int64_t block_tokens) {
  auto it = holders_.find(holder);
  if (it == holders_.end()) return;
  Holder& h = it->second;
  h.block_tokens = std::max<int64_t>(1, block_tokens);
  ++clock_;
  evicted_.clear();
  switch (h.capacity.kind) {
    case EngineCacheKind::kSlots: ServeSlots(holder, h, blocks); break;
    case EngineCacheKind::kPaged: ServePaged(holder, h, blocks); break;
    case EngineCacheKind::kUnknown: return;
  }
  if (evicted_.empty()) return;
  h.evictions += evicted_.size();
  index_->Removed(holder, evicted_);
}

void EngineCacheModel::ServeSlots(HolderId, Holder& h, std::span<const BlockKey> blocks) {
  // A prompt longer than a slot's context does not stay whole; its head is what a later prompt
  // can reuse.
  if (h.capacity.tokens > 0) {
    blocks = blocks.first(std::min<size_t>(blocks.size(), static_cast<size_t>(h.capacity.tokens / h.block_tokens)));
  }
  // The most similar slot (common prefix over the prompt's length, strictly above the
  // threshold), else the least recently used; a slot never used counts as the oldest.
  size_t pick = h.slots.size();
  size_t best_common = 0;
  for (size_t i = 0; i < h.slots.size(); ++i) {
    const std::vector<BlockKey>& held = h.slots[i].blocks;
    if (held.empty()) continue;
    const size_t n = std::min(held.size(), blocks.size());
    const size_t common = static_cast<size_t>(
        std::mismatch(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(n), blocks.begin()).first - held.begin());
    if (common > best_common &&
        static_cast<double>(common) > options_.slot_similarity * static_cast<double>(blocks.size())) {
      best_common = common;
      pick = i;
    }
  }
  if (pick == h.slots.size()) {
    pick = 0;
    for (size_t i = 1; i < h.slots.size(); ++i) {
      if (h.slots[i].last_used < h.slots[pick].last_used) pick = i;
    }
  }
  Slot& slot = h.slots[pick];
  if (!slot.blocks.empty()) {
    // Chain keys name whole prefixes, so a block another slot (or the new prompt) holds stays.
    absl::flat_hash_set<BlockKey> kept(blocks.begin(), blocks.end());
    for (size_t i = 0; i < h.slots.size(); ++i) {
      if (i != pick) kept.insert(h.slots[i].blocks.begin(), h.slots[i].blocks.end());
    }
    for (BlockKey k : slot.blocks) {
      if (!kept.contains(k)) evicted_.push_back(k);
    }
  }
  slot.blocks.assign(blocks.begin(), blocks.end());
  slot.last_used = clock_;
}

void EngineCacheModel::ServePaged(HolderId, Holder& h, std::span<const BlockKey> blocks) {
  const auto capacity = static_cast<size_t>(std::max<int64_t>(1, h.capacity.tokens / h.block_tokens));
  h.paged.Insert(blocks, capacity, &evicted_);
}

EngineCacheOccupancy EngineCacheModel::Occupancy(HolderId holder) const {
  EngineCacheOccupancy out;
  auto it = holders_.find(holder);
  if (it == holders_.end()) return out;
  const Holder& h = it->second;
  out.capacity = h.capacity;
  out.evictions = h.evictions;
  if (h.capacity.kind == EngineCacheKind::kSlots) {
    for (const Slot& s : h.slots) {
      if (s.blocks.empty()) continue;
      ++out.used_slots;
      out.tokens += static_cast<int64_t>(s.blocks.size()) * h.block_tokens;
    }
  } else {
    out.tokens = static_cast<int64_t>(h.paged.size()) * h.block_tokens;
  }
  return out;
}

}  // namespace myriad::policy
