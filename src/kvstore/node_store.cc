#include "kvstore/node_store.h"

#include <fmt/format.h>

#include <algorithm>

namespace myriad::kvstore {

NodeStore::NodeStore(uint64_t capacity_bytes, uint64_t segment_bytes, bool shareable)
    : capacity_(capacity_bytes) {
  segment_bytes = std::max<uint64_t>(segment_bytes, 4 * SegmentArena::kTagBytes);
  for (uint64_t left = capacity_bytes; left >= 2 * SegmentArena::kTagBytes;) {
    const uint64_t bytes = std::min(left, segment_bytes);
    segments_.push_back(std::make_unique<SegmentArena>(bytes, shareable));
    left -= bytes;
  }
}

absl::StatusOr<Extent> NodeStore::Reserve(ObjectName name, uint64_t size) {
  std::lock_guard lock(mu_);
  uint64_t largest = 0;
  for (const auto& s : segments_) largest = std::max(largest, s->max_payload());
  if (size > largest) {
    return absl::InvalidArgumentError(fmt::format(
        "object of {} bytes is larger than a segment of this node ({} bytes of payload)", size,
        largest));
  }
  const auto n = static_cast<uint32_t>(segments_.size());
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t seg = (next_segment_ + i) % n;
    std::optional<uint64_t> offset = segments_[seg]->Allocate(size);
    if (!offset) continue;
    next_segment_ = seg;
    uint32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = static_cast<uint32_t>(entries_.size());
      entries_.emplace_back();
    }
    entries_[slot] = Entry{name, *offset, size, 0, seg, 0, kWriting};
    used_ += size;
    return Extent{slot, segments_[seg]->At(*offset), size, seg, *offset};
  }
  ++allocation_failures_;
  return absl::ResourceExhaustedError(fmt::format(
      "no room for {} bytes on this node ({} of {} bytes used)", size, used_, capacity_));
}

void NodeStore::Commit(Extent write) {
  std::lock_guard lock(mu_);
  Entry& e = entries_[write.slot];
  e.state = kVisible;
  e.generation = ++generation_;
  auto [it, inserted] = index_.try_emplace(e.name, write.slot);
  if (!inserted) {
    const uint32_t old = it->second;
    it->second = write.slot;
    entries_[old].state = kDoomed;
    if (entries_[old].pins == 0) Release(old);
  }
}

void NodeStore::Abort(Extent write) {
  std::lock_guard lock(mu_);
  Release(write.slot);
}

std::optional<Extent> NodeStore::Pin(ObjectName name) {
  std::lock_guard lock(mu_);
  auto it = index_.find(name);
  if (it == index_.end()) return std::nullopt;
  Entry& e = entries_[it->second];
  ++e.pins;
  return Extent{it->second, segments_[e.segment]->At(e.offset), e.size, e.segment, e.offset};
}

void NodeStore::Unpin(Extent read) {
  std::lock_guard lock(mu_);
  Entry& e = entries_[read.slot];
  if (--e.pins == 0 && e.state == kDoomed) Release(read.slot);
}

void NodeStore::Retire(uint32_t slot) {
  Entry& e = entries_[slot];
  index_.erase(e.name);
  e.state = kDoomed;
  if (e.pins == 0) Release(slot);
}

void NodeStore::Release(uint32_t slot) {
  Entry& e = entries_[slot];
  segments_[e.segment]->Free(e.offset);
  used_ -= e.size;
  e = Entry{};
  free_slots_.push_back(slot);
}

bool NodeStore::Delete(ObjectName name) {
  std::lock_guard lock(mu_);
  auto it = index_.find(name);
  if (it == index_.end()) return false;
  Retire(it->second);
  return true;
}

uint64_t NodeStore::DropNamespace(NamespaceId ns) {
  std::lock_guard lock(mu_);
  uint64_t n = 0;
  for (uint32_t slot = 0; slot < entries_.size(); ++slot) {
    if (entries_[slot].state == kVisible && entries_[slot].name.ns == ns) {
      Retire(slot);
      ++n;
    }
  }
  return n;
}

uint32_t NodeStore::List(uint32_t cursor, size_t max, std::vector<HeldObject>* objects,
                         std::vector<uint64_t>* generations) {
  std::lock_guard lock(mu_);
  uint32_t slot = cursor;
  const size_t end = objects->size() + max;
  for (; slot < entries_.size() && objects->size() < end; ++slot) {
    const Entry& e = entries_[slot];
    if (e.state != kVisible) continue;
    objects->push_back({e.name.ns, e.name.key});
    generations->push_back(e.generation);
  }
  return slot >= entries_.size() ? 0 : slot;
}

bool NodeStore::DeleteIfGeneration(ObjectName name, uint64_t generation) {
  std::lock_guard lock(mu_);
  auto it = index_.find(name);
  if (it == index_.end() || entries_[it->second].generation != generation) return false;
  Retire(it->second);
  return true;
}

std::vector<SegmentInfo> NodeStore::Segments() const {
  std::vector<SegmentInfo> out;
  for (const auto& s : segments_) out.push_back({s->fd(), s->capacity()});
  return out;
}

NodeStoreStats NodeStore::stats() {
  std::lock_guard lock(mu_);
  NodeStoreStats s;
  s.capacity_bytes = capacity_;
  s.used_bytes = used_;
  for (const auto& seg : segments_) s.arena_bytes += seg->used();
  s.objects = index_.size();
  s.segments = segments_.size();
  s.allocation_failures = allocation_failures_;
  return s;
}

}  // namespace myriad::kvstore
