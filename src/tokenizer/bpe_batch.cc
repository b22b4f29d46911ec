// BpeModel::MergeMany: the merge loop of MergeLinear run on several words in turn, one merge
// of each per round. A merge's new pairs are looked up in the word's next round, their table
// slots prefetched now, so the misses of a round's words overlap instead of following one
// another; the lowest rank is found 4 pairs at a time. Short words (most of a prompt's new
// ones) have lanes of their own with a fixed width, where a round takes no branch that depends
// on the word: at 16 lanes, such branches (is there a symbol before the merge? after it?)
// were mispredicted often enough to cost a fifth of the merge time.
#include <algorithm>
#include <climits>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "tokenizer/bpe.h"

namespace myriad::tokenizer {
namespace {

// Words in flight: enough that a round's work covers a miss to the last-level cache.
constexpr size_t kLanes = 16;
constexpr int32_t kNoMerge = INT32_MAX;

int32_t LaneRank(uint32_t rank) { return rank >= static_cast<uint32_t>(kNoMerge) ? kNoMerge : static_cast<int32_t>(rank); }

typedef int32_t V4si __attribute__((vector_size(16)));

#ifdef __SSE2__
// Lane-wise minimum of signed 32-bit integers, written generically so that each clone of a
// caller compiled for SSE4.1 (see MergeLanes) takes its pminsd; SSE2 has no such instruction
// and gets a compare and a blend.
inline __m128i Lower(__m128i a, __m128i b) {
  const auto x = reinterpret_cast<V4si>(a), y = reinterpret_cast<V4si>(b);
  return reinterpret_cast<__m128i>(x < y ? x : y);
}
#endif

// A short lane's pair as one number, rank << 4 | position: the lowest key is the lowest rank's
// leftmost pair, found by one minimum and no search for where it is. A narrow rank is below
// 2^20, and a pair that does not merge (rank kNone) has a key of at least kNoShortKey, with no
// branch. A position above 15 (a scratch slot) only ever comes with kNone.
constexpr int kShortKeyBits = 4;
constexpr uint32_t kNoShortKey = ~uint32_t{0} << kShortKeyBits;
static_assert(kShortMax == 1 << kShortKeyBits);
inline uint32_t ShortKey(uint32_t rank, uint32_t pos) { return rank << kShortKeyBits | pos; }

// The lowest of 16 keys (64-byte aligned), in vectors of 8: two AVX2 registers in
// MergeShort's x86-64-v3 clone, pairs of SSE4.1 ones in its x86-64-v2 clone.
typedef uint32_t V8su __attribute__((vector_size(32)));
typedef uint32_t V4su __attribute__((vector_size(16)));
inline uint32_t LowestOf16(const uint32_t* keys) {
  const auto* v = reinterpret_cast<const V8su*>(keys);
  const V8su a = v[0], b = v[1];
  const V8su m8 = a < b ? a : b;
  const V4su lo = __builtin_shufflevector(m8, m8, 0, 1, 2, 3), hi = __builtin_shufflevector(m8, m8, 4, 5, 6, 7);
  V4su m = lo < hi ? lo : hi;
  V4su t = __builtin_shufflevector(m, m, 2, 3, 0, 1);
  m = m < t ? m : t;
  t = __builtin_shufflevector(m, m, 1, 0, 3, 2);
  m = m < t ? m : t;
  return m[0];
}

// Gives every one of kLanes lanes a word (`load(lane)` is true) or marks it empty (kNone);
// returns how many hold one.
template <class Lane, class Load>
size_t FillLanes(std::vector<Lane>& lanes, Load&& load) {
  lanes.resize(kLanes);
  size_t active = 0;
  for (auto& lane : lanes) {
    if (load(lane)) {
      ++active;
    } else {
      lane.word = BpeModel::kNone;
    }
  }
  return active;
}

// Appends a lane's merged word (its symbols in order) to `ids`, records where, and loads the
// lane's next word; false when none is left (the lane is then marked empty, kNone). Inlined by
// force: GCC stopped inlining it into MergeShort's target clones.
template <class Lane, class Ids, class Spans, class Load>
[[gnu::always_inline]] inline bool FinishLane(Lane& lane, Ids& ids, Spans& spans, Load&& load) {
  const auto offset = static_cast<uint32_t>(ids.size());
  for (uint32_t i = 0; i < lane.n; i = lane.next[i]) ids.push_back(lane.ids[i]);
  spans[lane.word] = IdSpan{offset, static_cast<uint32_t>(ids.size() - offset)};
  if (load(lane)) return true;
  lane.word = BpeModel::kNone;
  return false;
}

// The position of the lowest of ranks[0, count), the leftmost of equals, or -1 when all are
// kNoMerge. ranks[count, count rounded up to 4) must be kNoMerge.
int ArgMin(const int32_t* ranks, uint32_t count) {
#ifdef __SSE2__
  const uint32_t chunks = (count + 3) / 4;
  __m128i m = _mm_set1_epi32(kNoMerge);
  for (uint32_t c = 0; c < chunks; ++c) m = Lower(m, _mm_loadu_si128(reinterpret_cast<const __m128i*>(ranks + 4 * c)));
  m = Lower(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  m = Lower(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
  if (_mm_cvtsi128_si32(m) == kNoMerge) return -1;
  uint64_t where = 0;  // bit 4c + j: ranks[4c + j] is the lowest
  for (uint32_t c = 0; c < chunks; ++c) {
    const __m128i eq = _mm_cmpeq_epi32(m, _mm_loadu_si128(reinterpret_cast<const __m128i*>(ranks + 4 * c)));
    where |= static_cast<uint64_t>(_mm_movemask_ps(_mm_castsi128_ps(eq))) << (4 * c);
  }
  return __builtin_ctzll(where);
#else
  int best = -1;
  int32_t best_rank = kNoMerge;
  for (uint32_t i = 0; i < count; ++i) {
    if (ranks[i] < best_rank) best = static_cast<int>(i), best_rank = ranks[i];
  }
  return best;
#endif
}

}  // namespace

__attribute__((target_clones("arch=x86-64-v3", "arch=x86-64-v2", "default")))
void BpeModel::MergeShort(std::span<const std::string_view> words, std::vector<uint32_t>& ids,
                          std::vector<IdSpan>& spans, BpeScratch& s) const {
  static_assert(kShortMax == 16, "LowestOf16 reads the keys of 16 pairs");
  using Lane = BpeScratch::ShortLane;
  s.rest.clear();
  size_t next_word = 0;
  // Starts the next word of 2..kShortMax bytes, all in the vocabulary, in `lane`; lists the
  // others in s.rest. False when no word is left.
  auto load = [&](Lane& lane) {
    while (next_word < words.size()) {
      const auto k = static_cast<uint32_t>(next_word++);
      const std::string_view word = words[k];
      const size_t n = word.size();
      bool bytes = n >= 2 && n <= kShortMax;
      for (size_t i = 0; bytes && i < n; ++i) {
        lane.ids[i] = byte_ids_[static_cast<uint8_t>(word[i])];
        bytes = lane.ids[i] != kNone;
      }
      if (!bytes) {
        s.rest.push_back(k);
        continue;
      }
      for (uint32_t& key : lane.keys) key = kNoShortKey;
      for (size_t i = 0; i < n; ++i) {
        lane.next[i] = static_cast<uint8_t>(i + 1);
        lane.prev[i] = static_cast<uint8_t>(i == 0 ? kShortMax + 1 : i - 1);
      }
      for (size_t i = 0; i + 1 < n; ++i) {
        lane.keys[i] = ShortKey(byte_pairs_[(static_cast<uint8_t>(word[i]) << 8) | static_cast<uint8_t>(word[i + 1])].rank,
                                 static_cast<uint32_t>(i));
      }
      lane.word = k;
      lane.n = static_cast<uint32_t>(n);
      lane.pending[0] = lane.pending[1] = kShortMax;
      lane.probes[0] = lane.probes[1] = merges_.StartNarrowIf(false, 0, 0);
      return true;
    }
    return false;
  };

  size_t active = FillLanes(s.short_lanes, load);
  while (active > 0) {
    for (auto& lane : s.short_lanes) {
      if (lane.word == kNone) continue;
      // The lowest key: over the stored ones (the pending two are kNoShortKey there), then the
      // two the last merge made. A key holds the position below the rank, so the lowest is
      // also the leftmost pair of the lowest rank (equal ranks are the same merge at several
      // places).
      const uint32_t p0 = lane.pending[0], p1 = lane.pending[1];
      const uint32_t k0 = ShortKey(merges_.FinishNarrow(lane.probes[0]), p0);
      const uint32_t k1 = ShortKey(merges_.FinishNarrow(lane.probes[1]), p1);
      const uint32_t low = std::min(LowestOf16(lane.keys), std::min(k0, k1));
      lane.keys[p0] = k0;
      lane.keys[p1] = k1;
      if (low >= kNoShortKey) {
        if (!FinishLane(lane, ids, spans, load)) --active;
        continue;
      }
      const uint32_t best = low & (kShortMax - 1);
      const uint32_t right = lane.next[best];
      const uint32_t after = lane.next[right];
      const uint32_t merged = low >> kShortKeyBits;  // narrow: the rank is the merged id
      lane.ids[best] = merged;
      lane.next[best] = static_cast<uint8_t>(after);
      lane.prev[after] = static_cast<uint8_t>(best);
      const uint32_t before = lane.prev[best];
      // Pair `right` is gone; pairs `best` and `before` are pending until the next round.
      lane.keys[right] = kNoShortKey;
      lane.keys[best] = kNoShortKey;
      lane.keys[before] = kNoShortKey;
      lane.pending[0] = best;
      lane.probes[0] = merges_.StartNarrowIf(after < lane.n, merged, lane.ids[after]);
      lane.pending[1] = before;
      lane.probes[1] = merges_.StartNarrowIf(before < kShortMax, lane.ids[before], merged);
    }
  }
}

__attribute__((target_clones("arch=x86-64-v2", "default")))
void BpeModel::MergeLanes(std::span<const std::string_view> words, const uint32_t* which, size_t count,
                          std::vector<uint32_t>& ids, std::vector<IdSpan>& spans, BpeScratch& s) const {
  static_assert(kLinearMax < 256 && kLinearMax % 4 == 0, "Lane's links are bytes; ArgMin reads 4 at a time");
  size_t next_word = 0;
  // Starts the next word that needs the merge loop in `lane`; words of at most one symbol and
  // long ones (the heap) are done on the spot. False when no word is left.
  auto load = [&](BpeScratch::Lane& lane) {
    while (next_word < count) {
      const size_t k = which == nullptr ? next_word : which[next_word];
      ++next_word;
      const std::string_view word = words[k];
      const size_t before = ids.size();
      size_t n = word.size();
      bool bytes = n <= kLinearMax;
      for (size_t i = 0; bytes && i < n; ++i) {
        lane.ids[i] = byte_ids_[static_cast<uint8_t>(word[i])];
        bytes = lane.ids[i] != kNone;
      }
      if (!bytes) {
        // Long, or bytes the vocabulary lacks (dropped): the general path.
        ByteIds(word, s);
        n = s.ids.size();
        if (n > kLinearMax) {
          MergeHeap(ids, s);
          spans[k] = IdSpan{static_cast<uint32_t>(before), static_cast<uint32_t>(ids.size() - before)};
          continue;
        }
        std::copy(s.ids.begin(), s.ids.end(), lane.ids);
      }
      if (n <= 1) {
        ids.insert(ids.end(), lane.ids, lane.ids + n);
        spans[k] = IdSpan{static_cast<uint32_t>(before), static_cast<uint32_t>(n)};
        continue;
      }
      lane.word = static_cast<uint32_t>(k);
      lane.n = static_cast<uint32_t>(n);
      lane.npending = 0;
      for (size_t i = 0; i < n; ++i) {
        lane.next[i] = static_cast<uint8_t>(i + 1);
        lane.prev[i] = static_cast<uint8_t>(i - 1);
      }
      for (size_t i = n - 1; i < ((n + 2) & ~size_t{3}); ++i) lane.ranks[i] = kNoMerge;
      if (bytes) {
        // One symbol per byte: the first merges come from the 256 x 256 table, which stays in
        // the processor's cache.
        for (size_t i = 0; i + 1 < n; ++i) {
          const MergeTable::Merge m =
              byte_pairs_[(static_cast<uint8_t>(word[i]) << 8) | static_cast<uint8_t>(word[i + 1])];
          lane.ranks[i] = LaneRank(m.rank);
          lane.results[i] = m.result;
        }
      } else {
        for (size_t i = 0; i + 1 < n; ++i) {
          const MergeTable::Merge m = merges_.Find(lane.ids[i], lane.ids[i + 1]);
          lane.ranks[i] = LaneRank(m.rank);
          lane.results[i] = m.result;
        }
      }
      return true;
    }
    return false;
  };

  size_t active = FillLanes(s.lanes, load);
  while (active > 0) {
    for (auto& lane : s.lanes) {
      if (lane.word == kNone) continue;
      if (lane.npending != 0) {
        // Both pairs a merge made, without branches on whether they exist (StartIf).
        for (uint32_t p = 0; p < 2; ++p) {
          const MergeTable::Merge m = merges_.Finish(lane.probes[p]);
          lane.ranks[lane.pending[p]] = LaneRank(m.rank);
          lane.results[lane.pending[p]] = m.result;
        }
        lane.npending = 0;
      }
      const int found = ArgMin(lane.ranks, lane.n - 1);
      if (found < 0) {
        if (!FinishLane(lane, ids, spans, load)) --active;
        continue;
      }
      const auto best = static_cast<uint32_t>(found);
      const uint32_t right = lane.next[best];
      const uint32_t after = lane.next[right];
      lane.ids[best] = lane.results[best];
      lane.ranks[right] = kNoMerge;
      lane.next[best] = static_cast<uint8_t>(after);
      // The new pairs (best, after) and (before, best), where they exist; a missing one reads
      // the table's empty slot, and the one before the first symbol goes to a scratch rank.
      const bool has_after = after < lane.n;
      const bool has_before = best > 0;
      const uint32_t after_id = lane.ids[has_after ? after : best];
      lane.prev[has_after ? after : kLinearMax] = static_cast<uint8_t>(best);
      const uint32_t before = has_before ? lane.prev[best] : 0;
      lane.pending[0] = best;
      lane.probes[0] = merges_.StartIf(has_after, lane.ids[best], after_id);
      lane.pending[1] = has_before ? before : kLinearMax + 3;
      lane.probes[1] = merges_.StartIf(has_before, lane.ids[before], lane.ids[best]);
      lane.npending = 2;
    }
  }
}

// After the multiversioned functions it calls: Clang refuses a function that becomes
// multiversioned after its first use.
void BpeModel::MergeMany(std::span<const std::string_view> words, std::vector<uint32_t>& ids,
                         std::vector<IdSpan>& spans, BpeScratch& s) const {
  spans.resize(words.size());
  if (!merges_.narrow()) {
    MergeLanes(words, nullptr, words.size(), ids, spans, s);
    return;
  }
  MergeShort(words, ids, spans, s);
  if (!s.rest.empty()) MergeLanes(words, s.rest.data(), s.rest.size(), ids, spans, s);
}

}  // namespace myriad::tokenizer
