// emu::Engine's scheduling, and the proof that it is the simulator's: the same requests through
// the emulator (real time, accelerated) and through a sim::Unit (virtual time) are planned into
// the same steps, since both ask policy::BatchPlanner.
#include "emu/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "sim/event_queue.h"
#include "sim/request_table.h"
#include "sim/unit.h"

namespace myriad::emu {
namespace {

struct Job {
  int prompt;
  int output;
  int64_t priority = 0;  // > 0: a fill tenant's (the simulated unit's low class)
};

// Runs `jobs` through an engine, all submitted before its first step; returns each request's
// usage, in submission order, and the steps the engine planned.
struct EngineRun {
  std::vector<Usage> usage;
  std::vector<size_t> finish_order;  // job indices
  std::vector<perf::BatchShape> steps;
  EngineStats stats;
};

EngineRun RunEngine(EngineOptions o, const std::vector<Job>& jobs) {
  o.speed = 1000;  // a thousand emulated seconds a second
  auto engine = Engine::Create(o);
  EXPECT_TRUE(engine.ok()) << engine.status();
  EngineRun run;
  run.usage.resize(jobs.size());
  std::mutex mu;
  std::condition_variable cv;
  size_t finished = 0;
  (*engine)->set_step_observer([&](const perf::BatchShape& s) {
    std::lock_guard l(mu);
    run.steps.push_back(s);
  });
  // Hung while submitting, so that the first step sees every request whatever the threads do.
  (*engine)->SetHung(true);
  for (size_t i = 0; i < jobs.size(); ++i) {
    GenRequest g;
    // Distinct first tokens: no prompt shares a block with another.
    for (int t = 0; t < jobs[i].prompt; ++t) g.prompt.push_back(static_cast<uint32_t>(i * 100000 + t));
    g.max_tokens = jobs[i].output;
    g.on_finish = [&, i](std::string_view reason, const Usage& u) {
      EXPECT_EQ(reason, "length");
      std::lock_guard l(mu);
      run.usage[i] = u;
      run.finish_order.push_back(i);
      ++finished;
      cv.notify_all();
    };
    (*engine)->Submit(std::move(g));
  }
  (*engine)->SetHung(false);
  std::unique_lock l(mu);
  EXPECT_TRUE(cv.wait_for(l, std::chrono::seconds(60), [&] { return finished == jobs.size(); }));
  l.unlock();
  run.stats = (*engine)->stats();
  return run;
}

class RecordingHost : public sim::UnitHost {
 public:
  void OnPrefillDone(int, uint32_t) override {}
  void OnRequestDone(int, uint32_t slot) override { done.push_back(slot); }
  std::vector<uint32_t> done;
};

// The same jobs through a simulated unit of the engine's hardware, all queued before its first
// step (as RunEngine submits them): the slots in the order they finished, the steps and stats.
struct UnitRun {
  std::vector<uint32_t> done;  // slots; slot i is job i
  std::vector<perf::BatchShape> steps;
  sim::UnitStats stats;
};

UnitRun RunUnit(const EngineOptions& o, sim::UnitConfig cfg, const std::vector<Job>& jobs) {
  auto engine = Engine::Create(o);  // for its step model: the unit must be the same hardware
  EXPECT_TRUE(engine.ok());
  UnitRun run;
  if (!engine.ok()) return run;
  sim::EventQueue events;
  sim::RequestTable table;
  RecordingHost host;
  cfg.role = sim::Role::kColocated;
  cfg.block_tokens = 16;
  sim::Unit unit(cfg, (*engine)->step_model(), events, table, host);
  unit.set_step_log(&run.steps);
  unit.Halt();
  for (size_t i = 0; i < jobs.size(); ++i) {
    sim::Request r;
    r.id = i;
    r.input_tokens = jobs[i].prompt;
    r.output_tokens = jobs[i].output;
    const uint32_t slot = table.Add(std::move(r));
    table[slot].fill = jobs[i].priority > 0;  // the simulator's one low class: a fill tenant's
    unit.EnqueuePrefill(slot);
  }
  unit.Resume();
  while (events.Step()) {
  }
  run.done = host.done;
  run.stats = unit.stats();
  return run;
}

TEST(EngineTest, EmulatorAndSimulatedUnitPlanTheSameSteps) {
  // Chunking (a 512-token budget), a full decode batch (3 seats) and sequences finishing at
  // different steps, without KV pressure.
  const std::vector<Job> jobs = {{300, 5}, {40, 3}, {700, 8}, {100, 2}, {64, 4}, {20, 6}, {515, 1}};
  EngineOptions o;
  o.max_num_seqs = 3;
  o.max_batched_tokens = 512;
  const EngineRun emu = RunEngine(o, jobs);
  sim::UnitConfig cfg;
  cfg.max_batch_tokens_per_rank = 512;
  cfg.max_seqs_per_rank = 3;
  const UnitRun unit = RunUnit(o, cfg, jobs);
  const std::vector<perf::BatchShape>& sim_steps = unit.steps;
  ASSERT_EQ(unit.done.size(), jobs.size());

  ASSERT_EQ(emu.steps.size(), sim_steps.size());
  EXPECT_GE(sim_steps.size(), 10u);  // the case exercises something
  for (size_t s = 0; s < sim_steps.size(); ++s) {
    SCOPED_TRACE(testing::Message() << "step " << s);
    EXPECT_EQ(emu.steps[s].decode_seqs, sim_steps[s].decode_seqs);
    EXPECT_EQ(emu.steps[s].decode_context, sim_steps[s].decode_context);
    EXPECT_EQ(emu.steps[s].prefill_seqs, sim_steps[s].prefill_seqs);
    EXPECT_EQ(emu.steps[s].prefill_tokens, sim_steps[s].prefill_tokens);
    EXPECT_DOUBLE_EQ(emu.steps[s].prefill_attended, sim_steps[s].prefill_attended);
  }
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(emu.usage[i].completion_tokens, jobs[i].output);
}

TEST(EngineTest, ReservesTheContextAndPreemptsTheNewestWhenGrowthRunsOut) {
  // 20 blocks of 16 tokens. Each request needs 4 blocks for its prompt and 11 by its end: all
  // three start together (reserving prompt + max_tokens would run them one at a time), and
  // decode growth then runs out, so the newest goes back to waiting and is recomputed.
  EngineOptions o;
  o.kv_blocks = 20;
  const std::vector<Job> jobs = {{64, 100}, {64, 100}, {64, 100}};
  const EngineRun run = RunEngine(o, jobs);
  bool all_three = false;
  for (const perf::BatchShape& s : run.steps) all_three |= s.decode_seqs + s.prefill_seqs == 3;
  EXPECT_TRUE(all_three);
  EXPECT_GT(run.stats.preemptions, 0u);
  EXPECT_GT(run.stats.prompt_tokens, 3u * 64);  // recomputed after the preemption
  for (const Usage& u : run.usage) EXPECT_EQ(u.completion_tokens, 100);
  EXPECT_EQ(run.stats.finished_length, 3u);
  EXPECT_EQ(run.stats.running, 0);
  EXPECT_EQ(run.stats.kv_usage, 0.0);
}

// Low-priority fill gives way first (policy::BatchPlanner::Victim) in a simulated unit: of three
// sequences that outgrow the KV together (the emulator's 20 blocks of 16), the oldest is a fill
// tenant's, and it is the one preempted, so it finishes last; with one class the newest is
// preempted, as the emulator does for the same jobs.
TEST(EngineTest, TheFillSequenceIsPreemptedFirstInASimulatedUnit) {
  EngineOptions o;
  o.kv_blocks = 20;
  for (const bool fill_first : {true, false}) {
    SCOPED_TRACE(fill_first ? "the oldest is fill" : "one class");
    const std::vector<Job> jobs = {{64, 100, fill_first ? 1 : 0}, {64, 100}, {64, 100}};
    sim::UnitConfig cfg;
    cfg.kv_tokens = 20 * 16;
    const UnitRun unit = RunUnit(o, cfg, jobs);
    ASSERT_EQ(unit.done.size(), 3u);
    EXPECT_GT(unit.stats.preemptions, 0);
    EXPECT_EQ(unit.done.back(), fill_first ? 0u : 2u);
    if (!fill_first) {
      const EngineRun emu = RunEngine(o, jobs);
      ASSERT_EQ(emu.finish_order.size(), 3u);
      EXPECT_EQ(emu.finish_order.back(), 2u) << "the emulator's victim is the newest too";
    }
  }
}

TEST(EngineTest, ACachedPrefixSavesComputeNotRoomAsInASimulatedUnit) {
  // 25 blocks of 16. A prompt of 12 blocks is computed and cached; then two requests that
  // extend it by 8 tokens arrive together. Both find the 12 blocks cached, but each reserves
  // its whole context (13 blocks), as a simulated unit does (the cache lives in the 12 blocks
  // left free), so the second waits for the first: the old emulator shared the cached blocks
  // between them (13 + 1 blocks) and ran both at once, unlike the simulator.
  EngineOptions o;
  o.kv_blocks = 25;
  o.speed = 1000;
  auto engine = Engine::Create(o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Usage> done;
  int most_seqs = 0;
  (*engine)->set_step_observer([&](const perf::BatchShape& s) {
    std::lock_guard l(mu);
    most_seqs = std::max<int>(most_seqs, static_cast<int>(s.decode_seqs + s.prefill_seqs));
  });
  auto submit = [&](int tokens, int max_tokens) {
    GenRequest g;
    for (int t = 0; t < tokens; ++t) g.prompt.push_back(static_cast<uint32_t>(t));
    g.max_tokens = max_tokens;
    g.on_finish = [&](std::string_view, const Usage& u) {
      std::lock_guard l(mu);
      done.push_back(u);
      cv.notify_all();
    };
    (*engine)->Submit(std::move(g));
  };
  auto wait = [&](size_t n) {
    std::unique_lock l(mu);
    return cv.wait_for(l, std::chrono::seconds(30), [&] { return done.size() == n; });
  };
  submit(12 * 16, 1);
  ASSERT_TRUE(wait(1));
  {
    std::lock_guard l(mu);
    most_seqs = 0;
  }
  (*engine)->SetHung(true);  // both are queued before the next step
  submit(12 * 16 + 8, 1);
  submit(12 * 16 + 8, 1);
  (*engine)->SetHung(false);
  ASSERT_TRUE(wait(3));
  std::lock_guard l(mu);
  EXPECT_EQ(done[1].cached_tokens, 12 * 16);
  EXPECT_EQ(done[2].cached_tokens, 12 * 16);
  EXPECT_EQ(most_seqs, 1);
}

}  // namespace
}  // namespace myriad::emu

namespace myriad::emu {
namespace {

// The emulator's own CPU time between steps does not stretch the model's step times: with 5 ms
// of extra work before every step (the observer stands for planning, events and callbacks; a
// step's model time here is about 9.5 ms), a request takes the sum of its steps' model times,
// not that plus 5 ms a step. The bounds are wide on purpose (CI runs this beside other tests on
// two cores): without the timeline the request takes 200 ms more, the bound allows 100 ms.
TEST(EngineTest, StepsKeepTheModelsTimesWhateverTheEmulatorSpendsBetweenThem) {
  EngineOptions o;
  o.speed = 1;
  auto engine = Engine::Create(o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::chrono::nanoseconds model{0};
  (*engine)->set_step_observer([&](const perf::BatchShape& s) {
    model += std::chrono::nanoseconds((*engine)->step_model().StepTime(s));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  GenRequest g;
  for (int t = 0; t < 64; ++t) g.prompt.push_back(static_cast<uint32_t>(1000 + t));
  g.max_tokens = 40;
  g.on_finish = [&](std::string_view, const Usage&) {
    std::lock_guard l(mu);
    done = true;
    cv.notify_all();
  };
  const auto start = std::chrono::steady_clock::now();
  (*engine)->Submit(std::move(g));
  std::unique_lock l(mu);
  ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(20), [&] { return done; }));
  const auto took = std::chrono::steady_clock::now() - start;
  // 40 steps: without the timeline the overhead alone adds 200 ms.
  EXPECT_LT(took, model + std::chrono::milliseconds(100))
      << "took " << std::chrono::duration<double, std::milli>(took).count() << " ms, model "
      << std::chrono::duration<double, std::milli>(model).count() << " ms";
  EXPECT_GE(took, model - std::chrono::milliseconds(6));
}

}  // namespace
}  // namespace myriad::emu
