// MergeTable against a plain map: every pair it holds, and as many it does not, in both
// layouts (narrow buckets, including full ones whose pairs spill to the overflow map, and wide
// slots).
#include "tokenizer/merge_table.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <utility>
#include <vector>

namespace myriad::tokenizer {
namespace {

void ExpectMatchesMap(const std::vector<MergeTable::Entry>& merges, bool narrow, unsigned seed) {
  const MergeTable table(merges);
  ASSERT_EQ(table.narrow(), narrow);
  std::map<std::pair<uint32_t, uint32_t>, std::pair<uint32_t, uint32_t>> want;  // -> (rank, result)
  for (size_t r = 0; r < merges.size(); ++r) {
    want[{merges[r].a, merges[r].b}] = {narrow ? merges[r].result : static_cast<uint32_t>(r), merges[r].result};
  }
  for (const auto& [pair, merge] : want) {
    const MergeTable::Merge got = table.Find(pair.first, pair.second);
    ASSERT_EQ(got.rank, merge.first) << pair.first << " " << pair.second;
    ASSERT_EQ(got.result, merge.second) << pair.first << " " << pair.second;
  }
  std::mt19937 rng(seed);
  for (int k = 0; k < 20000; ++k) {
    const uint32_t a = rng() % 4096, b = rng() % 4096;
    if (want.count({a, b}) != 0) continue;
    const MergeTable::Merge got = table.Find(a, b);
    ASSERT_EQ(got.rank, MergeTable::kNone) << a << " " << b;
    ASSERT_EQ(got.result, MergeTable::kNone) << a << " " << b;
  }
  // A probe started for a pair that does not exist finds nothing, whatever the ids.
  if (!merges.empty()) {
    EXPECT_EQ(table.Finish(table.StartIf(false, merges[0].a, merges[0].b)).rank, MergeTable::kNone);
  }
}

// Random pairs of ids below 4096, results rising: 3 pairs a bucket on average, so over the
// seeds some buckets fill (8) and spill.
std::vector<MergeTable::Entry> RandomMerges(size_t count, unsigned seed, bool rising) {
  std::mt19937 rng(seed);
  std::map<std::pair<uint32_t, uint32_t>, bool> seen;
  std::vector<MergeTable::Entry> merges;
  while (merges.size() < count) {
    const uint32_t a = rng() % 4096, b = rng() % 4096;
    if (!seen.emplace(std::pair{a, b}, true).second) continue;
    const auto result = static_cast<uint32_t>(rising ? 5000 + merges.size() : 5000 + rng() % 1000);
    merges.push_back({a, b, result});
  }
  return merges;
}

TEST(TokenizerMergeTable, NarrowMatchesMap) {
  for (unsigned seed = 1; seed <= 40; ++seed) ExpectMatchesMap(RandomMerges(1536, seed, true), true, seed);
  ExpectMatchesMap(RandomMerges(100000, 99, true), true, 99);
  ExpectMatchesMap({}, true, 7);
}

TEST(TokenizerMergeTable, WideMatchesMap) {
  for (unsigned seed = 1; seed <= 5; ++seed) ExpectMatchesMap(RandomMerges(1536, seed, false), false, seed);
  // Ids beyond 20 bits.
  ExpectMatchesMap({{1u << 21, 3, 7}, {3, 1u << 22, 8}, {5, 6, 1u << 23}}, false, 3);
}

}  // namespace
}  // namespace myriad::tokenizer
