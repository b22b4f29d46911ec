// BpeModel::MergeMany: the merge loop of MergeLinear run on several words in turn, one merge
// of each per round. A merge's new pairs are looked up in the word's next round, their table
// slots prefetched now, so the misses of a round's words (each a few hundred cycles on a table
// of several MiB) overlap instead of following one another.
#include <algorithm>

#include "tokenizer/bpe.h"

namespace myriad::tokenizer {
namespace {

// Words in flight: enough that a round's work covers a miss to the last-level cache.
constexpr size_t kLanes = 16;

}  // namespace

void BpeModel::MergeMany(std::span<const std::string_view> words, std::vector<uint32_t>& ids,
                         std::vector<IdSpan>& spans, BpeScratch& s) const {
  static_assert(kLinearMax < 256, "Lane's links are bytes");
  spans.resize(words.size());
  size_t next_word = 0;
  // Starts the next word that needs the merge loop in `lane`; words of at most one symbol and
  // long ones (the heap) are done on the spot. False when no word is left.
  auto load = [&](BpeScratch::Lane& lane) {
    while (next_word < words.size()) {
      const size_t k = next_word++;
      const std::string_view word = words[k];
      ByteIds(word, s);
      const size_t n = s.ids.size();
      const size_t before = ids.size();
      if (n <= 1) {
        ids.insert(ids.end(), s.ids.begin(), s.ids.end());
      } else if (n > kLinearMax) {
        MergeHeap(ids, s);
      } else {
        lane.word = static_cast<uint32_t>(k);
        lane.n = static_cast<uint32_t>(n);
        lane.npending = 0;
        for (size_t i = 0; i < n; ++i) {
          lane.ids[i] = s.ids[i];
          lane.next[i] = static_cast<uint8_t>(i + 1);
          lane.prev[i] = static_cast<uint8_t>(i - 1);
        }
        lane.ranks[n - 1] = kNone;
        if (n == word.size()) {
          // One symbol per byte: the first merges come from the 256 x 256 table, which stays in
          // the processor's cache.
          for (size_t i = 0; i + 1 < n; ++i) {
            const MergeTable::Merge m =
                byte_pairs_[(static_cast<uint8_t>(word[i]) << 8) | static_cast<uint8_t>(word[i + 1])];
            lane.ranks[i] = m.rank;
            lane.results[i] = m.result;
          }
        } else {
          // Bytes were dropped (no token for them): the pairs are not the word's byte pairs.
          for (size_t i = 0; i + 1 < n; ++i) {
            const MergeTable::Merge m = merges_.Find(lane.ids[i], lane.ids[i + 1]);
            lane.ranks[i] = m.rank;
            lane.results[i] = m.result;
          }
        }
        return true;
      }
      spans[k] = IdSpan{static_cast<uint32_t>(before), static_cast<uint32_t>(ids.size() - before)};
    }
    return false;
  };

  s.lanes.resize(kLanes);
  size_t active = 0;
  for (auto& lane : s.lanes) {
    if (load(lane)) {
      ++active;
    } else {
      lane.word = kNone;
    }
  }
  while (active > 0) {
    for (auto& lane : s.lanes) {
      if (lane.word == kNone) continue;
      for (uint32_t p = 0; p < lane.npending; ++p) {
        const uint32_t i = lane.pending[p];
        const MergeTable::Merge m = merges_.Find(lane.ids[i], lane.ids[lane.next[i]]);
        lane.ranks[i] = m.rank;
        lane.results[i] = m.result;
      }
      lane.npending = 0;
      // The lowest rank, the leftmost of equals (positions keep the symbols' order).
      uint32_t best = 0, best_rank = lane.ranks[0];
      for (uint32_t i = 1; i + 1 < lane.n; ++i) {
        const uint32_t r = lane.ranks[i];
        const bool lower = r < best_rank;
        best = lower ? i : best;
        best_rank = lower ? r : best_rank;
      }
      if (best_rank == kNone) {
        spans[lane.word] = IdSpan{static_cast<uint32_t>(ids.size()), 0};
        for (uint32_t i = 0; i < lane.n; i = lane.next[i]) ids.push_back(lane.ids[i]);
        spans[lane.word].count = static_cast<uint32_t>(ids.size() - spans[lane.word].offset);
        if (!load(lane)) {
          lane.word = kNone;
          --active;
        }
        continue;
      }
      const uint32_t right = lane.next[best];
      const uint32_t after = lane.next[right];
      lane.ids[best] = lane.results[best];
      lane.ranks[right] = kNone;
      lane.next[best] = static_cast<uint8_t>(after);
      if (after < lane.n) {
        lane.prev[after] = static_cast<uint8_t>(best);
        lane.pending[lane.npending++] = best;
        merges_.Prefetch(lane.ids[best], lane.ids[after]);
      } else {
        lane.ranks[best] = kNone;
      }
      if (best > 0) {
        const uint32_t before = lane.prev[best];
        lane.pending[lane.npending++] = before;
        merges_.Prefetch(lane.ids[before], lane.ids[best]);
      }
    }
  }
}

}  // namespace myriad::tokenizer
