// Property test of PrefixIndex::Match's walk against the reference model: long chains with
// shared prefixes, so that runs of consecutive blocks carry the same holders (the walk steps
// over blocks whose word equals the last one it stepped), broken by holes, suspect marks,
// re-stores under a new stamp, provisional entries, many holders (node chains, and more runs
// than Match defers blocks for) and tables near 3/4 load (probes that run on for lines).
#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <vector>

#include "core/rng.h"
#include "policy/prefix_index.h"
#include "prefix_index_model.h"

namespace myriad::policy {
namespace {

using test::Model;
using test::Str;

std::span<const BlockKey> Sub(const std::vector<BlockKey>& v, size_t from, size_t to) {
  return std::span<const BlockKey>(v).subspan(from, to - from);
}

// Chains that share prefixes of a base chain: chain i keeps the base's first `shared[i]` keys.
std::vector<std::vector<BlockKey>> SharedChains(Rng& rng, size_t count, size_t len) {
  std::vector<std::vector<BlockKey>> chains;
  BlockKey parent = kRootBlockKey;
  std::vector<BlockKey> base;
  for (size_t i = 0; i < len; ++i) {
    base.push_back(parent = HashContentBlock(parent, rng.Below(1 << 30)));
  }
  for (size_t c = 0; c < count; ++c) {
    std::vector<BlockKey> chain(base.begin(), base.begin() + static_cast<long>(rng.Below(len)));
    parent = chain.empty() ? kRootBlockKey : chain.back();
    while (chain.size() < len) {
      chain.push_back(parent = HashContentBlock(parent, rng.Below(1 << 30)));
    }
    chains.push_back(std::move(chain));
  }
  return chains;
}

TEST(PrefixIndexWalk, LongSharedChainsMatchTheModel) {
  const Nanos ttl = 2 * kSecond;
  size_t checked = 0;
  size_t long_matches = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    Rng rng(seed);
    const int every = seed % 4 == 0 ? 2 : 1;
    PrefixIndex index({.index_every = every, .provisional_ttl = ttl});
    Model model(every, ttl);
    // Few holders (single and pair words), or up to 24 (node chains; past 16 runs Match
    // walks without deferring); a large id never fits the compact pair form.
    const HolderId small = static_cast<HolderId>(2 + rng.Below(seed % 3 == 0 ? 23 : 4));
    std::vector<HolderId> ids;
    for (HolderId h = 0; h < small; ++h) ids.push_back(h);
    if (seed % 2 == 0) ids.push_back(70'000);
    const auto chains = SharedChains(rng, 6, 120 + rng.Below(200));
    Nanos now = 0;
    for (int step = 0; step < 700; ++step) {
      now += static_cast<Nanos>(rng.Below(100)) * kMillisecond;
      const auto& c = chains[rng.Below(chains.size())];
      const HolderId h = ids[rng.Below(ids.size())];
      const size_t to = 1 + rng.Below(c.size());
      const size_t from = rng.Below(3) == 0 ? rng.Below(to) : 0;
      const uint64_t op = rng.Below(16);
      if (op < 6) {  // mostly long prefixes
        index.Stored(h, static_cast<uint32_t>(from), Sub(c, from, to), now);
        model.Stored(h, static_cast<uint32_t>(from), Sub(c, from, to), now);
      } else if (op < 8) {  // a hole, or a short range
        const size_t end = std::min(to, from + 1 + rng.Below(3));
        index.Removed(h, Sub(c, from, end));
        model.Removed(h, Sub(c, from, end));
      } else if (op < 9) {
        index.AddProvisional(h, 0, Sub(c, 0, to), now);
        model.AddProvisional(h, 0, Sub(c, 0, to), now);
      } else if (op < 10) {  // later stores carry a new stamp: words change mid-chain
        if (rng.Below(5) == 0) {
          index.Cleared(h);
          model.Cleared(h);
        } else {
          index.MarkSuspect(h);
          model.MarkSuspect(h);
        }
      } else {
        const size_t len = rng.Below(4) == 0 ? 1 + rng.Below(c.size()) : c.size();
        std::vector<PrefixMatch> got;
        index.Match(Sub(c, 0, len), now, &got);
        const auto want = model.Match(Sub(c, 0, len), now);
        EXPECT_EQ(Str(got), Str(want)) << "seed " << seed << " step " << step;
        for (const PrefixMatch& m : want) long_matches += m.matched_blocks >= 64;
        ++checked;
      }
      ASSERT_EQ(index.entries(), model.entries()) << "seed " << seed << " step " << step;
      if (::testing::Test::HasFailure()) return;
    }
  }
  EXPECT_GT(checked, 5000u);
  EXPECT_GT(long_matches, 1000u);  // the walk went over long runs
}

}  // namespace
}  // namespace myriad::policy
