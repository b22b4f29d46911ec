// The engine batch planner on its own: the decisions emu::Engine and sim::Unit both ask it for.
#include "policy/batch_planner.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace myriad::policy {
namespace {

struct Prompt {
  int64_t done = 0, target = 0;
  bool fits = true;  // whether its KV can be reserved
};

// Runs FillPrefills over `prompts` as an engine would; returns the chunks handed out.
std::vector<std::pair<size_t, int64_t>> Fill(BatchPlanner::Step& step, const std::vector<Prompt>& prompts) {
  std::vector<std::pair<size_t, int64_t>> chunks;
  step.FillPrefills(
      prompts.size(), [&](size_t i) { return prompts[i].fits; },
      [&](size_t i) { return std::pair<int64_t, int64_t>(prompts[i].done, prompts[i].target); },
      [&](size_t i, int64_t chunk) { chunks.emplace_back(i, chunk); });
  return chunks;
}

TEST(BatchPlannerTest, DecodesComeFirstAndEachTakesATokenOfTheBudget) {
  BatchPlanner planner({.kv_capacity = 100000, .max_running = 8, .step_tokens = 10});
  BatchPlanner::Step step = planner.StartStep(3, 300);
  const auto chunks = Fill(step, {{.target = 20}});
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].second, 7);  // 10 - 3 decodes
  EXPECT_EQ(step.shape().decode_seqs, 3);
  EXPECT_EQ(step.shape().decode_context, 300);
  EXPECT_EQ(step.shape().prefill_tokens, 7);
  EXPECT_TRUE(step.full());
  // More decodes than budget: no prefill at all, never a negative budget.
  BatchPlanner::Step crowded = planner.StartStep(12, 1200);
  EXPECT_TRUE(Fill(crowded, {{.target = 20}}).empty());
  EXPECT_EQ(crowded.shape().prefill_tokens, 0);
}

TEST(BatchPlannerTest, ChunksSplitTheBudgetInArrivalOrder) {
  BatchPlanner planner({.kv_capacity = 100000, .max_running = 8, .step_tokens = 100});
  BatchPlanner::Step step = planner.StartStep(0, 0);
  const auto chunks = Fill(step, {{.target = 60}, {.done = 10, .target = 70}, {.target = 5}});
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0], std::make_pair(size_t{0}, int64_t{60}));
  EXPECT_EQ(chunks[1], std::make_pair(size_t{1}, int64_t{40}));  // the rest of the budget
  EXPECT_EQ(step.shape().prefill_seqs, 2);
  EXPECT_EQ(step.shape().prefill_tokens, 100);
}

TEST(BatchPlannerTest, APromptWhoseKvDoesNotFitHoldsBackThoseBehindIt) {
  BatchPlanner planner({.kv_capacity = 100000, .max_running = 8, .step_tokens = 100});
  BatchPlanner::Step step = planner.StartStep(0, 0);
  // The third would fit and has budget left, but it may not overtake the second.
  const auto chunks = Fill(step, {{.target = 10}, {.target = 50, .fits = false}, {.target = 10}});
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].first, 0u);
  EXPECT_EQ(step.shape().prefill_tokens, 10);
}

TEST(BatchPlannerTest, AdmissionKeepsTheGrowthAndTheOnePercentWatermarkFree) {
  BatchPlanner planner({.kv_capacity = 1000, .max_running = 8, .step_tokens = 100});
  EXPECT_EQ(planner.watermark(), 10);
  // 500 held + 10 growth + 10 watermark: 480 more fit, 481 do not.
  EXPECT_TRUE(planner.Admits({.used = 500, .growth = 10}, 480));
  EXPECT_FALSE(planner.Admits({.used = 500, .growth = 10}, 481));
  // An empty engine takes anything within its capacity (else it would wait forever).
  EXPECT_TRUE(planner.Admits({}, 1000));
  EXPECT_FALSE(planner.Admits({}, 1001));
  EXPECT_TRUE(planner.HasSeat(7));
  EXPECT_FALSE(planner.HasSeat(8));
}

TEST(BatchPlannerTest, PreemptionTakesTheNewestRunningSequence) {
  BatchPlanner planner({.kv_capacity = 1000, .max_running = 8, .step_tokens = 100});
  EXPECT_FALSE(planner.MustPreempt({.used = 990, .growth = 10}));
  EXPECT_TRUE(planner.MustPreempt({.used = 991, .growth = 10}));
  // Entries 4 and 5 are stale (finished or already preempted): the victim is 3.
  const std::vector<bool> running = {true, true, false, true, false, false};
  const auto one_class = [](size_t) { return int64_t{0}; };
  EXPECT_EQ(BatchPlanner::Victim(running.size(), [&](size_t i) { return running[i]; }, one_class), 3u);
  EXPECT_EQ(BatchPlanner::Victim(running.size(), [&](size_t i) { return running[i]; }, one_class, 0), 3u);
  EXPECT_EQ(BatchPlanner::Victim(2, [](size_t) { return false; }, one_class), std::nullopt);
}

// A low-priority fill sequence (the highest demotion, vLLM's priority value) is preempted
// before any interactive one, however early it was admitted; among fill sequences, the newest.
TEST(BatchPlannerTest, PreemptionTakesTheNewestFillSequenceFirst) {
  const std::vector<bool> running = {true, true, true, true, false, true};
  const std::vector<int64_t> fill = {0, 1, 0, 1, 1, 0};  // 4 is fill but stale
  const auto is_running = [&](size_t i) { return running[i]; };
  const auto demotion = [&](size_t i) { return fill[i]; };
  EXPECT_EQ(BatchPlanner::Victim(running.size(), is_running, demotion), 3u);
  EXPECT_EQ(BatchPlanner::Victim(running.size(), is_running, demotion, 1), 3u) << "the scan may stop at the first fill";
  // No fill running: vLLM's default, the newest.
  EXPECT_EQ(BatchPlanner::Victim(running.size(), is_running, [](size_t i) { return int64_t{i == 4}; }), 5u);
  // vLLM's priorities: the highest value is the least important.
  const std::vector<int64_t> priority = {5, 9, 0, 9, 0, 2};
  EXPECT_EQ(BatchPlanner::Victim(priority.size(), [](size_t) { return true; }, [&](size_t i) { return priority[i]; }), 3u);
}

TEST(BatchPlannerTest, AttendedPositionsCountEachTokenSeeingItselfAndThoseBefore) {
  // A chunk of 4 after 2 computed: the tokens at positions 3..6 attend to 3 + 4 + 5 + 6.
  EXPECT_DOUBLE_EQ(BatchPlanner::AttendedPositions(2, 4), 18);
  EXPECT_DOUBLE_EQ(BatchPlanner::AttendedPositions(0, 1), 1);
  BatchPlanner planner({.kv_capacity = 100000, .max_running = 8, .step_tokens = 6});
  BatchPlanner::Step step = planner.StartStep(0, 0);
  Fill(step, {{.done = 2, .target = 6}, {.target = 10}});
  // 18 for the first prompt's 4 tokens, then 1 + 2 for the second's first 2.
  EXPECT_DOUBLE_EQ(step.shape().prefill_attended, 21);
}

}  // namespace
}  // namespace myriad::policy
