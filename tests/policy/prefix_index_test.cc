#include "policy/prefix_index.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "core/rng.h"
#include "prefix_index_model.h"

namespace myriad::policy {
namespace {

using test::Model;
using test::Str;

// A chain of `n` block keys, distinct per `seed`.
std::vector<BlockKey> Chain(uint64_t seed, size_t n) {
  std::vector<BlockKey> keys;
  BlockKey parent = kRootBlockKey;
  for (size_t i = 0; i < n; ++i) {
    parent = HashContentBlock(parent, seed * 1'000'003 + i);
    keys.push_back(parent);
  }
  return keys;
}

std::span<const BlockKey> Sub(const std::vector<BlockKey>& v, size_t from, size_t to) {
  return std::span<const BlockKey>(v).subspan(from, to - from);
}

// holder -> matched_blocks, for compact expectations.
std::map<HolderId, uint32_t> Lengths(PrefixIndex& index, std::span<const BlockKey> query,
                                     Nanos now = 0) {
  std::vector<PrefixMatch> out;
  index.Match(query, now, &out);
  std::map<HolderId, uint32_t> m;
  for (const PrefixMatch& pm : out) m[pm.holder] = pm.matched_blocks;
  return m;
}

PrefixMatch Only(PrefixIndex& index, std::span<const BlockKey> query, Nanos now) {
  std::vector<PrefixMatch> out;
  index.Match(query, now, &out);
  EXPECT_EQ(out.size(), 1u);
  return out.empty() ? PrefixMatch{} : out[0];
}

using L = std::map<HolderId, uint32_t>;

TEST(PrefixIndex, LongestPrefixPerHolderOrderedByHolder) {
  PrefixIndex index;
  const auto c = Chain(1, 10);
  index.Stored(9, 0, Sub(c, 0, 4), 0);
  index.Stored(2, 0, Sub(c, 0, 10), 0);
  // Stored in two events: the second names its first block's position.
  index.Stored(5, 0, Sub(c, 0, 2), 0);
  index.Stored(5, 2, Sub(c, 2, 6), 0);
  std::vector<PrefixMatch> out;
  index.Match(c, 0, &out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].holder, 2u);
  EXPECT_EQ(out[1].holder, 5u);
  EXPECT_EQ(out[2].holder, 9u);
  EXPECT_EQ(Lengths(index, c), (L{{2, 10}, {5, 6}, {9, 4}}));
  EXPECT_EQ(Lengths(index, Sub(c, 0, 3)), (L{{2, 3}, {5, 3}, {9, 3}}));
  EXPECT_TRUE(Lengths(index, Chain(2, 10)).empty());
  EXPECT_EQ(index.entries(), 20u);
  EXPECT_EQ(index.blocks(), 10u);
  // Storing the same blocks again changes nothing.
  index.Stored(2, 0, Sub(c, 0, 10), 0);
  EXPECT_EQ(index.entries(), 20u);
  EXPECT_EQ(index.blocks(), 10u);
}

TEST(PrefixIndex, HolesEndThePrefix) {
  PrefixIndex index;
  const auto c = Chain(3, 8);
  index.Stored(1, 0, Sub(c, 0, 3), 0);
  index.Stored(1, 4, Sub(c, 4, 8), 0);  // position 3 missing
  index.Stored(2, 1, Sub(c, 1, 8), 0);  // position 0 missing: no prefix at all
  EXPECT_EQ(Lengths(index, c), (L{{1, 3}}));
  index.Stored(1, 3, Sub(c, 3, 4), 0);
  EXPECT_EQ(Lengths(index, c), (L{{1, 8}}));
}

TEST(PrefixIndex, IndexEveryNthBlockCountsInCallerUnits) {
  PrefixIndex index({.index_every = 4});
  const auto c = Chain(4, 10);
  index.Stored(1, 0, c, 0);
  EXPECT_EQ(index.blocks(), 2u);  // positions 3 and 7
  EXPECT_EQ(index.entries(), 2u);
  EXPECT_EQ(Lengths(index, c), (L{{1, 8}}));
  EXPECT_EQ(Lengths(index, Sub(c, 0, 7)), (L{{1, 4}}));
  EXPECT_TRUE(Lengths(index, Sub(c, 0, 3)).empty());
  // An event starting at position 5 indexes only position 7.
  index.Stored(2, 5, Sub(c, 5, 10), 0);
  EXPECT_EQ(index.entries(), 3u);
  EXPECT_TRUE(Lengths(index, c).count(2) == 0);  // holder 2 lacks position 3
  index.Stored(2, 0, Sub(c, 0, 4), 0);
  EXPECT_EQ(Lengths(index, c), (L{{1, 8}, {2, 8}}));
  // Removing a block that was never indexed changes nothing; an indexed one ends the prefix.
  index.Removed(1, Sub(c, 4, 5));
  EXPECT_EQ(index.entries(), 4u);
  index.Removed(1, Sub(c, 7, 8));
  EXPECT_EQ(Lengths(index, c), (L{{1, 4}, {2, 8}}));
  EXPECT_EQ(index.entries(), 3u);
}

TEST(PrefixIndex, RemovedShortensThePrefixAndAccounts) {
  PrefixIndex index;
  const auto c = Chain(5, 6);
  index.Stored(1, 0, c, 0);
  index.Stored(2, 0, Sub(c, 0, 3), 0);
  EXPECT_EQ(index.entries(), 9u);
  index.Removed(1, Sub(c, 4, 6));
  EXPECT_EQ(Lengths(index, c), (L{{1, 4}, {2, 3}}));
  EXPECT_EQ(index.entries(), 7u);
  EXPECT_EQ(index.blocks(), 4u);
  index.Removed(3, c);  // a holder that holds nothing
  index.Removed(2, Sub(c, 0, 1));
  EXPECT_EQ(Lengths(index, c), (L{{1, 4}}));
  EXPECT_EQ(index.entries(), 6u);
  EXPECT_EQ(index.blocks(), 4u);
  index.Removed(1, c);
  EXPECT_EQ(index.entries(), 2u);  // holder 2's positions 1 and 2
  EXPECT_EQ(index.blocks(), 2u);
  EXPECT_TRUE(Lengths(index, c).empty());
}

TEST(PrefixIndex, ClearedDropsEveryEntryOfTheHolderAtOnce) {
  PrefixIndex index;
  const auto a = Chain(6, 20);
  const auto b = Chain(7, 5);
  index.Stored(1, 0, a, 0);
  index.Stored(2, 0, Sub(a, 0, 5), 0);
  index.Stored(1, 0, b, 0);
  index.AddProvisional(1, 0, Chain(8, 3), 0);
  EXPECT_EQ(index.entries(), 33u);
  index.Cleared(1);
  EXPECT_EQ(index.entries(), 5u);
  EXPECT_EQ(Lengths(index, a), (L{{2, 5}}));
  EXPECT_TRUE(Lengths(index, b).empty());
  EXPECT_TRUE(Lengths(index, Chain(8, 3)).empty());
  // The holder starts afresh; its old entries stay invisible.
  index.Stored(1, 0, Sub(a, 0, 2), 0);
  EXPECT_EQ(Lengths(index, a), (L{{1, 2}, {2, 5}}));
  EXPECT_EQ(index.entries(), 7u);
  // Reclamation is lazy; further operations sweep the garbage so blocks() converges.
  const auto c = Chain(9, 40);
  index.Stored(3, 0, c, 0);
  index.Removed(3, c);
  EXPECT_EQ(index.entries(), 7u);
  EXPECT_EQ(index.blocks(), 5u);
  index.Cleared(42);  // unknown holder: nothing happens
  EXPECT_EQ(index.entries(), 7u);
}

TEST(PrefixIndex, ObserveSequenceVerdicts) {
  PrefixIndex index;
  EXPECT_EQ(index.ObserveSequence(7, 100), SequenceVerdict::kInOrder);  // first seen
  EXPECT_EQ(index.ObserveSequence(7, 101), SequenceVerdict::kInOrder);
  EXPECT_EQ(index.ObserveSequence(7, 105), SequenceVerdict::kGap);
  EXPECT_EQ(index.ObserveSequence(7, 106), SequenceVerdict::kInOrder);
  EXPECT_EQ(index.ObserveSequence(7, 106), SequenceVerdict::kRestart);
  EXPECT_EQ(index.ObserveSequence(7, 0), SequenceVerdict::kRestart);
  EXPECT_EQ(index.ObserveSequence(7, 1), SequenceVerdict::kInOrder);
  EXPECT_EQ(index.ObserveSequence(8, 0), SequenceVerdict::kInOrder);  // publishers are separate
  EXPECT_EQ(index.ObserveSequence(8, 2), SequenceVerdict::kGap);
  EXPECT_EQ(index.ObserveSequence(7, 2), SequenceVerdict::kInOrder);
}

TEST(PrefixIndex, RestartThenCallerClears) {
  PrefixIndex index;
  const auto c = Chain(10, 4);
  ASSERT_EQ(index.ObserveSequence(3, 0), SequenceVerdict::kInOrder);
  index.Stored(3, 0, c, 0);
  ASSERT_EQ(index.ObserveSequence(3, 1), SequenceVerdict::kInOrder);
  index.Stored(4, 0, c, 0);
  // The engine restarted: its sequence starts at 0 again.
  ASSERT_EQ(index.ObserveSequence(3, 0), SequenceVerdict::kRestart);
  index.Cleared(3);
  EXPECT_EQ(Lengths(index, c), (L{{4, 4}}));
  EXPECT_EQ(index.entries(), 4u);
}

TEST(PrefixIndex, GapMarksSuspectUntilStoredAgain) {
  PrefixIndex index;
  const auto c = Chain(11, 10);
  index.Stored(1, 0, c, 0);
  index.Stored(2, 0, c, 0);
  ASSERT_EQ(index.ObserveSequence(1, 0), SequenceVerdict::kInOrder);
  ASSERT_EQ(index.ObserveSequence(1, 5), SequenceVerdict::kGap);
  index.MarkSuspect(1);
  std::vector<PrefixMatch> out;
  index.Match(c, 0, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].suspect);
  EXPECT_EQ(out[0].matched_blocks, 10u);
  EXPECT_FALSE(out[1].suspect);
  EXPECT_EQ(index.entries(), 20u);
  // Re-stored blocks are trusted again; the rest stay suspect.
  index.Stored(1, 0, Sub(c, 0, 5), 0);
  index.Match(Sub(c, 0, 5), 0, &out);
  EXPECT_FALSE(out[0].suspect);
  index.Match(c, 0, &out);
  EXPECT_TRUE(out[0].suspect);
  // Blocks stored after the gap are not suspect; a later gap marks them too.
  const auto d = Chain(12, 3);
  index.Stored(1, 0, d, 0);
  EXPECT_FALSE(Only(index, d, 0).suspect);
  index.MarkSuspect(1);
  EXPECT_TRUE(Only(index, d, 0).suspect);
  index.Stored(1, 0, d, 0);
  EXPECT_FALSE(Only(index, d, 0).suspect);
  EXPECT_EQ(index.entries(), 23u);
}

TEST(PrefixIndex, ProvisionalCountsUntilTtlThenExpires) {
  PrefixIndex index({.provisional_ttl = 2 * kSecond});
  const auto c = Chain(13, 8);
  const Nanos t0 = 100 * kSecond;
  index.AddProvisional(1, 0, c, t0);
  EXPECT_EQ(index.entries(), 8u);
  PrefixMatch m = Only(index, c, t0 + kSecond);
  EXPECT_EQ(m.matched_blocks, 8u);
  EXPECT_TRUE(m.provisional);
  EXPECT_EQ(Only(index, c, t0 + 2 * kSecond - 1).matched_blocks, 8u);
  EXPECT_TRUE(Lengths(index, c, t0 + 2 * kSecond).empty());
  EXPECT_EQ(index.entries(), 0u);
  // Expired entries are reclaimed by later operations.
  index.Stored(2, 0, Chain(14, 30), t0 + 3 * kSecond);
  EXPECT_EQ(index.entries(), 30u);
  EXPECT_EQ(index.blocks(), 30u);
}

TEST(PrefixIndex, StoredConfirmsProvisional) {
  PrefixIndex index({.provisional_ttl = 2 * kSecond});
  const auto c = Chain(15, 8);
  index.Stored(1, 0, Sub(c, 0, 2), 0);
  index.AddProvisional(1, 0, c, 0);  // the confirmed prefix stays confirmed
  EXPECT_EQ(index.entries(), 8u);
  EXPECT_FALSE(Only(index, Sub(c, 0, 2), 0).provisional);
  index.Stored(1, 2, Sub(c, 2, 4), kSecond / 2);
  EXPECT_EQ(index.entries(), 8u);
  PrefixMatch m = Only(index, c, kSecond);
  EXPECT_EQ(m.matched_blocks, 8u);
  EXPECT_TRUE(m.provisional);
  m = Only(index, Sub(c, 0, 4), kSecond);
  EXPECT_FALSE(m.provisional);
  m = Only(index, c, 5 * kSecond);
  EXPECT_EQ(m.matched_blocks, 4u);
  EXPECT_FALSE(m.provisional);
  EXPECT_EQ(index.entries(), 4u);
  // A newer prediction of the same blocks extends the deadline.
  index.AddProvisional(1, 0, c, 10 * kSecond);
  index.AddProvisional(1, 0, c, 11 * kSecond);
  EXPECT_EQ(index.entries(), 8u);
  EXPECT_EQ(Only(index, c, 12 * kSecond + 1).matched_blocks, 8u);
  EXPECT_EQ(Only(index, c, 13 * kSecond).matched_blocks, 4u);
  EXPECT_EQ(index.entries(), 4u);
  // Cleared drops provisional entries too, and their later expiry is not counted twice.
  index.AddProvisional(2, 0, c, 20 * kSecond);
  index.Stored(3, 0, c, 20 * kSecond);
  index.Cleared(2);
  EXPECT_EQ(index.entries(), 12u);
  EXPECT_EQ(Lengths(index, c, 30 * kSecond), (L{{1, 4}, {3, 8}}));
  EXPECT_EQ(index.entries(), 12u);
}

TEST(PrefixIndex, EvictionKeepsRecentlyUsedBlocks) {
  constexpr size_t kCap = 1000;
  PrefixIndex index({.max_entries = kCap});
  std::vector<std::vector<BlockKey>> old;
  for (size_t i = 0; i < kCap; ++i) {
    old.push_back(Chain(1000 + i, 1));
    index.Stored(1, 0, old.back(), 0);
  }
  // The first eviction: the hand clears the referenced bit of every block it passes.
  index.Stored(1, 0, Chain(5000, 1), 0);
  EXPECT_EQ(index.entries(), kCap);
  EXPECT_EQ(index.blocks(), kCap);
  // Use a fifth of the old blocks again, half by Match and half by Stored.
  std::set<size_t> used;
  for (size_t i = 0; i < kCap; i += 5) {
    if (i % 10 == 0) {
      Lengths(index, old[i]);
    } else {
      index.Stored(1, 0, old[i], 0);
    }
    used.insert(i);
  }
  for (size_t i = 0; i < kCap / 2; ++i) {
    index.Stored(1, 0, Chain(6000 + i, 1), 0);
    ASSERT_EQ(index.entries(), kCap);
  }
  size_t used_alive = 0, unused_alive = 0, fresh_alive = 0;
  for (size_t i = 0; i < kCap; ++i) {
    const bool alive = !Lengths(index, old[i]).empty();
    (used.count(i) ? used_alive : unused_alive) += alive;
  }
  for (size_t i = 0; i < kCap / 2; ++i) fresh_alive += !Lengths(index, Chain(6000 + i, 1)).empty();
  // CLOCK is an approximate LRU: nearly every used block survives, and the evictions fell on
  // the unused ones (FIFO or random eviction would lose about half of the used blocks).
  EXPECT_GE(used_alive, used.size() * 97 / 100);
  EXPECT_GE(fresh_alive, kCap / 2 * 97 / 100);
  EXPECT_LE(unused_alive, (kCap - used.size()) / 2);
  EXPECT_EQ(used_alive + unused_alive + fresh_alive, kCap - 1);  // + Chain(5000)'s block
}

TEST(PrefixIndex, EvictionDropsWholeBlocks) {
  PrefixIndex index({.max_entries = 6});
  const auto a = Chain(20, 2);
  for (HolderId h = 1; h <= 3; ++h) index.Stored(h, 0, a, 0);
  EXPECT_EQ(index.entries(), 6u);
  index.Stored(4, 0, Chain(21, 1), 0);
  EXPECT_EQ(index.entries(), 4u);  // one block of a, with its three holders, went
  EXPECT_EQ(index.blocks(), 2u);
  index.Stored(4, 0, Chain(22, 3), 0);
  EXPECT_LE(index.entries(), 6u);
  PrefixIndex none({.max_entries = 0});
  none.Stored(1, 0, a, 0);
  EXPECT_EQ(none.entries(), 0u);
}

TEST(PrefixIndex, ManyHoldersPerBlock) {
  PrefixIndex index;
  const auto c = Chain(30, 8);
  L want;
  size_t total = 0;
  for (HolderId h = 0; h < 100; ++h) {
    const uint32_t len = h % 8 + 1;
    index.Stored(h, 0, Sub(c, 0, len), 0);
    want[h] = len;
    total += len;
  }
  EXPECT_EQ(Lengths(index, c), want);
  EXPECT_EQ(index.entries(), total);
  index.Removed(50, Sub(c, 0, 1));
  want.erase(50);
  index.Removed(63, Sub(c, 3, 4));
  want[63] = 3;
  index.Cleared(7);
  want.erase(7);
  index.MarkSuspect(9);
  EXPECT_EQ(Lengths(index, c), want);
  EXPECT_EQ(index.entries(), total - 1 - 1 - 8);
  std::vector<PrefixMatch> out;
  index.Match(c, 0, &out);
  for (const PrefixMatch& m : out) EXPECT_EQ(m.suspect, m.holder == 9) << m.holder;
  for (HolderId h = 0; h < 100; ++h) index.Removed(h, c);
  EXPECT_EQ(index.entries(), 0u);
  EXPECT_TRUE(Lengths(index, c).empty());
}

// One random operation applied to the index and the model alike.
enum class Op { kStore, kProvisional, kRemove, kClear, kSuspect };
void Apply(PrefixIndex& index, Model& model, Op op, HolderId h, const std::vector<BlockKey>& c,
           size_t from, size_t to, Nanos now) {
  switch (op) {
    case Op::kStore:
      index.Stored(h, static_cast<uint32_t>(from), Sub(c, from, to), now);
      model.Stored(h, static_cast<uint32_t>(from), Sub(c, from, to), now);
      break;
    case Op::kProvisional:
      index.AddProvisional(h, 0, Sub(c, 0, to), now);
      model.AddProvisional(h, 0, Sub(c, 0, to), now);
      break;
    case Op::kRemove:
      index.Removed(h, Sub(c, from, to));
      model.Removed(h, Sub(c, from, to));
      break;
    case Op::kClear:
      index.Cleared(h);
      model.Cleared(h);
      break;
    case Op::kSuspect:
      index.MarkSuspect(h);
      model.MarkSuspect(h);
      break;
  }
}

// Random operations against the model; returns a digest of every answer, for determinism.
std::string RunRandom(uint64_t seed, int every, size_t* checked) {
  const Nanos ttl = 2 * kSecond;
  PrefixIndex index({.index_every = every, .provisional_ttl = ttl});
  Model model(every, ttl);
  Rng rng(seed);
  std::vector<std::vector<BlockKey>> chains;
  for (int i = 0; i < 6; ++i) chains.push_back(Chain(seed * 100 + i, 16));
  Nanos now = 0;
  std::string digest;
  for (int step = 0; step < 4000; ++step) {
    now += static_cast<Nanos>(rng.Below(400)) * kMillisecond;
    const auto& c = chains[rng.Below(chains.size())];
    const HolderId h = static_cast<HolderId>(rng.Below(9));
    const size_t from = rng.Below(c.size());
    const size_t to = from + 1 + rng.Below(c.size() - from);
    const int op = static_cast<int>(rng.Below(10));
    switch (op) {
      case 0:
      case 1:
      case 2:
        Apply(index, model, Op::kStore, h, c, from, to, now);
        break;
      case 3:
        Apply(index, model, Op::kProvisional, h, c, from, to, now);
        break;
      case 4:
        Apply(index, model, Op::kRemove, h, c, from, to, now);
        break;
      case 5:
        Apply(index, model, rng.Below(4) == 0 ? Op::kClear : Op::kSuspect, h, c, from, to, now);
        break;
      default: {
        std::vector<PrefixMatch> got;
        index.Match(Sub(c, 0, to), now, &got);
        const std::string want = Str(model.Match(Sub(c, 0, to), now));
        EXPECT_EQ(Str(got), want) << "step " << step;
        digest += Str(got);
        ++*checked;
      }
    }
    EXPECT_EQ(index.entries(), model.entries()) << "step " << step;
    EXPECT_GE(index.blocks(), model.blocks()) << "step " << step;
    if (::testing::Test::HasFailure()) break;
  }
  return digest;
}

TEST(PrefixIndex, MatchesAReferenceModelUnderRandomOperations) {
  size_t checked = 0;
  RunRandom(1, 1, &checked);
  RunRandom(2, 3, &checked);
  EXPECT_GT(checked, 2000u);
}

// The same model check with holders whose entries take every storage form: small ids with
// small or larger stamps (two of them share a slot), ids too large for the compact form, and a
// holder whose stamps grew too large for it (many gaps before the test), on the same blocks.
TEST(PrefixIndex, MatchesTheModelAcrossEntryForms) {
  const Nanos ttl = 2 * kSecond;
  size_t checked = 0;
  for (uint64_t seed : {11, 12, 13}) {
    const int every = seed == 13 ? 2 : 1;
    // Seed 13 also has blocks with many holders (Match then walks without deferring).
    std::vector<HolderId> ids = {1, 2, 3, 70'000, 200'000, 4};
    for (HolderId h = 10; seed == 13 && h < 40; ++h) ids.push_back(h);
    PrefixIndex index({.index_every = every, .provisional_ttl = ttl});
    Model model(every, ttl);
    // The holders exist (once stored) but hold nothing, so the model has nothing to mark.
    const auto once = Chain(seed, 1);
    for (HolderId h : {3, 4}) {
      index.Stored(h, 0, once, 0);
      index.Removed(h, once);
    }
    for (int i = 0; i < 5'000; ++i) index.MarkSuspect(3);
    for (int i = 0; i < 20'000; ++i) index.MarkSuspect(4);
    Rng rng(seed);
    std::vector<std::vector<BlockKey>> chains;
    for (int i = 0; i < 5; ++i) chains.push_back(Chain(seed * 100 + i, 12));
    Nanos now = 0;
    for (int step = 0; step < 6000; ++step) {
      now += static_cast<Nanos>(rng.Below(200)) * kMillisecond;
      const auto& c = chains[rng.Below(chains.size())];
      const HolderId h = ids[rng.Below(ids.size())];
      const size_t from = rng.Below(c.size());
      const size_t to = from + 1 + rng.Below(c.size() - from);
      switch (rng.Below(12)) {
        case 0:
        case 1:
        case 2:
        case 3:
          Apply(index, model, Op::kStore, h, c, from, to, now);
          break;
        case 4:
          Apply(index, model, Op::kProvisional, h, c, from, to, now);
          break;
        case 5:
          Apply(index, model, Op::kRemove, h, c, from, to, now);
          break;
        case 6:
          if (rng.Below(6) == 0) {
            Apply(index, model, Op::kClear, h, c, from, to, now);
          } else if (rng.Below(3) == 0) {
            Apply(index, model, Op::kSuspect, h, c, from, to, now);
          }
          break;
        default: {
          std::vector<PrefixMatch> got;
          index.Match(Sub(c, 0, to), now, &got);
          EXPECT_EQ(Str(got), Str(model.Match(Sub(c, 0, to), now))) << "step " << step;
          ++checked;
        }
      }
      EXPECT_EQ(index.entries(), model.entries()) << "step " << step;
      if (::testing::Test::HasFailure()) return;
    }
  }
  EXPECT_GT(checked, 5000u);
}

// Long chains held by many holders with holes and suspect marks: Match over blocks whose
// key sits beyond its home line, with more runs than Match defers blocks for.
TEST(PrefixIndex, ManyHoldersOnLongChainsMatchTheModel) {
  const Nanos ttl = 2 * kSecond;
  for (int holders : {6, 40}) {
    PrefixIndex index({.provisional_ttl = ttl});
    Model model(1, ttl);
    Rng rng(static_cast<uint64_t>(holders));
    std::vector<std::vector<BlockKey>> chains;
    for (int i = 0; i < 6; ++i) chains.push_back(Chain(700 + i, 96));
    for (const auto& c : chains) {
      for (HolderId h = 0; h < static_cast<HolderId>(holders); ++h) {
        const size_t len = 1 + rng.Below(c.size());
        index.Stored(h, 0, Sub(c, 0, len), 0);
        model.Stored(h, 0, Sub(c, 0, len), 0);
        if (rng.Below(3) == 0) {
          const size_t hole = rng.Below(len);
          index.Removed(h, Sub(c, hole, hole + 1));
          model.Removed(h, Sub(c, hole, hole + 1));
        }
        if (rng.Below(8) == 0) {
          index.MarkSuspect(h);
          model.MarkSuspect(h);
        }
      }
    }
    for (const auto& c : chains) {
      std::vector<PrefixMatch> got;
      index.Match(c, 0, &got);
      EXPECT_EQ(Str(got), Str(model.Match(c, 0))) << holders << " holders";
    }
  }
}

TEST(PrefixIndex, Deterministic) {
  size_t checked = 0;
  EXPECT_EQ(RunRandom(5, 1, &checked), RunRandom(5, 1, &checked));
  PrefixIndex a({.max_entries = 500}), b({.max_entries = 500});
  for (PrefixIndex* x : {&a, &b}) {
    for (int i = 0; i < 300; ++i) x->Stored(i % 7, 0, Chain(i % 97, 8), i);
  }
  EXPECT_EQ(a.entries(), b.entries());
  EXPECT_EQ(a.blocks(), b.blocks());
  EXPECT_EQ(a.memory_bytes(), b.memory_bytes());
  for (int i = 0; i < 97; ++i) {
    std::vector<PrefixMatch> x, y;
    a.Match(Chain(i, 8), 0, &x);
    b.Match(Chain(i, 8), 0, &y);
    EXPECT_EQ(Str(x), Str(y));
  }
}

TEST(PrefixIndex, EvictionKeepsTheBoundUnderRandomLoad) {
  PrefixIndex index({.max_entries = 1000, .provisional_ttl = kSecond});
  Rng rng(9);
  for (int i = 0; i < 20000; ++i) {
    const auto c = Chain(rng.Below(400), 1 + rng.Below(20));
    const HolderId h = static_cast<HolderId>(rng.Below(6));
    const Nanos now = i * kMillisecond;
    switch (rng.Below(8)) {
      case 0:
        index.AddProvisional(h, 0, c, now);
        break;
      case 1:
        if (rng.Below(50) == 0) index.Cleared(h);
        break;
      case 2:
        index.Removed(h, c);
        break;
      default:
        index.Stored(h, 0, c, now);
    }
    ASSERT_LE(index.entries(), 1000u);
    ASSERT_LE(index.blocks(), 1000u);
  }
  EXPECT_GT(index.entries(), 500u);
}

TEST(PrefixIndex, MemoryPerEntryAtScale) {
  PrefixIndex index;
  for (uint64_t i = 0; i < 20000; ++i)
    index.Stored(static_cast<HolderId>(i % 16), 0, Chain(i, 16), 0);
  EXPECT_EQ(index.entries(), 320000u);
  EXPECT_LE(static_cast<double>(index.memory_bytes()) / index.entries(), 32.0);
}

}  // namespace
}  // namespace myriad::policy
