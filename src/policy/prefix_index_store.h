#pragma once
// The storage under PrefixIndex: an open-addressing (linear probing) table of blocks whose
// 16-byte slot holds the block key and one 64-bit word. The word holds the block's one holder
// payload; or two or three compact payloads (the pair and triple forms, see Compact below);
// or, for more holders or payloads that do not compress, points to a chain of pooled 32-byte
// nodes of three words each. The compact forms keep a block with two or three holders to one
// cache line, where a node costs a second (dependent) line on every Match.
//
// The table (a multiple of four slots: 64-byte lines) maps keys to lines with a multiply-shift
// ("fastrange"), which allows capacities that are not powers of two. A key's home is the first
// slot of a line (bucketised linear probing): at 3/4 load about 13% of keys then sit beyond
// their home line (5% beyond the next line too), against 20% with homes on any slot; at 5/8
// load, 8% (2%). Each line a probe runs on into is one more memory latency for Match, so a
// table past 2 MiB (out of the caches) grows by 6/5 when it would pass 5/8 load, and is 0.52
// to 0.625 full (26-31 bytes per single-holder block); a smaller one grows by 1.5x at 3/4
// load. A grown table takes all of its (rounded-up) allocation.
// Erase shifts the rest of the run back (no tombstones).
//
// Large arrays (the table past 2 MiB, node chunks) are 2 MiB-aligned and advised as huge pages:
// probes land on random pages of a table of hundreds of MiB, and TLB misses (two-level page
// walks under virtualisation) otherwise double the cost of each probe.
//
// Word bits 63..60 belong to the store (occupied, overflow, referenced, pair; overflow and pair
// together: triple); bits 59..0 are a payload laid out as below, or packed payloads. An empty slot has word 0. Slot indices stay valid until the next
// Insert (which may grow the table) or erase (which may shift later slots back by one).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/block_hash.h"
#include "core/huge_array.h"

namespace myriad::policy::prefix_index_internal {

// A payload (60 bits): holder id (22 bits) | provisional bit | 37-bit stamp.
inline constexpr int kStampBits = 37;
inline constexpr uint64_t kStampMask = (uint64_t{1} << kStampBits) - 1;
inline constexpr uint64_t kProvBit = uint64_t{1} << kStampBits;
inline constexpr int kHolderShift = kStampBits + 1;
inline constexpr int kHolderBits = 22;
static_assert(kHolderShift + kHolderBits == 60, "bits 63..60 belong to the store");

// A compact form (kBits bits) of a confirmed payload whose holder id is below
// 2^(kBits - kStamp) and whose stamp is below 2^kStamp: holder id | stamp. Other payloads
// (provisional, large ids or stamps) do not compress, which costs only speed and memory: their
// blocks use a wider form (the node form at worst).
template <int kBitsT, int kStampT>
struct CompactForm {
  static constexpr int kStamp = kStampT;
  static constexpr int kBits = kBitsT;
  static constexpr uint64_t kMask = (uint64_t{1} << kBits) - 1;
  static constexpr uint64_t kFits =  // the payload bits a compressible payload may have set
      (((uint64_t{1} << (kBits - kStamp)) - 1) << kHolderShift) | ((uint64_t{1} << kStamp) - 1);
  static constexpr bool Fits(uint64_t p) { return (p & ~kFits) == 0; }
  static constexpr uint64_t Pack(uint64_t p) {
    return ((p >> kHolderShift) << kStamp) | (p & ((uint64_t{1} << kStamp) - 1));
  }
  static constexpr uint64_t Unpack(uint64_t c) {
    return ((c >> kStamp) << kHolderShift) | (c & ((uint64_t{1} << kStamp) - 1));
  }
  static constexpr uint32_t Holder(uint64_t c) { return static_cast<uint32_t>(c >> kStamp); }
  static constexpr uint64_t Stamp(uint64_t c) { return c & ((uint64_t{1} << kStamp) - 1); }
};
// Two payloads in a slot (the pair form): holder ids below 2^16, stamps below 2^14.
using Compact = CompactForm<30, 14>;
// Three payloads in a slot (the triple form): holder ids below 2^12, stamps below 2^8.
using Compact3 = CompactForm<20, 8>;

class BlockStore {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr uint64_t kOcc = uint64_t{1} << 63;
  static constexpr uint64_t kOvf = uint64_t{1} << 62;
  static constexpr uint64_t kRef = uint64_t{1} << 61;
  static constexpr uint64_t kPair = uint64_t{1} << 60;
  static constexpr uint64_t kPayload = kPair - 1;
  // The form of a word: one payload (0), pair, triple, or node chain.
  static constexpr uint64_t kForm = kOvf | kPair;
  static constexpr uint64_t kTriple = kOvf | kPair;
  static constexpr bool IsNode(uint64_t w) { return (w & kForm) == kOvf; }
  // Returned by a Transform function to drop the payload.
  static constexpr uint64_t kDrop = UINT64_MAX;

  BlockStore();

  size_t size() const { return size_; }          // blocks
  size_t capacity() const { return capacity_; }  // slots
  size_t memory_bytes() const;

  // The first slot of the key's home line.
  uint32_t Home(BlockKey key) const {
    return static_cast<uint32_t>((static_cast<unsigned __int128>(Mix(key)) * lines_) >> 64) * 4;
  }
  // The home line and the next, into L1: an insert's probe (a miss) often runs on.
  // (Prefetching past the table's end is harmless: a prefetch never faults.)
  void Prefetch(BlockKey key) const {
    const uintptr_t p = reinterpret_cast<uintptr_t>(&slots_[Home(key)]);
    __builtin_prefetch(reinterpret_cast<const void*>(p));
    __builtin_prefetch(reinterpret_cast<const void*>(p + 64));
  }
  // Into L2 (hint 2): more of these can be in flight than of L1 fills.
  void PrefetchSlot(uint32_t slot) const { __builtin_prefetch(&slots_[slot], 0, 2); }
  void PrefetchChain(uint32_t slot) const {
    const uint64_t w = slots_[slot].word;
    if (IsNode(w)) __builtin_prefetch(&node(static_cast<uint32_t>(w)), 0, 2);
  }

  // Whether two blocks hold the same payloads in the same form and order.
  bool SameEntries(uint32_t a, uint32_t b) const {
    const uint64_t wa = slots_[a].word;
    const uint64_t wb = slots_[b].word;
    if (((wa ^ wb) & ~kRef) == 0) return true;
    if (!IsNode(wa) || !IsNode(wb)) return false;
    uint32_t x = static_cast<uint32_t>(wa);
    uint32_t y = static_cast<uint32_t>(wb);
    for (;;) {
      const Node& nx = node(x);
      const Node& ny = node(y);
      if (nx.n != ny.n) return false;
      for (uint32_t j = 0; j < nx.n; ++j) {
        if (nx.w[j] != ny.w[j]) return false;
      }
      x = nx.next;
      y = ny.next;
      if (x == kNone || y == kNone) return x == y;
    }
  }

  uint32_t Find(BlockKey key) const { return FindFrom(Home(key), key); }
  uint32_t FindFrom(uint32_t i, BlockKey key) const {
    for (;;) {
      const Slot& s = slots_[i];
      if (s.word == 0) return kNone;
      if (s.key == key) return i;
      if (++i == capacity_) i = 0;
    }
  }
  // The first step of a Find that touches only the home line (four slots; the table is
  // line-aligned and its capacity a multiple of four): the slot, kNone, or kMore when the
  // probe goes on in the next line (FindFrom(NextLine(home))). Keys are compared without
  // looking at the words first: a key sits after no empty slot of its home line, so when the
  // first slot with the key is empty (a stale key there), the key is absent.
  static constexpr uint32_t kMore = kNone - 1;
  uint32_t FindInLine(uint32_t home, BlockKey key) const {
    const Slot* line = &slots_[home];
    const uint32_t found = static_cast<uint32_t>(line[0].key == key) |
                           static_cast<uint32_t>(line[1].key == key) << 1 |
                           static_cast<uint32_t>(line[2].key == key) << 2 |
                           static_cast<uint32_t>(line[3].key == key) << 3;
    if (found != 0) [[likely]] {
      const uint32_t s = home + static_cast<uint32_t>(__builtin_ctz(found));
      return slots_[s].word != 0 ? s : kNone;
    }
    const bool full = (line[0].word != 0) & (line[1].word != 0) & (line[2].word != 0) &
                      (line[3].word != 0);
    return full ? kMore : kNone;
  }
  uint32_t NextLine(uint32_t home) const {
    const uint32_t next = (home | 3u) + 1;
    return next == capacity_ ? 0 : next;
  }
  // Adds a block (absent) with one word; may grow the table, invalidating slot indices.
  uint32_t Insert(BlockKey key, uint64_t payload, bool ref);
  // Removes the block and its chain; the block that shifts into `slot`, if any, is there now.
  void EraseBlock(uint32_t slot);

  BlockKey key(uint32_t slot) const { return slots_[slot].key; }
  bool empty(uint32_t slot) const { return slots_[slot].word == 0; }
  uint64_t word(uint32_t slot) const { return slots_[slot].word; }
  bool ref(uint32_t slot) const { return slots_[slot].word & kRef; }
  void set_ref(uint32_t slot) { slots_[slot].word |= kRef; }
  void clear_ref(uint32_t slot) { slots_[slot].word &= ~kRef; }

  // Calls f(payload) for each payload of the block.
  template <class F>
  void ForEach(uint32_t slot, F&& f) const {
    const uint64_t w = slots_[slot].word;
    switch (w & kForm) {
      case 0:
        f(w & kPayload);
        return;
      case kPair:
        f(Compact::Unpack((w >> Compact::kBits) & Compact::kMask));
        f(Compact::Unpack(w & Compact::kMask));
        return;
      case kTriple:
        f(Compact3::Unpack((w >> 2 * Compact3::kBits) & Compact3::kMask));
        f(Compact3::Unpack((w >> Compact3::kBits) & Compact3::kMask));
        f(Compact3::Unpack(w & Compact3::kMask));
        return;
      default:
        break;
    }
    for (uint32_t n = static_cast<uint32_t>(w); n != kNone;) {
      const Node& nd = node(n);
      for (uint32_t j = 0; j < nd.n; ++j) f(nd.w[j] & kPayload);
      n = nd.next;
    }
  }
  // Finds the first payload that satisfies `pred` and replaces it with update(payload).
  // Returns false when no payload does.
  template <class P, class U>
  bool Update(uint32_t slot, P&& pred, U&& update) {
    uint64_t& w = slots_[slot].word;
    switch (w & kForm) {
      case 0:
        if (!pred(w & kPayload)) return false;
        w = (w & ~kPayload) | update(w & kPayload);
        return true;
      case kPair:
        return UpdatePacked<Compact, 2>(slot, pred, update);
      case kTriple:
        return UpdatePacked<Compact3, 3>(slot, pred, update);
      default:
        break;
    }
    for (uint32_t n = static_cast<uint32_t>(w); n != kNone;) {
      Node& nd = node(n);
      for (uint32_t j = 0; j < nd.n; ++j) {
        if (!pred(nd.w[j] & kPayload)) continue;
        nd.w[j] = kOcc | update(nd.w[j] & kPayload);
        // A chain of one node (the head) whose two or three payloads now all compress goes
        // back into the slot.
        if (n == static_cast<uint32_t>(w) && nd.next == kNone && nd.n >= 2) {
          bool fits = true;
          for (uint32_t i = 0; i < nd.n; ++i) {
            const uint64_t p = nd.w[i] & kPayload;
            fits &= nd.n == 2 ? Compact::Fits(p) : Compact3::Fits(p);
          }
          if (fits) {
            scratch_.clear();
            for (uint32_t i = 0; i < nd.n; ++i) scratch_.push_back(nd.w[i] & kPayload);
            Rebuild(slot);
          }
        }
        return true;
      }
      n = nd.next;
    }
    return false;
  }
  void AddWord(uint32_t slot, uint64_t payload);
  // Replaces each payload p of the block with f(p) (kDrop: removes it), erasing the block when
  // none is left. Returns true when the block was erased.
  template <class F>
  bool Transform(uint32_t slot, F&& f) {
    const uint64_t w = slots_[slot].word;
    if (!(w & kForm)) {
      const uint64_t q = f(w & kPayload);
      if (q == kDrop) {
        EraseBlock(slot);
        return true;
      }
      slots_[slot].word = (w & ~kPayload) | q;
      return false;
    }
    scratch_.clear();
    bool changed = false;
    ForEach(slot, [&](uint64_t p) {
      const uint64_t q = f(p);
      changed |= q != p;
      if (q != kDrop) scratch_.push_back(q);
    });
    return changed && Rebuild(slot);
  }
  // Removes every payload that satisfies `drop` (calling it once per payload), erasing the
  // block when none is left. Returns true when the block was erased.
  template <class D>
  bool RemoveIf(uint32_t slot, D&& drop) {
    return Transform(slot, [&](uint64_t p) { return drop(p) ? kDrop : p; });
  }

 private:
  struct Slot {
    BlockKey key;
    uint64_t word;
  };
  struct Node {
    uint64_t w[3];
    uint32_t next;
    uint32_t n;
  };
  static constexpr uint32_t kChunkBits = 16;  // 65,536 nodes (2 MiB) per chunk

  static uint64_t Mix(uint64_t k) {
    k ^= k >> 32;
    k *= 0xd6e8feb86659fd93ULL;
    k ^= k >> 32;
    return k;
  }
  Node& node(uint32_t i) { return chunks_[i >> kChunkBits][i & ((1u << kChunkBits) - 1)]; }
  const Node& node(uint32_t i) const {
    return chunks_[i >> kChunkBits][i & ((1u << kChunkBits) - 1)];
  }
  // Update of a word of the pair (C = Compact, count 2) or triple form.
  template <class C, int kCount, class P, class U>
  bool UpdatePacked(uint32_t slot, P&& pred, U&& update) {
    uint64_t& w = slots_[slot].word;
    for (int i = kCount - 1; i >= 0; --i) {
      const int shift = i * C::kBits;
      const uint64_t p = C::Unpack((w >> shift) & C::kMask);
      if (!pred(p)) continue;
      const uint64_t q = update(p);
      if (C::Fits(q)) {
        w = (w & ~(C::kMask << shift)) | (C::Pack(q) << shift);
      } else {
        scratch_.clear();
        for (int k = kCount - 1; k >= 0; --k) {
          if (k != i) scratch_.push_back(C::Unpack((w >> (k * C::kBits)) & C::kMask));
        }
        scratch_.push_back(q);
        Rebuild(slot);
      }
      return true;
    }
    return false;
  }
  uint32_t NewNode();
  void FreeChain(uint32_t head);
  // Rewrites the block from scratch_ in the smallest form; true when that erased it.
  bool Rebuild(uint32_t slot);
  bool Full() const;  // whether one more block needs a larger table
  void Grow();
  void Place(Slot s);

  std::unique_ptr<Slot[], FreeDeleter> slots_;
  size_t slot_bytes_ = 0;  // allocated for slots_
  uint32_t capacity_ = 0;
  uint64_t lines_ = 0;     // capacity_ / 4
  size_t size_ = 0;
  std::vector<std::unique_ptr<Node[], FreeDeleter>> chunks_;
  uint32_t nodes_used_ = 0;  // nodes handed out from the chunks, free ones included
  uint32_t free_nodes_ = kNone;
  std::vector<uint64_t> scratch_;
};

}  // namespace myriad::policy::prefix_index_internal
