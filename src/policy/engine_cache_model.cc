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
  if (capacity.kind == EngineCacheKind::kSlots) {
    h.slots.emplace(capacity.slots, options_.slot_similarity);
    h.seen.resize(static_cast<size_t>(capacity.slots));
  }
}

void EngineCacheModel::Forget(HolderId holder) { holders_.erase(holder); }

int EngineCacheModel::Served(HolderId holder, std::span<const BlockKey> blocks, int64_t block_tokens, Nanos now) {
  NoteReturns(blocks, now);
  auto it = holders_.find(holder);
  if (it == holders_.end()) return -1;
  Holder& h = it->second;
  h.block_tokens = std::max<int64_t>(1, block_tokens);
  ++clock_;
  evicted_.clear();
  int slot = -1;
  switch (h.capacity.kind) {
    case EngineCacheKind::kSlots: {
      const std::vector<BlockKey>& taken = h.slots->tokens(PickSlot(h, FitSlot(h, blocks)));
      const BlockKey lost = taken.empty() ? 0 : taken.back();
      const bool displaces = !taken.empty() && DisplacedTokens(holder, blocks) > 0;
      slot = ServeSlots(h, blocks);
      if (displaces) FollowDisplaced(lost, now);
      break;
    }
    case EngineCacheKind::kPaged: ServePaged(holder, h, blocks); break;
    case EngineCacheKind::kUnknown: return -1;
  }
  if (!evicted_.empty()) {
    h.evictions += evicted_.size();
    index_->Removed(holder, evicted_);
  }
  return slot;
}

std::span<const BlockKey> EngineCacheModel::FitSlot(const Holder& h, std::span<const BlockKey> blocks) {
  // A prompt longer than a slot's context does not stay whole; its head is what a later prompt
  // can reuse.
  if (h.capacity.tokens > 0) {
    blocks = blocks.first(std::min<size_t>(blocks.size(), static_cast<size_t>(h.capacity.tokens / h.block_tokens)));
  }
  return blocks;
}

int EngineCacheModel::PickSlot(const Holder& h, std::span<const BlockKey> blocks) {
  if (std::optional<int> pick = h.slots->Pick(blocks)) return *pick;
  // Every slot was busy when last observed: the engine defers the request to whichever frees
  // first, which the gateway cannot know; by then the observation is stale, so decide as if
  // all were idle (the next observation corrects it).
  EngineSlotCache idle = *h.slots;
  for (int i = 0; i < idle.size(); ++i) idle.SetProcessing(i, false);
  return *idle.Pick(blocks);  // >= 1 slot, all idle
}

int64_t EngineCacheModel::DisplacedTokens(HolderId holder, std::span<const BlockKey> blocks) const {
  auto it = holders_.find(holder);
  if (it == holders_.end() || it->second.capacity.kind != EngineCacheKind::kSlots) return 0;
  const Holder& h = it->second;
  blocks = FitSlot(h, blocks);
  const int slot = PickSlot(h, blocks);
  const std::vector<BlockKey>& before = h.slots->tokens(slot);
  // Chain keys name whole prefixes: what survives of `before` is its longest common prefix with
  // the new prompt or with another slot.
  size_t kept = EngineSlotCache::CommonPrefix(before, blocks);
  for (int i = 0; i < h.slots->size() && kept < before.size(); ++i) {
    if (i != slot) kept = std::max(kept, EngineSlotCache::CommonPrefix(before, h.slots->tokens(i)));
  }
  return static_cast<int64_t>(before.size() - kept) * h.block_tokens;
}

int EngineCacheModel::ServeSlots(Holder& h, std::span<const BlockKey> blocks) {
  blocks = FitSlot(h, blocks);
  EngineSlotCache& slots = *h.slots;
  const int slot = PickSlot(h, blocks);
  // Deciding as if all were idle (PickSlot) makes them idle in the model too.
  if (slots.processing(slot)) {
    for (int i = 0; i < slots.size(); ++i) slots.SetProcessing(i, false);
  }
  const std::vector<BlockKey> before = slots.tokens(slot);
  slots.Start(slot, blocks);
  // The gateway does not see the request end: the slot is modelled idle at once, released now.
  slots.Release(slot, std::vector<BlockKey>(blocks.begin(), blocks.end()), static_cast<int64_t>(clock_));
  ++h.seen[static_cast<size_t>(slot)].served;
  Evict(h, before);
  return slot;
}

void EngineCacheModel::Evict(const Holder& h, const std::vector<BlockKey>& before) {
  if (before.empty()) return;
  // Chain keys name whole prefixes, so a block another slot (or the slot's new content) holds
  // stays.
  absl::flat_hash_set<BlockKey> kept;
  for (int i = 0; i < h.slots->size(); ++i) kept.insert(h.slots->tokens(i).begin(), h.slots->tokens(i).end());
  for (BlockKey k : before) {
    if (!kept.contains(k)) evicted_.push_back(k);
  }
}

void EngineCacheModel::DropSlot(Holder& h, int slot, int64_t now) {
  const std::vector<BlockKey> before = h.slots->tokens(slot);
  const bool processing = h.slots->processing(slot);
  h.slots->Release(slot, {}, now);
  h.slots->SetProcessing(slot, processing);
  Evict(h, before);
}

int EngineCacheModel::ObserveSlots(HolderId holder, std::span<const SlotObservation> observed) {
  auto it = holders_.find(holder);
  if (it == holders_.end() || it->second.capacity.kind != EngineCacheKind::kSlots) return 0;
  Holder& h = it->second;
  evicted_.clear();
  int dropped = 0;
  // Slots used behind the gateway's back, in the engine's task order: llama-server numbers
  // tasks in arrival order, so a higher id_task was released later.
  std::vector<std::pair<int64_t, int>> foreign;
  for (const SlotObservation& o : observed) {
    if (o.id < 0 || o.id >= h.slots->size()) continue;
    SlotSeen& seen = h.seen[static_cast<size_t>(o.id)];
    h.slots->SetProcessing(o.id, o.processing);
    const bool empty = !o.task || (o.tokens && *o.tokens == 0);
    const bool took_task = o.task && o.task != seen.task;
    if (empty && seen.served == seen.served_at_task) {
      // The engine holds nothing there (never used, or cleared) and nothing the gateway sent
      // can be on its way to it.
      if (!h.slots->tokens(o.id).empty()) {
        DropSlot(h, o.id, -1);
        ++dropped;
      }
    } else if (took_task && seen.served == seen.served_at_task) {
      foreign.emplace_back(*o.task, o.id);
    }
    if (took_task) {
      seen.task = o.task;
      seen.served_at_task = seen.served;
    }
  }
  std::sort(foreign.begin(), foreign.end());
  for (const auto& [task, slot] : foreign) {
    DropSlot(h, slot, static_cast<int64_t>(++clock_));
    ++dropped;
  }
  if (!evicted_.empty()) {
    h.evictions += evicted_.size();
    index_->Removed(holder, evicted_);
  }
  return dropped;
}

void EngineCacheModel::FollowDisplaced(BlockKey lost, Nanos now) {
  if (displaced_.size() >= kMaxFollowedDisplacements) {
    // The oldest open one leaves undecided: counting it either way would bias the share.
    const Displaced& old = displaced_.front();
    auto it = displaced_at_.find(old.tip);
    if (it != displaced_at_.end() && it->second == displaced_seq_) displaced_at_.erase(it);
    displaced_.pop_front();
    ++displaced_seq_;
  }
  displaced_at_[lost] = displaced_seq_ + displaced_.size();
  displaced_.push_back({lost, now, false});
}

void EngineCacheModel::NoteReturns(std::span<const BlockKey> blocks, Nanos now) {
  if (!displaced_at_.empty()) {
    for (BlockKey k : blocks) {
      auto it = displaced_at_.find(k);
      if (it == displaced_at_.end()) continue;
      displaced_[static_cast<size_t>(it->second - displaced_seq_)].returned = true;
    }
  }
  while (!displaced_.empty() && now - displaced_.front().at >= options_.return_horizon) {
    const Displaced& d = displaced_.front();
    ++decided_;
    returned_ += d.returned ? 1 : 0;
    auto it = displaced_at_.find(d.tip);
    if (it != displaced_at_.end() && it->second == displaced_seq_) displaced_at_.erase(it);
    displaced_.pop_front();
    ++displaced_seq_;
  }
}

double EngineCacheModel::ReturnProbability(double prior) const {
  const double w = std::max(options_.return_prior_weight, 0.0);
  const double decided = static_cast<double>(decided_);
  if (decided + w <= 0) return std::clamp(prior, 0.0, kMaxReturnProbability);
  const double p = (static_cast<double>(returned_) + std::clamp(prior, 0.0, 1.0) * w) / (decided + w);
  return std::clamp(p, 0.0, kMaxReturnProbability);
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
    for (int i = 0; i < h.slots->size(); ++i) {
      const size_t blocks = h.slots->tokens(i).size();
      if (blocks == 0) continue;
      ++out.used_slots;
      out.tokens += static_cast<int64_t>(blocks) * h.block_tokens;
    }
  } else {
    out.tokens = static_cast<int64_t>(h.paged.size()) * h.block_tokens;
  }
  return out;
}

}  // namespace myriad::policy
