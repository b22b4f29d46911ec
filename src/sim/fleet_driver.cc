#include "sim/fleet_driver.h"

#include <deque>
#include <utility>

namespace myriad::sim {

using policy::ActionKind;
using policy::ProbeOutcome;

FleetDriver::FleetDriver(FleetDriverOptions options, EventQueue& events,
                         const std::vector<std::unique_ptr<Unit>>& units, FailureHost& host)
    : o_(std::move(options)), events_(events), units_(units), host_(host), policy_(o_.policy) {
  for (size_t i = 0; i < units_.size(); ++i) policy_.AddEngine();
  engines_.resize(units_.size());
}

void FleetDriver::Start(Nanos horizon, const std::vector<IncidentFault>& faults) {
  horizon_ = horizon;
  for (const IncidentFault& f : faults) events_.At(f.at, [this, f] { Inject(f); });
  events_.At(0, [this] { Round(); });
}

void FleetDriver::Inject(const IncidentFault& f) {
  Engine& e = engines_.at(static_cast<size_t>(f.engine));
  Unit& u = *units_[static_cast<size_t>(f.engine)];
  switch (f.kind) {
    case IncidentFaultKind::kCrash:
      e.crashed = true;
      if (!u.halted()) u.Halt();
      break;
    case IncidentFaultKind::kHang:
      e.hung = true;
      if (!u.halted()) u.Halt();
      break;
    case IncidentFaultKind::kSlow:
      // A synchronous unit waits for its slowest rank: every step stretches, and that rank's
      // own compute time is the one the telemetry singles out.
      e.slow_rank = f.rank;
      e.slow = f.factor;
      u.set_slowdown(f.factor);
      break;
    case IncidentFaultKind::kWrongAnswer:
      e.wrong = true;
      break;
  }
}

void FleetDriver::Round() {
  for (size_t i = 0; i < units_.size(); ++i) {
    const int engine = static_cast<int>(i);
    Carry(engine, policy_.Observe(engine, events_.now(), Observe(engine)));
  }
  if (events_.now() + o_.scrape_interval <= horizon_) events_.After(o_.scrape_interval, [this] { Round(); });
}

policy::EngineObservation FleetDriver::Observe(int engine) {
  policy::EngineObservation obs;
  Engine& e = engines_[static_cast<size_t>(engine)];
  const Unit& u = *units_[static_cast<size_t>(engine)];
  if (e.crashed || e.restarting) return obs;  // connection refused
  obs.reachable = true;
  const policy::UnitLoad load = u.Load();
  obs.running = load.running;
  obs.waiting = load.waiting;
  obs.progress = static_cast<double>(u.stats().decode_tokens);
  const uint64_t steps = u.stats().steps;
  const Nanos busy = u.stats().busy;
  if (steps > e.steps_seen && o_.ranks > 0) {
    // The window's mean step time; the healthy ranks' own share of it is the step without the
    // slow rank's stretch.
    const double mean = NanosToSeconds(busy - e.busy_seen) / static_cast<double>(steps - e.steps_seen);
    const double base = mean / u.slowdown();
    obs.rank_step_times.assign(static_cast<size_t>(o_.ranks), base);
    if (e.slow_rank >= 0 && e.slow_rank < o_.ranks) obs.rank_step_times[static_cast<size_t>(e.slow_rank)] = base * e.slow;
  }
  e.steps_seen = steps;
  e.busy_seen = busy;
  return obs;
}

ProbeOutcome FleetDriver::Probe(int engine) const {
  const Engine& e = engines_[static_cast<size_t>(engine)];
  if (e.crashed || e.restarting || e.hung) return ProbeOutcome::kNoAnswer;
  return e.wrong == e.recorded_wrong ? ProbeOutcome::kMatch : ProbeOutcome::kMismatch;
}

void FleetDriver::Restart(int engine) {
  Engine& e = engines_[static_cast<size_t>(engine)];
  Unit& u = *units_[static_cast<size_t>(engine)];
  e.restarting = true;
  if (!u.halted()) u.Halt();
  host_.EvacuateUnit(engine);
  events_.After(o_.restart_time, [this, engine] {
    Engine& e = engines_[static_cast<size_t>(engine)];
    Unit& u = *units_[static_cast<size_t>(engine)];
    // A fresh process: the faults of the old one are gone with it.
    e = Engine{.recorded_wrong = e.recorded_wrong, .steps_seen = u.stats().steps, .busy_seen = u.stats().busy};
    u.set_slowdown(1);
    u.Resume();
  });
}

void FleetDriver::Log(int engine, const policy::FleetAction& a, std::string probe) {
  timeline_.push_back({events_.now(), engine, std::string(policy::ActionName(a.kind)), a.reason, std::move(probe)});
}

namespace {

std::string ProbeName(ProbeOutcome p) {
  switch (p) {
    case ProbeOutcome::kMatch: return "match";
    case ProbeOutcome::kMismatch: return "mismatch";
    case ProbeOutcome::kNoAnswer: return "no_answer";
  }
  return "";
}

}  // namespace

void FleetDriver::Carry(int engine, std::vector<policy::FleetAction> actions) {
  std::deque<policy::FleetAction> todo(actions.begin(), actions.end());
  Unit& u = *units_[static_cast<size_t>(engine)];
  while (!todo.empty()) {
    const policy::FleetAction a = std::move(todo.front());
    todo.pop_front();
    std::vector<policy::FleetAction> more;
    const Nanos now = events_.now();
    switch (a.kind) {
      case ActionKind::kRecordAnswer: {
        const ProbeOutcome p = Probe(engine);
        // Whatever it answers is recorded, a wrong answer included.
        if (p != ProbeOutcome::kNoAnswer) engines_[static_cast<size_t>(engine)].recorded_wrong = engines_[static_cast<size_t>(engine)].wrong;
        Log(engine, a);
        more = policy_.AnswerRecorded(engine, p != ProbeOutcome::kNoAnswer);
        break;
      }
      case ActionKind::kWarmup: {
        const ProbeOutcome p = Probe(engine);
        // A matching engine is up and serves its warmup requests.
        const int completed = p == ProbeOutcome::kMatch ? o_.policy.warmup_requests : 0;
        Log(engine, a, ProbeName(p));
        more = policy_.WarmupDone(engine, now, p, completed);
        break;
      }
      case ActionKind::kProbe: {
        const ProbeOutcome p = Probe(engine);
        Log(engine, a, ProbeName(p));
        more = policy_.ProbeDone(engine, now, p);
        break;
      }
      case ActionKind::kDrain:
      case ActionKind::kCordon:
        Log(engine, a);
        u.set_routable(false);
        break;
      case ActionKind::kReadmit:
        Log(engine, a);
        u.set_routable(true);
        break;
      case ActionKind::kRestart:
      case ActionKind::kChangeRole:  // a simulated unit keeps its pool's role: a restart
        Log(engine, a);
        Restart(engine);
        break;
    }
    todo.insert(todo.end(), more.begin(), more.end());
  }
}

}  // namespace myriad::sim
