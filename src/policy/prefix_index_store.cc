#include "policy/prefix_index_store.h"

#include <algorithm>

namespace myriad::policy::prefix_index_internal {
namespace {

constexpr uint32_t kMinCapacity = 16;
// Below this many slots (a 2 MiB table) the table grows by 1.5x at 3/4 load, above it by 6/5
// at 5/8 load (see the header).
constexpr uint32_t kSmallSlots = (uint32_t{2} << 20) / 16;

}  // namespace

BlockStore::BlockStore() {
  slots_.reset(static_cast<Slot*>(AllocateLarge(kMinCapacity * sizeof(Slot), true, &slot_bytes_)));
  capacity_ = kMinCapacity;
  lines_ = kMinCapacity / 4;
}

size_t BlockStore::memory_bytes() const {
  return slot_bytes_ + chunks_.size() * (sizeof(Node) << kChunkBits) +
         chunks_.capacity() * sizeof(chunks_[0]) + scratch_.capacity() * sizeof(uint64_t);
}

void BlockStore::Place(Slot s) {
  uint32_t i = Home(s.key);
  while (slots_[i].word != 0) {
    if (++i == capacity_) i = 0;
  }
  slots_[i] = s;
}

bool BlockStore::Full() const {
  const uint64_t n = size_ + 1;
  return capacity_ < kSmallSlots ? n * 4 > uint64_t{capacity_} * 3
                                 : n * 8 > uint64_t{capacity_} * 5;
}

void BlockStore::Grow() {
  const uint64_t step = capacity_ < kSmallSlots ? capacity_ / 2 : capacity_ / 5;
  const uint64_t grown = (uint64_t{capacity_} + step + 3) & ~uint64_t{3};
  constexpr uint64_t kMaxCapacity = UINT32_MAX - 3;  // a multiple of four
  size_t bytes = 0;
  std::unique_ptr<Slot[], FreeDeleter> old(static_cast<Slot*>(
      AllocateLarge(std::min(grown, kMaxCapacity) * sizeof(Slot), true, &bytes)));
  // The allocation is rounded up (to 2 MiB when large): its slots are all used.
  const uint32_t cap =
      static_cast<uint32_t>(std::min<uint64_t>(bytes / sizeof(Slot), kMaxCapacity) & ~uint64_t{3});
  old.swap(slots_);
  slot_bytes_ = bytes;
  const uint32_t old_cap = capacity_;
  capacity_ = cap;
  lines_ = cap / 4;
  for (uint32_t i = 0; i < old_cap; ++i) {
    if (old[i].word != 0) Place(old[i]);
  }
}

uint32_t BlockStore::Insert(BlockKey key, uint64_t payload, bool ref) {
  if (Full()) Grow();
  uint32_t i = Home(key);
  while (slots_[i].word != 0) {
    if (++i == capacity_) i = 0;
  }
  slots_[i] = {key, kOcc | (ref ? kRef : 0) | (payload & kPayload)};
  ++size_;
  return i;
}

void BlockStore::EraseBlock(uint32_t slot) {
  if (IsNode(slots_[slot].word)) FreeChain(static_cast<uint32_t>(slots_[slot].word));
  // Backward-shift deletion: move each later member of the run whose home is not in
  // (hole, j] into the hole, so that every key stays reachable from its home.
  uint32_t hole = slot;
  uint32_t j = slot;
  for (;;) {
    if (++j == capacity_) j = 0;
    const Slot s = slots_[j];
    if (s.word == 0) break;
    const uint32_t h = Home(s.key);
    const bool reachable = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
    if (!reachable) {
      slots_[hole] = s;
      hole = j;
    }
  }
  slots_[hole] = {0, 0};
  --size_;
}

uint32_t BlockStore::NewNode() {
  if (free_nodes_ != kNone) {
    const uint32_t n = free_nodes_;
    free_nodes_ = node(n).next;
    return n;
  }
  if (nodes_used_ == chunks_.size() << kChunkBits) {
    size_t bytes = 0;
    chunks_.emplace_back(static_cast<Node*>(AllocateLarge(sizeof(Node) << kChunkBits, false, &bytes)));
  }
  return nodes_used_++;
}

void BlockStore::FreeChain(uint32_t head) {
  uint32_t last = head;
  while (node(last).next != kNone) last = node(last).next;
  node(last).next = free_nodes_;
  free_nodes_ = head;
}

void BlockStore::AddWord(uint32_t slot, uint64_t payload) {
  uint64_t& w = slots_[slot].word;
  if (!(w & kForm)) {
    const uint64_t first = w & kPayload;
    if (Compact::Fits(first) && Compact::Fits(payload)) {
      w = (w & (kOcc | kRef)) | kPair | (Compact::Pack(first) << Compact::kBits) |
          Compact::Pack(payload);
      return;
    }
    scratch_.assign({first, payload});
    Rebuild(slot);
    return;
  }
  if (!IsNode(w)) {  // pair or triple
    scratch_.clear();
    ForEach(slot, [&](uint64_t p) { scratch_.push_back(p); });
    scratch_.push_back(payload);
    Rebuild(slot);
    return;
  }
  // Only the head node may be partly filled: new words go there or into a new head.
  payload |= kOcc;
  const uint32_t head = static_cast<uint32_t>(w);
  if (node(head).n < 3) {
    Node& nd = node(head);
    nd.w[nd.n++] = payload;
    return;
  }
  const uint32_t n = NewNode();
  Node& nd = node(n);
  nd.w[0] = payload;
  nd.n = 1;
  nd.next = head;
  w = (w & ~uint64_t{UINT32_MAX}) | n;
}

bool BlockStore::Rebuild(uint32_t slot) {
  uint64_t& w = slots_[slot].word;
  const uint64_t keep = w & (kOcc | kRef);
  if (IsNode(w)) FreeChain(static_cast<uint32_t>(w));
  const size_t count = scratch_.size();
  if (count == 0) {
    w = kOcc;  // EraseBlock reads the form bits
    EraseBlock(slot);
    return true;
  }
  if (count == 1) {
    w = keep | scratch_[0];
    return false;
  }
  if (count == 2 && Compact::Fits(scratch_[0]) && Compact::Fits(scratch_[1])) {
    w = keep | kPair | (Compact::Pack(scratch_[0]) << Compact::kBits) | Compact::Pack(scratch_[1]);
    return false;
  }
  if (count == 3 && Compact3::Fits(scratch_[0]) && Compact3::Fits(scratch_[1]) &&
      Compact3::Fits(scratch_[2])) {
    w = keep | kTriple | (Compact3::Pack(scratch_[0]) << 2 * Compact3::kBits) |
        (Compact3::Pack(scratch_[1]) << Compact3::kBits) | Compact3::Pack(scratch_[2]);
    return false;
  }
  // Full nodes first, the partly filled one at the head.
  uint32_t head = kNone;
  for (size_t i = 0; i < count; i += 3) {
    const uint32_t n = NewNode();
    Node& nd = node(n);
    nd.n = static_cast<uint32_t>(std::min<size_t>(3, count - i));
    for (uint32_t j = 0; j < nd.n; ++j) nd.w[j] = kOcc | scratch_[i + j];
    nd.next = head;
    head = n;
  }
  w = keep | kOvf | head;
  return false;
}

}  // namespace myriad::policy::prefix_index_internal
