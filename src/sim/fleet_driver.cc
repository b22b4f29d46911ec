#include "sim/fleet_driver.h"

#include <utility>

namespace myriad::sim {

using policy::ActionKind;
using policy::ProbeOutcome;

FleetDriver::FleetDriver(FleetDriverOptions options, EventQueue& events,
                         const std::vector<std::unique_ptr<Unit>>& units, FailureHost& host)
    : FleetLoop(options.policy, events, units.size(), options.scrape_interval),
      o_(std::move(options)),
      events_(events),
      units_(units),
      host_(host) {
  engines_.resize(units_.size());
}

void FleetDriver::Start(Nanos horizon, const std::vector<IncidentFault>& faults) {
  for (const IncidentFault& f : faults) events_.At(f.at, [this, f] { Inject(f); });
  StartScrapes(horizon);
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

ProbeOutcome FleetDriver::Probe(int engine) {
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

void FleetDriver::Recorded(int engine) {
  Engine& e = engines_[static_cast<size_t>(engine)];
  e.recorded_wrong = e.wrong;
}

void FleetDriver::Act(int engine, const policy::FleetAction& a) {
  Unit& u = *units_[static_cast<size_t>(engine)];
  switch (a.kind) {
    case ActionKind::kDrain:
    case ActionKind::kCordon:
      u.set_routable(false);
      break;
    case ActionKind::kReadmit:
      u.set_routable(true);
      break;
    case ActionKind::kRestart:
    case ActionKind::kChangeRole:  // a simulated unit keeps its pool's role: a restart
      Restart(engine);
      break;
    default:
      break;
  }
}

}  // namespace myriad::sim
