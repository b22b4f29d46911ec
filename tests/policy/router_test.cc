// Router decisions on hand-made cluster states whose right answer is known.
#include "policy/router.h"

#include <gtest/gtest.h>

#include <vector>

#include "perf/step_model.h"
#include "policy/load_ranking.h"

namespace myriad::policy {
namespace {

class RouterTest : public ::testing::Test {
 protected:
  RouterTest()
      : model_(*perf::StepModel::Create(*perf::FindGpu("H200"), *perf::FindModel("DeepSeek-V3"),
                                        {.tp = 1, .dp = 32, .ep = 32, .nodes = 4}, perf::Fabric{})),
        cost_(model_, 16384) {
    blocks_.resize(16);
    for (size_t i = 0; i < blocks_.size(); ++i) blocks_[i] = 1000 + i;
  }

  std::vector<Candidate> Units(int n) {
    std::vector<Candidate> c(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      c[static_cast<size_t>(i)].holder = static_cast<HolderId>(i);
      c[static_cast<size_t>(i)].cost = &cost_;
    }
    return c;
  }

  RouteRequest Req() {
    return RouteRequest{.blocks = blocks_, .input_tokens = 16 * 512, .output_tokens = 100, .now = 0};
  }

  perf::StepModel model_;
  PrefillCost cost_;
  std::vector<BlockKey> blocks_;
  PrefixIndex index_;
  Rng rng_{1};
};

TEST_F(RouterTest, PolicyNamesParseAndRoundTrip) {
  for (const char* name : {"random", "round-robin", "least-loaded", "prefix-only", "kv-aware",
                           "kv-aware+spread", "prefix-only+spread+fair", "least-loaded+fair"}) {
    auto p = ParsePolicyName(name);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status();
    EXPECT_EQ(FormatPolicyName(p->options, p->fair), name);
  }
  EXPECT_FALSE(ParsePolicyName("kv-aware+turbo").ok());
  EXPECT_FALSE(ParsePolicyName("least-loaded+spread").ok());
  EXPECT_FALSE(ParsePolicyName("psychic").ok());
}

TEST_F(RouterTest, KvAwarePrefersTheHolderUntilItsQueueCostsMore) {
  auto units = Units(3);
  index_.Stored(1, 0, blocks_, 0);  // unit 1 holds the whole prompt
  Router r(RouterOptions{.policy = RoutingPolicy::kKvAware, .block_tokens = 512}, &index_);
  RouteDecision d = r.Route(Req(), units, {}, rng_);
  EXPECT_EQ(d.entry, 1);
  EXPECT_EQ(d.expected_cached_tokens, 16 * 512 - 1);
  EXPECT_FALSE(d.hot_spot);
  // A long queue on the holder: recomputing elsewhere is faster.
  units[1].load.queued_prefill_tokens = 5'000'000;
  d = r.Route(Req(), units, {}, rng_);
  EXPECT_NE(d.entry, 1);
  EXPECT_TRUE(d.hot_spot);
  EXPECT_EQ(d.fetch_from, -1) << "no copying without +spread";
}

// An idle cluster of identical units: every estimate ties. Distinct prompts spread over the
// units, the same prompt keeps its unit, prompts without a full block take turns, and a cached
// prefix still wins outright.
TEST_F(RouterTest, KvAwareSpreadsTiesAtZeroLoad) {
  auto units = Units(4);
  Router r(RouterOptions{.policy = RoutingPolicy::kKvAware, .block_tokens = 512}, &index_);
  std::vector<int> count(units.size());
  std::vector<BlockKey> prompt(4);
  for (uint64_t p = 0; p < 1000; ++p) {
    for (size_t b = 0; b < prompt.size(); ++b) {
      prompt[b] = HashContentBlock(b ? prompt[b - 1] : kRootBlockKey, p * 10 + b);
    }
    const RouteRequest req{.blocks = prompt, .input_tokens = 4 * 512, .output_tokens = 10, .now = 0};
    const RouteDecision d = r.Route(req, units, {}, rng_);
    ASSERT_GE(d.entry, 0);
    ++count[static_cast<size_t>(d.entry)];
    EXPECT_EQ(r.Route(req, units, {}, rng_).entry, d.entry) << "the same prompt, the same unit";
  }
  for (size_t u = 0; u < units.size(); ++u) {
    EXPECT_GE(count[u], 200) << "unit " << u;
    EXPECT_LE(count[u], 300) << "unit " << u;
  }
  std::vector<int> short_count(units.size());
  for (int i = 0; i < 400; ++i) {
    const RouteRequest no_block{.blocks = {}, .input_tokens = 100, .output_tokens = 10, .now = 0};
    const RouteDecision d = r.Route(no_block, units, {}, rng_);
    ++short_count[static_cast<size_t>(d.entry)];
  }
  EXPECT_EQ(short_count, std::vector<int>(units.size(), 100));
  // Unit 3 holds this prompt: a strictly better estimate, not a tie.
  index_.Stored(3, 0, blocks_, 0);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(r.Route(Req(), units, {}, rng_).entry, 3);
  // A unit with a queue is no longer tied: the idle ones share the load.
  index_.Cleared(3);
  units[0].load.queued_prefill_tokens = 10'000;
  for (uint64_t p = 0; p < 100; ++p) {
    const BlockKey one = HashContentBlock(kRootBlockKey, 100'000 + p);
    const RouteRequest req{.blocks = {&one, 1}, .input_tokens = 512, .output_tokens = 10, .now = 0};
    EXPECT_NE(r.Route(req, units, {}, rng_).entry, 0);
  }
}

// Estimates within the tie tolerance are equal: the unit holding the longest prefix keeps the
// request rather than a replica being made elsewhere for a gain of a few percent, and a few
// milliseconds of timing noise do not flip the choice. Past the tolerance, the faster one wins.
TEST_F(RouterTest, KvAwareKeepsThePrefixWhereItIsWithinTheTieTolerance) {
  auto units = Units(2);
  const std::span<const BlockKey> head(blocks_.data(), 2);
  index_.Stored(1, 0, head, 0);  // unit 1 holds the first 1,024 tokens
  const double idle = cost_.PrefillSeconds(16 * 512, 0);
  const double holder = cost_.PrefillSeconds(16 * 512 - 1024, 1024);
  ASSERT_LT(holder, idle);
  // A queue on the holder that makes its estimate 3% worse than recomputing on the idle unit.
  units[1].load.queued_prefill_tokens =
      static_cast<int64_t>((1.03 * idle - holder) / cost_.QueueSeconds(1'000'000) * 1e6);
  Router tolerant(RouterOptions{.policy = RoutingPolicy::kKvAware, .block_tokens = 512}, &index_);
  RouteDecision d = tolerant.Route(Req(), units, {}, rng_);
  EXPECT_EQ(d.entry, 1);
  EXPECT_EQ(d.expected_cached_tokens, 1024);
  EXPECT_GT(d.estimated_ttft_s, idle) << "the estimate is the chosen unit's";
  Router exact(RouterOptions{.policy = RoutingPolicy::kKvAware, .block_tokens = 512, .tie_tolerance = 0,
                             .tie_tolerance_abs = 0},
               &index_);
  EXPECT_EQ(exact.Route(Req(), units, {}, rng_).entry, 0);
  // 20% worse is a clear gain: the idle unit takes it even with the tolerance.
  units[1].load.queued_prefill_tokens =
      static_cast<int64_t>((1.2 * idle - holder) / cost_.QueueSeconds(1'000'000) * 1e6);
  EXPECT_EQ(tolerant.Route(Req(), units, {}, rng_).entry, 0);
}

TEST_F(RouterTest, SpreadingCopiesTheHotPrefixToTheNewUnit) {
  auto units = Units(3);
  index_.Stored(1, 0, blocks_, 0);
  units[1].load.queued_prefill_tokens = 5'000'000;
  Router r(RouterOptions{.policy = RoutingPolicy::kKvAware, .spread_hot_prefixes = true, .block_tokens = 512}, &index_);
  RouteDecision d = r.Route(Req(), units, {}, rng_);
  ASSERT_NE(d.entry, 1);
  EXPECT_EQ(d.fetch_from, 1);
  EXPECT_EQ(d.fetch_blocks, 16);
  EXPECT_TRUE(d.hot_spot);
  // Copying 16 blocks of DeepSeek KV (8k tokens, 0.58 GB) at 40 GB/s beats recomputing them.
  EXPECT_LT(d.estimated_ttft_s, cost_.PrefillSeconds(16 * 512, 0));
}

TEST_F(RouterTest, SuspectHoldersCountHalf) {
  auto units = Units(2);
  index_.Stored(0, 0, blocks_, 0);                                     // all 16 blocks
  index_.Stored(1, 0, std::span<const BlockKey>(blocks_).first(10), 0);  // 10 blocks
  Router r(RouterOptions{.policy = RoutingPolicy::kPrefixOnly}, &index_);
  EXPECT_EQ(r.Route(Req(), units, {}, rng_).entry, 0);
  index_.MarkSuspect(0);  // unit 0's events had a gap: 16 counts as 8 < 10
  EXPECT_EQ(r.Route(Req(), units, {}, rng_).entry, 1);
}

TEST_F(RouterTest, PrefixOnlyTakesTheLongestMatchAndLoadOnlyIgnoresIt) {
  auto units = Units(3);
  index_.Stored(0, 0, std::span<const BlockKey>(blocks_).first(4), 0);
  index_.Stored(2, 0, std::span<const BlockKey>(blocks_).first(9), 0);
  units[2].load.queued_prefill_tokens = 100000;
  Router prefix(RouterOptions{.policy = RoutingPolicy::kPrefixOnly}, &index_);
  EXPECT_EQ(prefix.Route(Req(), units, {}, rng_).entry, 2);
  Router least(RouterOptions{.policy = RoutingPolicy::kLeastLoaded}, nullptr);
  EXPECT_EQ(least.Route(Req(), units, {}, rng_).entry, 0);
}

// The unit the simulator warms before admitting (LikelyEntry) is the one Route then picks,
// also when least-loaded takes turns among equally loaded units: warming the ranking's first
// minimum instead warmed the wrong unit's cache on most arrivals.
TEST_F(RouterTest, LikelyEntryIsTheLeastLoadedPickIncludingItsTurn) {
  auto units = Units(5);
  units[3].load.queued_prefill_tokens = 7;
  LoadRanking ranking(Phase::kPrefill, units.size());
  Router r(RouterOptions{.policy = RoutingPolicy::kLeastLoaded}, nullptr);
  r.UseLoadRankings(&ranking, nullptr);
  std::vector<int> picks;
  for (int i = 0; i < 8; ++i) {
    for (size_t u = 0; u < units.size(); ++u) ranking.Update(u, units[u].load);
    const int likely = r.LikelyEntry();
    const int picked = r.Route(Req(), units, {}, rng_).entry;
    EXPECT_EQ(likely, picked) << "arrival " << i;
    picks.push_back(picked);
  }
  EXPECT_EQ(picks, (std::vector<int>{0, 1, 2, 4, 0, 1, 2, 4}));
  // Load-blind or request-dependent policies promise nothing.
  Router kv(RouterOptions{.policy = RoutingPolicy::kKvAware}, &index_);
  kv.UseLoadRankings(&ranking, nullptr);
  EXPECT_EQ(kv.LikelyEntry(), -1);
}

TEST_F(RouterTest, RejectsWhenNoCandidateCanMeetTheSlo) {
  auto units = Units(2);
  for (auto& u : units) u.load.queued_prefill_tokens = 50'000'000;
  Router r(RouterOptions{.policy = RoutingPolicy::kKvAware, .ttft_slo = 2 * kSecond, .reject_factor = 2.0}, &index_);
  RouteDecision d = r.Route(Req(), units, {}, rng_);
  EXPECT_TRUE(d.rejected);
  EXPECT_EQ(d.reason, "ttft_slo_unattainable");
  units[0].load.available = false;
  units[1].load = UnitLoad{};
  d = r.Route(Req(), units, {}, rng_);
  EXPECT_FALSE(d.rejected);
  EXPECT_EQ(d.entry, 1);
}

TEST_F(RouterTest, DecodeByLoadAndShortPromptsSkipDisaggregation) {
  auto units = Units(2);
  auto decode = Units(3);
  decode[0].load.running = 50;
  decode[1].load.running = 10;
  decode[2].load.running = 30;
  index_.Stored(0, 0, blocks_, 0);
  Router r(RouterOptions{.policy = RoutingPolicy::kKvAware, .disagg_min_uncached = 256, .block_tokens = 512}, &index_);
  RouteDecision d = r.Route(Req(), units, decode, rng_);
  EXPECT_EQ(d.decode, 1);
  EXPECT_EQ(d.entry, -1) << "one uncached token: prefill it on the decode unit";
  index_.Cleared(0);
  d = r.Route(Req(), units, decode, rng_);
  EXPECT_GE(d.entry, 0) << "8k uncached tokens go to a prefill unit";
  EXPECT_EQ(d.decode, 1);
}

TEST_F(RouterTest, PrefillCostGrowsWithUncachedTokensAndQueue) {
  EXPECT_LT(cost_.PrefillSeconds(1000, 0), cost_.PrefillSeconds(8000, 0));
  EXPECT_LT(cost_.PrefillSeconds(1000, 0), cost_.PrefillSeconds(1000, 30000));
  EXPECT_LT(cost_.QueueSeconds(1000), cost_.QueueSeconds(100000));
  // A 32-rank unit works through 16k queued tokens at its full-chunk rate: queued prompts run
  // in 16k-token chunks, each attending over itself, so a queued token costs more than a token
  // of one 512-token prompt alone (which attends over at most 512 positions).
  const double queued = cost_.QueueSeconds(32 * 512);
  EXPECT_NEAR(queued, 32 * 512 / cost_.ThroughputTokensPerSecond(), 0.01 * queued);
  EXPECT_GT(queued, cost_.PrefillSeconds(512, 0) - NanosToSeconds(model_.calibration().step_overhead));
}

}  // namespace
}  // namespace myriad::policy
