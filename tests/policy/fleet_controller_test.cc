// The controller's decisions, with time as an argument: hang, crash and straggler detection
// over scrapes, and the warmup gate before re-admission.
#include "policy/fleet_controller.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace myriad::policy {
namespace {

std::vector<std::string> Names(const std::vector<FleetAction>& actions) {
  std::vector<std::string> out;
  for (const auto& a : actions) out.push_back(std::string(ActionName(a.kind)) + ":" + a.reason);
  return out;
}

EngineObservation Busy(double progress) {
  return {.reachable = true, .running = 2, .waiting = 1, .progress = progress, .rank_step_times = {}};
}

EngineObservation Idle(double progress = 0) {
  EngineObservation o;
  o.reachable = true;
  o.progress = progress;
  return o;
}

// An engine admitted at t=0: its answer recorded, serving.
struct Fleet {
  FleetController c;
  int e;
  explicit Fleet(FleetControllerOptions o = {}) : c(o), e(c.AddEngine()) {
    EXPECT_EQ(Names(c.Observe(e, 0, Busy(0))), (std::vector<std::string>{"record_answer:admission"}));
    EXPECT_TRUE(c.Observe(e, 0, Busy(0)).empty());  // one recording at a time
    c.AnswerRecorded(e, true);
    EXPECT_EQ(c.state(e), EngineState::kServing);
  }
};

TEST(FleetController, HangIsNoProgressWithRequestsInFlightForHangAfter) {
  Fleet f;
  const Nanos hang = f.c.options().hang_after;
  EXPECT_EQ(hang, 30 * kSecond);  // the watchdog's default, as the simulator uses it
  EXPECT_TRUE(f.c.Observe(f.e, kSecond, Busy(10)).empty());
  // Stuck at 10 tokens from t=1s: not yet a hang one nanosecond before hang_after.
  EXPECT_TRUE(f.c.Observe(f.e, kSecond + hang - 1, Busy(10)).empty());
  EXPECT_EQ(Names(f.c.Observe(f.e, kSecond + hang, Busy(10))),
            (std::vector<std::string>{"drain:hang", "restart:hang"}));
  EXPECT_EQ(f.c.state(f.e), EngineState::kRecovering);
}

TEST(FleetController, IdleOrProgressingEngineIsNeverHung) {
  Fleet f;
  for (int i = 1; i <= 100; ++i) {
    EXPECT_TRUE(f.c.Observe(f.e, i * 10 * kSecond, Idle(5)).empty()) << i;
  }
  for (int i = 101; i <= 200; ++i) EXPECT_TRUE(f.c.Observe(f.e, i * 10 * kSecond, Busy(i)).empty()) << i;
}

TEST(FleetController, CrashIsFailedProbesInARow) {
  FleetControllerOptions o;
  o.crash_after_failed_probes = 3;
  Fleet f(o);
  EXPECT_TRUE(f.c.Observe(f.e, 1 * kSecond, {}).empty());
  EXPECT_TRUE(f.c.Observe(f.e, 2 * kSecond, {}).empty());
  EXPECT_TRUE(f.c.Observe(f.e, 3 * kSecond, Busy(1)).empty());  // a success breaks the run
  EXPECT_TRUE(f.c.Observe(f.e, 4 * kSecond, {}).empty());
  EXPECT_TRUE(f.c.Observe(f.e, 5 * kSecond, {}).empty());
  EXPECT_EQ(Names(f.c.Observe(f.e, 6 * kSecond, {})), (std::vector<std::string>{"drain:crash", "restart:crash"}));
  // Down while recovering: nothing more until restart_timeout, then one more restart.
  EXPECT_TRUE(f.c.Observe(f.e, 7 * kSecond, {}).empty());
  EXPECT_EQ(Names(f.c.Observe(f.e, 6 * kSecond + o.restart_timeout, {})),
            (std::vector<std::string>{"restart:still unreachable after restart"}));
}

TEST(FleetController, WarmupGateReadmitsOnlyAfterTheAnswerMatchesAndWarmupsComplete) {
  Fleet f;
  f.c.Observe(f.e, 0, Busy(5));
  f.c.Observe(f.e, 30 * kSecond, Busy(5));  // hang
  ASSERT_EQ(f.c.state(f.e), EngineState::kRecovering);
  // The hung process still answers with the same stalled progress: not restarted yet.
  EXPECT_TRUE(f.c.Observe(f.e, 31 * kSecond, Busy(5)).empty());
  // Restarted: its counter starts over.
  EXPECT_EQ(Names(f.c.Observe(f.e, 40 * kSecond, Idle())),
            (std::vector<std::string>{"warmup:back after restart"}));
  EXPECT_EQ(f.c.state(f.e), EngineState::kWarmup);
  // Not ready to answer: the gate runs again at the next scrape.
  EXPECT_TRUE(f.c.WarmupDone(f.e, 41 * kSecond, ProbeOutcome::kNoAnswer, 0).empty());
  EXPECT_EQ(Names(f.c.Observe(f.e, 42 * kSecond, Idle())),
            (std::vector<std::string>{"warmup:back after restart"}));
  // The answer matched but only 2 of 3 warmups completed.
  EXPECT_TRUE(f.c.WarmupDone(f.e, 43 * kSecond, ProbeOutcome::kMatch, 2).empty());
  f.c.Observe(f.e, 44 * kSecond, Idle());
  EXPECT_EQ(Names(f.c.WarmupDone(f.e, 45 * kSecond, ProbeOutcome::kMatch, 3)),
            (std::vector<std::string>{"readmit:warmup passed"}));
  EXPECT_EQ(f.c.state(f.e), EngineState::kServing);
  // Its hang clock starts at re-admission.
  EXPECT_TRUE(f.c.Observe(f.e, 45 * kSecond + 29 * kSecond, Busy(0)).empty());
}

TEST(FleetController, EngineDownFromTheStartIsEvictedAndAdmittedWhenBack) {
  FleetController c({});
  const int e = c.AddEngine();
  EXPECT_TRUE(c.Observe(e, 0, {}).empty());
  EXPECT_EQ(Names(c.Observe(e, kSecond, {})), (std::vector<std::string>{"drain:crash", "restart:crash"}));
  // No answer was ever recorded: the first one re-admits it.
  EXPECT_EQ(Names(c.Observe(e, 10 * kSecond, Idle())), (std::vector<std::string>{"record_answer:back after restart"}));
  EXPECT_EQ(Names(c.AnswerRecorded(e, true)), (std::vector<std::string>{"readmit:answer recorded"}));
  EXPECT_EQ(c.state(e), EngineState::kServing);
}

TEST(FleetController, WrongAnswerCordonsForGood) {
  Fleet f;
  f.c.Observe(f.e, 1 * kSecond, {});
  f.c.Observe(f.e, 2 * kSecond, {});  // crash
  ASSERT_EQ(f.c.state(f.e), EngineState::kRecovering);
  f.c.Observe(f.e, 10 * kSecond, Idle());
  EXPECT_EQ(Names(f.c.WarmupDone(f.e, 11 * kSecond, ProbeOutcome::kMismatch, 3)),
            (std::vector<std::string>{"cordon:answer mismatch"}));
  EXPECT_EQ(f.c.state(f.e), EngineState::kCordoned);
  EXPECT_TRUE(f.c.Observe(f.e, 12 * kSecond, {}).empty());
  EXPECT_TRUE(f.c.Observe(f.e, kHour, Busy(1)).empty());
}

TEST(FleetController, StragglerRankEvictsAfterConsecutiveWindowsAndShowsOnTheRadar) {
  Fleet f;
  const int windows = f.c.options().straggler.windows;
  std::vector<FleetAction> last;
  for (int w = 1; w <= windows; ++w) {
    EngineObservation o = Busy(w * 100.0);
    o.rank_step_times = {0.020, 0.020, 0.030, 0.020};
    last = f.c.Observe(f.e, w * kSecond, o);
    if (w < windows) {
      EXPECT_TRUE(last.empty()) << w;
    }
  }
  EXPECT_EQ(Names(last), (std::vector<std::string>{"drain:straggler rank 2", "restart:straggler rank 2"}));
}

TEST(FleetController, RadarRanksTheSlowestRanksAcrossEngines) {
  FleetController c({});
  const int a = c.AddEngine(), b = c.AddEngine();
  for (int e : {a, b}) {
    c.Observe(e, 0, Busy(0));
    c.AnswerRecorded(e, true);
  }
  EngineObservation o = Busy(1);
  o.rank_step_times = {1.0, 1.0, 1.0};
  c.Observe(a, kSecond, o);
  o.rank_step_times = {1.0, 1.5, 1.0};
  c.Observe(b, kSecond, o);
  const auto radar = c.Radar(2);
  ASSERT_EQ(radar.size(), 2u);
  EXPECT_EQ(radar[0].unit, b);
  EXPECT_EQ(radar[0].rank, 1);
  EXPECT_GT(radar[0].excess, 0.05);
  EXPECT_LE(radar[1].excess, radar[0].excess);
}

// Silent corruption while serving: the known-answer probe runs every probe_period on a serving
// engine; a mismatch drains and cordons it, a match or no answer waits for the next period.
TEST(FleetController, PeriodicProbeCordonsAServingEngineThatAnswersWrong) {
  FleetControllerOptions o;
  o.probe_period = 10 * kSecond;
  Fleet f(o);
  EXPECT_TRUE(f.c.Observe(f.e, 9 * kSecond, Idle()).empty());
  EXPECT_EQ(Names(f.c.Observe(f.e, 10 * kSecond, Idle())), (std::vector<std::string>{"probe:periodic"}));
  EXPECT_TRUE(f.c.Observe(f.e, 11 * kSecond, Idle()).empty());  // one probe at a time
  EXPECT_TRUE(f.c.ProbeDone(f.e, 11 * kSecond, ProbeOutcome::kMatch).empty());
  EXPECT_TRUE(f.c.Observe(f.e, 20 * kSecond, Idle()).empty());
  EXPECT_EQ(Names(f.c.Observe(f.e, 21 * kSecond, Idle())), (std::vector<std::string>{"probe:periodic"}));
  EXPECT_TRUE(f.c.ProbeDone(f.e, 21 * kSecond, ProbeOutcome::kNoAnswer).empty());
  EXPECT_EQ(f.c.state(f.e), EngineState::kServing);
  EXPECT_EQ(Names(f.c.Observe(f.e, 31 * kSecond, Idle())), (std::vector<std::string>{"probe:periodic"}));
  EXPECT_EQ(Names(f.c.ProbeDone(f.e, 31 * kSecond, ProbeOutcome::kMismatch)),
            (std::vector<std::string>{"drain:answer mismatch", "cordon:answer mismatch"}));
  EXPECT_EQ(f.c.state(f.e), EngineState::kCordoned);
  EXPECT_TRUE(f.c.Observe(f.e, 100 * kSecond, Idle()).empty());
}

TEST(FleetController, NoPeriodicProbeByDefault) {
  Fleet f;
  EXPECT_EQ(f.c.options().probe_period, 0);
  for (int i = 1; i <= 100; ++i) EXPECT_TRUE(f.c.Observe(f.e, i * kMinute, Idle()).empty()) << i;
}

// A new leader that finds the engine's answer recorded by an earlier one probes against it at
// the first scrape, instead of recording whatever the engine answers now: an engine that went
// wrong before the takeover is cordoned, one that answers as recorded serves on.
TEST(FleetController, AKnownAnswerIsProbedAtTheFirstScrapeNotRecordedAgain) {
  FleetController c({});
  const int wrong = c.AddEngine(), right = c.AddEngine();
  c.AnswerKnown(wrong);
  c.AnswerKnown(right);
  EXPECT_EQ(c.state(wrong), EngineState::kServing);
  EXPECT_EQ(Names(c.Observe(wrong, 0, Idle())), (std::vector<std::string>{"probe:known answer from an earlier leader"}));
  EXPECT_TRUE(c.Observe(wrong, kSecond, Idle()).empty());  // one probe at a time
  EXPECT_EQ(Names(c.ProbeDone(wrong, kSecond, ProbeOutcome::kMismatch)),
            (std::vector<std::string>{"drain:answer mismatch", "cordon:answer mismatch"}));
  EXPECT_EQ(c.state(wrong), EngineState::kCordoned);
  EXPECT_EQ(Names(c.Observe(right, 0, Idle())), (std::vector<std::string>{"probe:known answer from an earlier leader"}));
  EXPECT_TRUE(c.ProbeDone(right, kSecond, ProbeOutcome::kMatch).empty());
  // Probed once: with no probe period, not again.
  for (int i = 2; i <= 10; ++i) EXPECT_TRUE(c.Observe(right, i * kMinute, Idle()).empty()) << i;
  EXPECT_EQ(c.state(right), EngineState::kServing);
}


// A serving engine that is busy without progress since the last scrape gets no periodic
// probe: it may be hung, and the probe would wait out its timeout (holding the driver's round)
// where the hang rule decides within hang_after.
TEST(FleetController, NoPeriodicProbeWhileBusyWithoutProgress) {
  FleetControllerOptions o;
  o.probe_period = 10 * kSecond;
  Fleet f(o);
  EXPECT_TRUE(f.c.Observe(f.e, 9 * kSecond, Busy(5)).empty());
  EXPECT_TRUE(f.c.Observe(f.e, 10 * kSecond, Busy(5)).empty()) << "stuck since the last scrape";
  EXPECT_TRUE(f.c.Observe(f.e, 11 * kSecond, Busy(5)).empty());
  EXPECT_EQ(Names(f.c.Observe(f.e, 12 * kSecond, Busy(6))), (std::vector<std::string>{"probe:periodic"}));
}

// The simulator's failure model drives this object with its `faults.detection` schedule: the
// scrape is the heartbeat, so a crash takes the heartbeat timeout's worth of failed scrapes.
TEST(FleetController, OptionsForADetectionScheduleDecideAsItsHealthChecker) {
  DetectionOptions d;  // 1 s beats, dead after 10 s, 30 s watchdog, a probe every 5 minutes
  FleetControllerOptions o = ControllerOptionsFor(d);
  EXPECT_EQ(o.crash_after_failed_probes, 10);
  EXPECT_EQ(o.hang_after, 30 * kSecond);
  EXPECT_EQ(o.probe_period, 5 * kMinute);
  d.heartbeat_interval = 3 * kSecond;  // a partial interval still needs its scrape
  EXPECT_EQ(ControllerOptionsFor(d).crash_after_failed_probes, 4);
  d.heartbeat_timeout = 0;
  EXPECT_EQ(ControllerOptionsFor(d).crash_after_failed_probes, 1);
}

// Passive ejection is the gateway's: once it has ejected the engine for errors, one failed
// scrape is enough.
TEST(FleetController, AnEngineTheGatewayEjectedIsACrashAtItsFirstFailedScrape) {
  FleetControllerOptions o;
  o.crash_after_failed_probes = 10;
  Fleet f(o);
  EngineObservation down;
  EXPECT_TRUE(f.c.Observe(f.e, kSecond, down).empty());
  down.gateway_ejected = true;
  EXPECT_EQ(Names(f.c.Observe(f.e, 2 * kSecond, down)), (std::vector<std::string>{"drain:crash", "restart:crash"}));
  // Reachable but ejected (a slow network, say): not a crash.
  Fleet g(o);
  EngineObservation up = Idle(1);
  up.gateway_ejected = true;
  EXPECT_TRUE(g.c.Observe(g.e, kSecond, up).empty());
}

TEST(FleetController, MaintenanceDrainsRestartsAndReadmitsThroughTheGate) {
  Fleet f;
  EXPECT_EQ(Names(f.c.Maintain(f.e, kSecond)), (std::vector<std::string>{"drain:maintenance", "restart:maintenance"}));
  EXPECT_TRUE(f.c.Maintain(f.e, 2 * kSecond).empty());  // not serving: already handled
  EXPECT_TRUE(f.c.Observe(f.e, 3 * kSecond, {}).empty());  // down while it is restarted
  EXPECT_EQ(Names(f.c.Observe(f.e, 4 * kSecond, Idle())), (std::vector<std::string>{"warmup:back after restart"}));
  EXPECT_EQ(Names(f.c.WarmupDone(f.e, 4 * kSecond, ProbeOutcome::kMatch, 3)),
            (std::vector<std::string>{"readmit:warmup passed"}));
}

// Cordoned is out until an operator acts; once the operator has replaced the suspect part, the
// engine is re-admitted only through the gate, against the answer recorded at admission.
TEST(FleetController, ARepairedCordonedEngineComesBackThroughTheGate) {
  FleetControllerOptions o;
  o.probe_period = 10 * kSecond;
  Fleet f(o);
  f.c.Observe(f.e, 10 * kSecond, Idle());
  f.c.ProbeDone(f.e, 10 * kSecond, ProbeOutcome::kMismatch);
  ASSERT_EQ(f.c.state(f.e), EngineState::kCordoned);
  f.c.Repaired(f.e, 20 * kSecond);
  EXPECT_EQ(f.c.state(f.e), EngineState::kRecovering);
  EXPECT_TRUE(f.c.Observe(f.e, 21 * kSecond, {}).empty());
  EXPECT_EQ(Names(f.c.Observe(f.e, 22 * kSecond, Idle())), (std::vector<std::string>{"warmup:back after restart"}));
  // Still wrong after the repair: cordoned again.
  EXPECT_EQ(Names(f.c.WarmupDone(f.e, 22 * kSecond, ProbeOutcome::kMismatch, 3)),
            (std::vector<std::string>{"cordon:answer mismatch"}));
  f.c.Repaired(f.e, 30 * kSecond);
  f.c.Observe(f.e, 31 * kSecond, Idle());
  EXPECT_EQ(Names(f.c.WarmupDone(f.e, 31 * kSecond, ProbeOutcome::kMatch, 3)),
            (std::vector<std::string>{"readmit:warmup passed"}));
  f.c.Repaired(f.e, 40 * kSecond);  // not cordoned: nothing
  EXPECT_EQ(f.c.state(f.e), EngineState::kServing);
}

TEST(FleetController, AStragglersActionsNameItsRankAndEvictionCanBeOff) {
  for (bool evict : {true, false}) {
    FleetControllerOptions o;
    o.evict_stragglers = evict;
    Fleet f(o);
    std::vector<FleetAction> all;
    for (int w = 1; w <= 2 * o.straggler.windows; ++w) {
      EngineObservation obs = Busy(w * 100.0);
      obs.rank_step_times = {0.020, 0.020, 0.020, 0.030};
      for (auto& a : f.c.Observe(f.e, w * kSecond, obs)) {
        if (a.kind == ActionKind::kDrain || a.kind == ActionKind::kRestart) all.push_back(a);
      }
    }
    if (evict) {
      ASSERT_EQ(all.size(), 2u);
      EXPECT_EQ(all[0].rank, 3);
      EXPECT_EQ(all[1].rank, 3);
    } else {
      EXPECT_TRUE(all.empty());
      EXPECT_EQ(f.c.state(f.e), EngineState::kServing);
      // Still on the radar.
      ASSERT_FALSE(f.c.Radar(1).empty());
      EXPECT_EQ(f.c.Radar(1)[0].rank, 3);
    }
  }
}

// A restarted engine that answers scrapes but never passes the gate (it died or hung again
// before it) is restarted again after restart_timeout, not gated forever.
TEST(FleetController, AnEngineFailingTheGateForRestartTimeoutIsRestartedAgain) {
  Fleet f;
  f.c.Observe(f.e, kSecond, {});
  f.c.Observe(f.e, 2 * kSecond, {});  // crash at 2 s
  const Nanos timeout = f.c.options().restart_timeout;
  f.c.Observe(f.e, 10 * kSecond, Busy(1));
  EXPECT_TRUE(f.c.WarmupDone(f.e, 10 * kSecond, ProbeOutcome::kNoAnswer, 0).empty());
  f.c.Observe(f.e, 2 * kSecond + timeout, Busy(1));
  EXPECT_EQ(Names(f.c.WarmupDone(f.e, 2 * kSecond + timeout, ProbeOutcome::kNoAnswer, 0)),
            (std::vector<std::string>{"restart:not through the gate after restart"}));
  EXPECT_EQ(f.c.state(f.e), EngineState::kRecovering);
}

}  // namespace
}  // namespace myriad::policy
