// Layout. Blocks live in an open-addressing table (prefix_index_store.h): a 16-byte slot holds
// the key and the one holder's 64-bit word, or two holders' compact 30-bit words, or three
// holders' compact 20-bit words, or a pointer to a chain of pooled 3-word nodes. A word packs holder id (22 bits), a provisional bit and a
// 37-bit stamp:
//   confirmed entry:   the holder's epoch when it was stored;
//   provisional entry: the serial of the AddProvisional call that added it.
// Cleared and MarkSuspect are O(1) and lazy: they move the holder's epoch (and the serial)
// floors, so older stamps read as cleared or suspect. Provisional expiry is a FIFO of one
// batch per AddProvisional call (serial -> expiry, live count), popped as `now` passes. A
// cleared or expired entry is "garbage": no longer counted by entries() nor reported by Match,
// but still occupying memory (and counted against max_entries) until a sweep reclaims it.
//
// Eviction is CLOCK over the table's slots (an approximate LRU over blocks): Stored and Match
// set the block's referenced bit; when an insert would exceed max_entries, the hand clears set
// bits and evicts the first block found clear, reclaiming garbage on the way. The hand takes
// the table's lines in a stride permutation (see SetStride). Approximate: a block that the
// backward shift of an erase moves across the hand's path may be skipped for one rotation or
// visited twice in one. A second hand reclaims garbage a few slots per operation while any
// exists, so blocks() (blocks present in the table) converges to the blocks with a live entry;
// until then it may count blocks whose entries are all garbage.
//
// Match walks the query in order (holes end a holder's prefix, so the prefix length cannot be
// binary-searched) and spends most of its time waiting for memory: see Match. Stamps start
// small and grow by one per Cleared or MarkSuspect of their holder, so a block held by two
// holders with ids below 2^16 fits its slot (30-bit words hold stamps below 2^14), and one held
// by three with ids below 2^12 (20-bit words: stamps below 2^8); a holder past those clears and
// gaps keeps working, its blocks in nodes as with four holders.
#include "policy/prefix_index.h"

#include <algorithm>
#include <deque>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "policy/prefix_index_store.h"

namespace myriad::policy {
namespace {

using prefix_index_internal::BlockStore;
using prefix_index_internal::Compact;
using prefix_index_internal::Compact3;

using prefix_index_internal::kHolderBits;
using prefix_index_internal::kHolderShift;
using prefix_index_internal::kProvBit;
using prefix_index_internal::kStampMask;
// Holder ids at or above this are ignored (22 bits of the word).
constexpr HolderId kMaxHolders = HolderId{1} << kHolderBits;

constexpr uint64_t MakeWord(HolderId h, bool prov, uint64_t stamp) {
  return (uint64_t{h} << kHolderShift) | (prov ? kProvBit : 0) | (stamp & kStampMask);
}
constexpr HolderId HolderOf(uint64_t p) { return static_cast<HolderId>(p >> kHolderShift); }
constexpr bool IsProv(uint64_t p) { return p & kProvBit; }
constexpr uint64_t StampOf(uint64_t p) { return p & kStampMask; }

constexpr uint8_t kSuspectFlag = 1;
constexpr uint8_t kProvFlag = 2;
constexpr uint32_t kNever = UINT32_MAX;
constexpr size_t kProbeLag = 32;        // Match probes a home line this many blocks later
static_assert((kProbeLag & (kProbeLag - 1)) == 0, "a ring of home lines");
// Match defers blocks (see Match) only for queries that started this many runs or fewer:
// Resolve goes over every run the query started.
constexpr size_t kDeferMax = 16;
constexpr size_t kStorePrefetch = 16;   // prefetch distance of Stored
constexpr uint32_t kHandPrefetch = 16;  // and of the eviction hand, in lines

}  // namespace

struct PrefixIndex::Impl {
  struct Holder {  // what Match reads first
    // Match scratch: (query generation << 32) | blocks matched so far, i.e. the run of the
    // holder in the current query; one compare tells whether block j extends it.
    uint64_t run = 0;
    uint64_t clear_floor = 0;    // confirmed stamps below it are cleared
    uint64_t suspect_floor = 0;  // confirmed stamps below it are suspect
    // Match scratch: the first block of the run with a suspect / provisional entry (kNever:
    // none), so that a run cut back (see Resolve) drops what it had gathered beyond the cut.
    uint32_t suspect_from = 0;
    uint32_t prov_from = 0;
    uint64_t mark = 0;  // Match scratch: (generation << 32) | a deferred block it holds
    uint8_t mark_flags = 0;
    uint64_t epoch = 1;               // stamp of entries stored now
    uint64_t prov_clear_floor = 0;    // provisional serials below it are cleared
    uint64_t prov_suspect_floor = 0;  // provisional serials below it are suspect
    uint64_t live = 0;                // entries counted by entries()
  };
  struct ProvBatch {
    Nanos expiry;
    HolderId holder;
    uint32_t live;  // its entries still live and provisional
  };

  explicit Impl(PrefixIndexOptions o) : opt(o) {
    if (opt.index_every < 1) opt.index_every = 1;
    SetStride();
    homes.resize(kProbeLag);
  }

  PrefixIndexOptions opt;
  BlockStore store;
  std::vector<Holder> holders;
  std::deque<ProvBatch> batches;  // serials first_serial .. next_serial - 1
  uint64_t first_serial = 1;
  uint64_t next_serial = 1;
  size_t live = 0;
  size_t garbage = 0;
  uint32_t hand = 0;         // CLOCK eviction hand (a slot)
  uint32_t stride = 1;       // its step from line to line
  uint32_t line_ahead = 0;   // the line it will visit kHandPrefetch lines later
  uint32_t chain_ahead = 0;  // and half as far
  uint32_t gc_hand = 0;      // garbage-reclaiming hand
  uint32_t match_gen = 0;
  // Match scratch: the home lines of the next kProbeLag blocks (a ring), the holders whose runs
  // started (at block 0) and those whose runs go on, and the deferred blocks.
  std::vector<uint32_t> homes;
  std::vector<HolderId> matched;
  std::vector<HolderId> running;
  struct Deferred {
    uint32_t block;
    uint32_t slot;  // its slot, or the line (first slot) where its probe goes on
    bool probe;     // whether `slot` is such a line
  };
  std::vector<Deferred> pending;
  absl::flat_hash_map<PublisherId, uint64_t> publishers;

  // The full serial of a provisional stamp: the latest one congruent to it.
  uint64_t Serial(uint64_t p) const {
    return next_serial - ((next_serial - StampOf(p)) & kStampMask);
  }

  bool Live(uint64_t p) const {
    const Holder& hs = holders[HolderOf(p)];
    if (!IsProv(p)) return StampOf(p) >= hs.clear_floor;
    const uint64_t s = Serial(p);
    return s >= first_serial && s >= hs.prov_clear_floor;
  }
  // Live at `now` (a batch may outlive its expiry when `now` went backwards).
  bool Usable(uint64_t p, Nanos now) const {
    if (!Live(p)) return false;
    return !IsProv(p) || now < batches[Serial(p) - first_serial].expiry;
  }
  uint8_t Flags(uint64_t p) const {
    const Holder& hs = holders[HolderOf(p)];
    if (!IsProv(p)) return StampOf(p) < hs.suspect_floor ? kSuspectFlag : 0;
    return kProvFlag | (Serial(p) < hs.prov_suspect_floor ? kSuspectFlag : 0);
  }

  // Accounting of a word leaving the table / entering it (a new word is always live).
  void Unaccount(uint64_t p) {
    if (!Live(p)) {
      --garbage;
      return;
    }
    --live;
    --holders[HolderOf(p)].live;
    if (IsProv(p)) --batches[Serial(p) - first_serial].live;
  }
  void Account(uint64_t p) {
    ++live;
    ++holders[HolderOf(p)].live;
    if (IsProv(p)) ++batches.back().live;
  }

  void Expire(Nanos now) {
    while (!batches.empty() && batches.front().expiry <= now) {
      const ProvBatch& b = batches.front();
      Holder& hs = holders[b.holder];
      if (b.live > 0 && first_serial >= hs.prov_clear_floor) {  // else Cleared counted them
        live -= b.live;
        hs.live -= b.live;
        garbage += b.live;
      }
      batches.pop_front();
      ++first_serial;
    }
  }

  // Drops the garbage words of the block at `s`; true when that erased the block.
  bool Reclaim(uint32_t s) {
    return store.RemoveIf(s, [&](uint64_t p) {
      if (Live(p)) return false;
      --garbage;
      return true;
    });
  }

  void Sweep(size_t steps) {
    while (garbage > 0 && steps-- > 0) {
      if (gc_hand >= store.capacity()) gc_hand = 0;
      if (store.empty(gc_hand) || !Reclaim(gc_hand)) ++gc_hand;
    }
  }

  // The eviction hand visits the table's lines (four slots) in a stride permutation, not in
  // table order: evicting in table order would leave the table dense just ahead of the hand
  // (blocks there are two rotations old) and grow linear-probing runs without bound. The
  // stride is coprime with the number of lines, so a rotation visits every slot once; visiting
  // a line's slots together costs one random line per about one eviction. Within a line it
  // goes from the last slot to the first: an erase shifts later blocks back (with homes at line
  // starts, often a whole run), and going backwards the hand does not meet a shifted block
  // again in the same line.
  void SetStride() {
    const uint32_t lines = static_cast<uint32_t>(store.capacity() / 4);
    uint32_t s = static_cast<uint32_t>(lines * 0.6180339887) | 1;
    while (std::gcd(s, lines) != 1) s += 2;
    stride = s % lines;
    if (hand >= store.capacity()) hand = 0;
    hand |= 3u;
    line_ahead = static_cast<uint32_t>((hand / 4 + uint64_t{kHandPrefetch} * stride) % lines);
    chain_ahead = static_cast<uint32_t>((hand / 4 + uint64_t{kHandPrefetch / 2} * stride) % lines);
  }
  uint32_t NextHandLine(uint32_t line) const {
    line += stride;
    const uint32_t lines = static_cast<uint32_t>(store.capacity() / 4);
    return line >= lines ? line - lines : line;
  }
  // Moves the hand to the next slot of its line, or to its next line, prefetching the line it
  // will visit kHandPrefetch lines later and the overflow chains of the one half as far.
  void AdvanceHand() {
    if ((hand & 3) != 0) {
      --hand;
      return;
    }
    hand = NextHandLine(hand / 4) * 4 + 3;
    line_ahead = NextHandLine(line_ahead);
    chain_ahead = NextHandLine(chain_ahead);
    store.PrefetchSlot(line_ahead * 4);
    for (uint32_t i = 0; i < 4; ++i) store.PrefetchChain(chain_ahead * 4 + i);
  }

  // Frees room for one more entry: garbage first, then CLOCK eviction of whole blocks.
  void MakeRoom() {
    Sweep(16);
    while (live + garbage >= opt.max_entries && store.size() > 0) {
      if (store.empty(hand)) {
        AdvanceHand();
        continue;
      }
      if (garbage > 0 && Reclaim(hand)) {
        AdvanceHand();
        continue;
      }
      if (live + garbage < opt.max_entries) break;
      if (store.ref(hand)) {
        store.clear_ref(hand);
      } else {
        store.ForEach(hand, [&](uint64_t p) { Unaccount(p); });
        store.EraseBlock(hand);
      }
      AdvanceHand();
    }
  }

  void InsertBlock(BlockKey key, uint64_t word) {
    const uint64_t cap = store.capacity();
    store.Insert(key, word, /*ref=*/true);
    if (store.capacity() != cap) {
      hand = static_cast<uint32_t>(hand * store.capacity() / cap);  // SetStride bounds it
      gc_hand = static_cast<uint32_t>(gc_hand * store.capacity() / cap);
      SetStride();
    }
  }

  void Put(HolderId holder, BlockKey key, uint64_t word) {
    uint32_t s = store.Find(key);
    if (s != BlockStore::kNone) {
      const bool held = store.Update(
          s, [holder](uint64_t p) { return HolderOf(p) == holder; },
          [&](uint64_t old) {
            // A prediction never downgrades what an engine reported.
            if (IsProv(word) && !IsProv(old) && Live(old)) return old;
            Unaccount(old);
            Account(word);
            return word;
          });
      if (held) {
        store.set_ref(s);
        return;
      }
    }
    if (live + garbage >= opt.max_entries) {
      MakeRoom();
      s = store.Find(key);
    }
    if (s != BlockStore::kNone) {
      store.AddWord(s, word);
      store.set_ref(s);
    } else {
      InsertBlock(key, word);
    }
    Account(word);
  }

  void Upsert(HolderId holder, uint32_t first_position, std::span<const BlockKey> blocks,
              uint64_t word) {
    const size_t n = static_cast<size_t>(opt.index_every);
    const size_t first = (n - (first_position + size_t{1}) % n) % n;
    size_t ahead = first;
    for (size_t k = 0; k < kStorePrefetch && ahead < blocks.size(); ++k, ahead += n) {
      store.Prefetch(blocks[ahead]);
    }
    size_t done = 0;
    for (size_t i = first; i < blocks.size(); i += n, ++done) {
      if (ahead < blocks.size()) {
        store.Prefetch(blocks[ahead]);
        ahead += n;
      }
      Put(holder, blocks[i], word);
    }
    Sweep(2 * done);
  }

  Holder& EnsureHolder(HolderId h) {
    if (h >= holders.size()) holders.resize(size_t{h} + 1);
    return holders[h];
  }

  // Block 0 of a query starts the run of every holder that holds it (usably).
  bool Start(uint32_t s, Nanos now) {
    const uint64_t run = (uint64_t{match_gen} << 32) | 1;
    store.ForEach(s, [&](uint64_t p) {
      if (!Usable(p, now)) return;
      const HolderId h = HolderOf(p);
      Holder& hs = holders[h];
      const uint8_t flags = Flags(p);
      hs.run = run;
      hs.suspect_from = (flags & kSuspectFlag) ? 0 : kNever;
      hs.prov_from = (flags & kProvFlag) ? 0 : kNever;
      matched.push_back(h);
    });
    running = matched;
    if (!matched.empty() && !store.ref(s)) store.set_ref(s);
    return !matched.empty();
  }
  static void Note(Holder& hs, uint8_t flags, uint32_t j) {
    if (flags & kSuspectFlag) hs.suspect_from = std::min(hs.suspect_from, j);
    if (flags & kProvFlag) hs.prov_from = std::min(hs.prov_from, j);
  }
  // Block j > 0 extends the runs that reached block j - 1, for the holders that hold it, and
  // those holders are the ones running on (`running`, cleared by Step). `run` is the run value
  // of such a holder: (generation << 32) | j.
  bool Extend(HolderId h, uint64_t stamp, uint64_t run) {
    Holder& hs = holders[h];
    if (hs.run != run || stamp < hs.clear_floor) return false;
    const uint32_t j = static_cast<uint32_t>(run);
    if (stamp < hs.suspect_floor) [[unlikely]] hs.suspect_from = std::min(hs.suspect_from, j);
    hs.run = run + 1;
    running.push_back(h);
    return true;
  }
  template <class C, int kCount>
  bool ExtendPacked(uint64_t w, uint64_t run) {
    bool any = false;
    for (int i = kCount - 1; i >= 0; --i) {
      const uint64_t c = (w >> (i * C::kBits)) & C::kMask;
      any |= Extend(C::Holder(c), C::Stamp(c), run);
    }
    return any;
  }
  // The general case: node chains and provisional entries.
  bool ExtendSlow(uint32_t s, uint64_t run, Nanos now) {
    store.ForEach(s, [&](uint64_t p) {
      const HolderId h = HolderOf(p);
      Holder& hs = holders[h];
      if (hs.run != run || !Usable(p, now)) return;
      Note(hs, Flags(p), static_cast<uint32_t>(run));
      hs.run = run + 1;
      running.push_back(h);
    });
    return !running.empty();
  }
  bool Step(uint32_t s, uint64_t run, Nanos now) {
    const uint64_t w = store.word(s);
    running.clear();
    bool any;
    const uint64_t form = w & BlockStore::kForm;
    if (form == BlockStore::kPair) {  // two confirmed entries, inline
      any = ExtendPacked<Compact, 2>(w, run);
    } else if (form == BlockStore::kTriple) {  // three
      any = ExtendPacked<Compact3, 3>(w, run);
    } else if (!(w & (BlockStore::kForm | kProvBit))) {  // one confirmed entry
      any = Extend(HolderOf(w & BlockStore::kPayload), StampOf(w), run);
    } else {
      any = ExtendSlow(s, run, now);
    }
    if (any && !(w & BlockStore::kRef)) store.set_ref(s);  // no store (dirty line) when set
    return any;
  }
  // Moves the runs that go on to `run`: over blocks the walk stepped over or deferred.
  void Advance(uint64_t run) {
    for (HolderId h : running) holders[h].run = run;
  }
  // Cuts back at deferred block j (slot s, or kNone: absent) the runs that went through it
  // without holding it; the others gather its flags. True when some run went through it.
  bool Resolve(uint32_t j, uint32_t s, Nanos now) {
    const uint64_t gen = uint64_t{match_gen} << 32;
    if (s != BlockStore::kNone) {
      store.ForEach(s, [&](uint64_t p) {
        if (!Usable(p, now)) return;
        Holder& hs = holders[HolderOf(p)];
        hs.mark = gen | j;
        hs.mark_flags = Flags(p);
      });
    }
    bool any = false;
    for (HolderId h : matched) {
      Holder& hs = holders[h];
      if (static_cast<uint32_t>(hs.run) <= j) continue;  // ended before j
      if (s != BlockStore::kNone && hs.mark == (gen | j)) {
        Note(hs, hs.mark_flags, j);
        any = true;
      } else {
        hs.run = gen | j;
      }
    }
    if (any && !store.ref(s)) store.set_ref(s);
    return any;
  }

  void Match(std::span<const BlockKey> blocks, Nanos now, std::vector<PrefixMatch>* out) {
    out->clear();
    const size_t n = static_cast<size_t>(opt.index_every);
    const size_t count = blocks.size() / n;  // indexed blocks: positions n-1, 2n-1, ...
    Expire(now);
    if (count == 0 || store.size() == 0) return;
    if (++match_gen == 0) {
      for (Holder& hs : holders) hs.run = 0;
      match_gen = 1;
    }
    matched.clear();
    running.clear();
    pending.clear();
    // Keys are chained, so no lookup depends on another: Match prefetches home lines
    // (memory-level parallelism) kProbeLag blocks ahead of probing them, and walks each block
    // as it probes it. A block whose line is not in yet (its probe runs on into the next line,
    // or it has a node chain) is deferred: the walk takes it as held by every running holder
    // and goes on, and Resolve checks it at the end, once its line is in. Waiting for those
    // lines in the walk cost about a fifth of Match (profile, 2026-11-29).
    const BlockKey* key = blocks.data() + (n - 1);  // key[j * n]: indexed block j
    const uint64_t gen = uint64_t{match_gen} << 32;
    const auto fetch = [&](size_t j) {
      const uint32_t h = store.Home(key[j * n]);
      homes[j & (kProbeLag - 1)] = h;
      store.PrefetchSlot(h);
    };
    for (size_t j = 0; j < std::min(count, kProbeLag); ++j) fetch(j);
    // The word of the last block the walk stepped. A block whose word equals it but for the
    // referenced bit has the same holders with the same stamps: a step would extend the very
    // runs that reached it, with the flags they already gathered, so the walk only sets its
    // referenced bit and moves the runs on later (Advance). Node words differ from block to
    // block. The runs that go on are at gen | at.
    uint64_t last = 0;
    size_t at = 0;
    size_t found = count;
    for (size_t j = 0; j < count; ++j) {
      const uint32_t home = homes[j & (kProbeLag - 1)];
      if (j + kProbeLag < count) fetch(j + kProbeLag);
      uint32_t s = store.FindInLine(home, key[j * n]);
      const bool defer = j != 0 && matched.size() <= kDeferMax;
      if (s == BlockStore::kMore) [[unlikely]] {
        const uint32_t next = store.NextLine(home);
        if (defer) {
          store.PrefetchSlot(next);
          pending.push_back({static_cast<uint32_t>(j), next, true});
          continue;
        }
        s = store.FindFrom(next, key[j * n]);
      }
      if (s == BlockStore::kNone) {
        found = j;
        break;
      }
      const uint64_t w = store.word(s);
      if (((w ^ last) & ~BlockStore::kRef) == 0) {  // see `last`
        if (!(w & BlockStore::kRef)) store.set_ref(s);
        continue;
      }
      if (BlockStore::IsNode(w) && defer) {
        store.PrefetchChain(s);
        pending.push_back({static_cast<uint32_t>(j), s, false});
        continue;
      }
      last = w;
      if (at != j) Advance(gen | j);
      at = j;
      if (j == 0 ? !Start(s, now) : !Step(s, gen | j, now)) {
        found = j;
        break;
      }
      at = j + 1;
    }
    if (at != found) Advance(gen | found);
    // The probes that run on go one line further per pass, all of them together, so that a
    // run of several lines costs one wait per line, not one per line and block.
    for (bool more = true; more;) {
      more = false;
      for (Deferred& d : pending) {
        if (!d.probe) continue;
        const uint32_t s = store.FindInLine(d.slot, key[size_t{d.block} * n]);
        if (s == BlockStore::kMore) {
          d.slot = store.NextLine(d.slot);
          store.PrefetchSlot(d.slot);
          more = true;
        } else {
          d.slot = s;
          d.probe = false;
        }
      }
    }
    // A deferred block right after another with the same payloads: the runs that went through
    // the first hold it too, with the flags they gathered, so Resolve would change no run. (A
    // run that went through the first went on past the second: the walk ends after both.)
    const Deferred* prev = nullptr;
    bool any = false;
    for (const Deferred& d : pending) {
      if (prev != nullptr && d.block == prev->block + 1 && d.slot != BlockStore::kNone &&
          prev->slot != BlockStore::kNone && store.SameEntries(d.slot, prev->slot)) {
        if (any && !store.ref(d.slot)) store.set_ref(d.slot);
      } else {
        any = Resolve(d.block, d.slot, now);
      }
      prev = &d;
    }
    out->reserve(matched.size());
    for (HolderId h : matched) {
      const Holder& hs = holders[h];
      const uint32_t len = static_cast<uint32_t>(hs.run);
      out->push_back({.holder = h,
                      .matched_blocks = len * static_cast<uint32_t>(n),
                      .suspect = hs.suspect_from < len,
                      .provisional = hs.prov_from < len});
    }
    std::sort(out->begin(), out->end(),
              [](const PrefixMatch& a, const PrefixMatch& b) { return a.holder < b.holder; });
  }
};

PrefixIndex::PrefixIndex(PrefixIndexOptions options) : impl_(std::make_unique<Impl>(options)) {}
PrefixIndex::~PrefixIndex() = default;
PrefixIndex::PrefixIndex(PrefixIndex&&) noexcept = default;
PrefixIndex& PrefixIndex::operator=(PrefixIndex&&) noexcept = default;

SequenceVerdict PrefixIndex::ObserveSequence(PublisherId publisher, uint64_t seq) {
  auto [it, inserted] = impl_->publishers.try_emplace(publisher, seq);
  if (inserted) return SequenceVerdict::kInOrder;
  const uint64_t last = it->second;
  it->second = seq;
  if (seq <= last) return SequenceVerdict::kRestart;
  return seq == last + 1 ? SequenceVerdict::kInOrder : SequenceVerdict::kGap;
}

void PrefixIndex::Stored(HolderId holder, uint32_t first_position, std::span<const BlockKey> blocks,
                         Nanos now) {
  Impl& m = *impl_;
  if (holder >= kMaxHolders || m.opt.max_entries == 0) return;
  m.Expire(now);
  const uint64_t word = MakeWord(holder, false, m.EnsureHolder(holder).epoch);
  m.Upsert(holder, first_position, blocks, word);
}

void PrefixIndex::AddProvisional(HolderId holder, uint32_t first_position,
                                 std::span<const BlockKey> blocks, Nanos now) {
  Impl& m = *impl_;
  if (holder >= kMaxHolders || m.opt.max_entries == 0) return;
  m.Expire(now);
  m.EnsureHolder(holder);
  const Nanos ttl = m.opt.provisional_ttl;
  const Nanos expiry = ttl > 0 && now > kNanosInfinite - ttl ? kNanosInfinite : now + ttl;
  const uint64_t serial = m.next_serial++;
  m.batches.push_back({.expiry = expiry, .holder = holder, .live = 0});
  m.Upsert(holder, first_position, blocks, MakeWord(holder, true, serial));
}

void PrefixIndex::Removed(HolderId holder, std::span<const BlockKey> blocks) {
  Impl& m = *impl_;
  if (holder >= m.holders.size()) return;
  for (BlockKey key : blocks) {
    const uint32_t s = m.store.Find(key);
    if (s == BlockStore::kNone) continue;  // never indexed (index_every), evicted or unknown
    m.store.RemoveIf(s, [&](uint64_t p) {
      if (HolderOf(p) != holder) return false;
      m.Unaccount(p);
      return true;
    });
  }
  m.Sweep(2 * blocks.size());
}

void PrefixIndex::Cleared(HolderId holder) {
  Impl& m = *impl_;
  if (holder >= m.holders.size()) return;
  Impl::Holder& hs = m.holders[holder];
  m.live -= hs.live;
  m.garbage += hs.live;
  hs.live = 0;
  hs.clear_floor = ++hs.epoch;
  hs.prov_clear_floor = m.next_serial;
}

void PrefixIndex::MarkSuspect(HolderId holder) {
  Impl& m = *impl_;
  if (holder >= m.holders.size()) return;
  Impl::Holder& hs = m.holders[holder];
  hs.suspect_floor = ++hs.epoch;
  hs.prov_suspect_floor = m.next_serial;
}

void PrefixIndex::Match(std::span<const BlockKey> blocks, Nanos now,
                        std::vector<PrefixMatch>* out) {
  impl_->Match(blocks, now, out);
}

size_t PrefixIndex::entries() const { return impl_->live; }
size_t PrefixIndex::blocks() const { return impl_->store.size(); }

size_t PrefixIndex::memory_bytes() const {
  const Impl& m = *impl_;
  // The deque allocates 512-byte blocks; the hash map one byte of control per slot.
  const size_t batch_bytes = (m.batches.size() * sizeof(Impl::ProvBatch) / 512 + 1) * 512;
  return sizeof(Impl) + m.store.memory_bytes() + m.holders.capacity() * sizeof(Impl::Holder) +
         batch_bytes + m.publishers.capacity() * (sizeof(std::pair<PublisherId, uint64_t>) + 1) +
         (m.homes.capacity() + m.matched.capacity() + m.running.capacity()) * sizeof(uint32_t) +
         m.pending.capacity() * sizeof(Impl::Deferred);
}

}  // namespace myriad::policy
