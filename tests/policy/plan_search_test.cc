#include "policy/plan_search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "perf/hardware.h"
#include "perf/model.h"

namespace myriad::policy {
namespace {

// Runs a search against a monotone truth: `threshold` or more copies meet the target.
std::pair<std::optional<int>, int> Search(int lo, int hi, int threshold) {
  CopiesSearch s(lo, hi);
  int probes = 0;
  while (auto c = s.Next()) {
    ++probes;
    s.Record(*c, *c >= threshold);
  }
  return {s.Best(), probes};
}

TEST(PlanSearchTest, CopiesSearchFindsTheFewestThatMeet) {
  for (int threshold = 1; threshold <= 40; ++threshold) {
    auto [best, probes] = Search(1, 40, threshold);
    ASSERT_TRUE(best) << threshold;
    EXPECT_EQ(*best, threshold);
    // The largest count first, then a bisection of [1, 40].
    EXPECT_LE(probes, 1 + 6) << threshold;
  }
}

TEST(PlanSearchTest, CopiesSearchStopsWhenEvenTheLargestFails) {
  auto [best, probes] = Search(3, 40, 41);
  EXPECT_FALSE(best);
  EXPECT_EQ(probes, 1);
}

TEST(PlanSearchTest, CopiesSearchRunsNothingWhenTheBoundPassesTheBudget) {
  CopiesSearch s(30, 20);
  EXPECT_FALSE(s.Next());
  EXPECT_FALSE(s.Best());
  auto [best, probes] = Search(7, 7, 1);
  EXPECT_EQ(best, 7);
  EXPECT_EQ(probes, 1);
}

TEST(PlanSearchTest, MinCopiesRoundsUpTheOfferedLoadOverTheBound) {
  EXPECT_EQ(MinCopies(1000, 2500), 3);
  EXPECT_EQ(MinCopies(1000, 3000), 3);
  EXPECT_EQ(MinCopies(1000, 0), 1);
  EXPECT_EQ(MinCopies(0, 10), std::numeric_limits<int>::max());
  EXPECT_EQ(MinCopies(1e-300, 1e300), std::numeric_limits<int>::max());
}

TEST(PlanSearchTest, FrontierKeepsOnlyUndominatedCandidatesInCostOrder) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<PlanScore> s = {{0.30, 0.999}, {0.20, 0.97}, {0.25, 0.96}, {0.10, 0.50},
                                    {inf, 0.0},    {0.20, 0.98}, {0.40, 0.999}};
  // 2 is dearer than 1 and worse; 6 ties 0 on attainment at a higher price; 5 beats 1.
  EXPECT_EQ(Frontier(s), (std::vector<size_t>{3, 5, 0}));
}

TEST(PlanSearchTest, ChooseTakesTheCheapestThatReachesTheTarget) {
  const std::vector<PlanScore> s = {{0.30, 0.999}, {0.20, 0.989}, {0.25, 0.99}, {0.25, 0.995}};
  EXPECT_EQ(Choose(s, 0.99), 2u);  // the tie at 0.25 keeps the lower index
  EXPECT_EQ(Choose(s, 0.999), 0u);
  EXPECT_FALSE(Choose(s, 0.9999));
}

// The bound must be at least what the step model gives any real decode batch: with a context,
// and at any batch up to the cap.
TEST(PlanSearchTest, DecodeBoundIsAtLeastAnyBatchTheModelSteps) {
  for (const char* model_name : {"DeepSeek-V3", "Llama-3.1-8B"}) {
    const bool moe = std::string(model_name) == "DeepSeek-V3";
    perf::UnitLayout layout{.tp = 1, .dp = moe ? 144 : 1, .ep = moe ? 144 : 1, .nodes = moe ? 18 : 1,
                            .redundant_experts = moe ? 32 : 0};
    auto step = perf::StepModel::Create(*perf::FindGpu("H200"), *perf::FindModel(model_name), layout, perf::Fabric{});
    ASSERT_TRUE(step.ok()) << step.status();
    const int seqs = 128;
    const double bound = DecodeTokensPerSecondBound(*step, seqs);
    for (int64_t b : {int64_t{1}, int64_t{37}, int64_t{seqs} * layout.dp}) {
      for (int64_t context : {int64_t{1}, int64_t{2500}}) {
        perf::BatchShape shape;
        shape.decode_seqs = b;
        shape.decode_context = b * context;
        EXPECT_GE(bound * (1 + 1e-12), static_cast<double>(b) / NanosToSeconds(step->StepTime(shape)))
            << model_name << " batch " << b << " context " << context;
      }
    }
  }
}

}  // namespace
}  // namespace myriad::policy
