#include "policy/fleet_controller.h"

#include <algorithm>
#include <utility>

namespace myriad::policy {

std::string_view EngineStateName(EngineState s) {
  switch (s) {
    case EngineState::kAdmitting: return "admitting";
    case EngineState::kServing: return "serving";
    case EngineState::kRecovering: return "recovering";
    case EngineState::kWarmup: return "warmup";
    case EngineState::kCordoned: return "cordoned";
  }
  return "";
}

std::string_view ActionName(ActionKind k) {
  switch (k) {
    case ActionKind::kRecordAnswer: return "record_answer";
    case ActionKind::kDrain: return "drain";
    case ActionKind::kRestart: return "restart";
    case ActionKind::kWarmup: return "warmup";
    case ActionKind::kReadmit: return "readmit";
    case ActionKind::kCordon: return "cordon";
    case ActionKind::kProbe: return "probe";
    case ActionKind::kChangeRole: return "change_role";
  }
  return "";
}

FleetControllerOptions ControllerOptionsFor(const DetectionOptions& d) {
  FleetControllerOptions o;
  o.hang_after = d.watchdog_timeout;
  const Nanos every = std::max<Nanos>(d.heartbeat_interval, 1);
  o.crash_after_failed_probes = static_cast<int>(std::max<Nanos>(1, (d.heartbeat_timeout + every - 1) / every));
  o.probe_period = d.probe_interval;
  return o;
}

int FleetController::AddEngine() {
  Engine e;
  // Only failed checks count here: a scrape is this controller's active check.
  e.probes = BackendHealth(BackendHealthOptions{.eject_after_errors = 0,
                                                .unhealthy_after_failed_checks = o_.crash_after_failed_probes});
  engines_.push_back(std::move(e));
  return static_cast<int>(engines_.size()) - 1;
}

void FleetController::Evict(int engine, Nanos now, std::string reason, std::vector<FleetAction>& out, int rank) {
  Engine& e = At(engine);
  e.state = EngineState::kRecovering;
  e.restarted_at = now;
  e.stalled = reason == "hang";
  e.stalled_progress = e.progress;
  e.seen = false;
  e.gate_pending = false;
  e.drained = true;
  e.probes.Reset();
  if (e.detector) e.detector->Reset();  // the rebuilt engine's ranks start afresh
  out.push_back({ActionKind::kDrain, engine, reason, "", rank});
  out.push_back({ActionKind::kRestart, engine, std::move(reason), "", rank});
}

std::vector<FleetAction> FleetController::Observe(int engine, Nanos now, const EngineObservation& obs) {
  std::vector<FleetAction> out;
  Engine& e = At(engine);
  if (e.state == EngineState::kCordoned) return out;
  const HealthChange change = e.probes.RecordCheck(obs.reachable);
  if (!obs.reachable) {
    const bool watched = e.state == EngineState::kServing || e.state == EngineState::kAdmitting;
    // The gateway's own count of errors is a second witness: no need to wait for more scrapes.
    if (watched && (change == HealthChange::kUnhealthy || obs.gateway_ejected)) {
      Evict(engine, now, "crash", out);
    } else if (e.state == EngineState::kRecovering && now - e.restarted_at >= o_.restart_timeout) {
      e.restarted_at = now;
      out.push_back({ActionKind::kRestart, engine, "still unreachable after restart"});
    }
    return out;
  }
  // Progress: a counter that moved (or went back: a restarted process) or nothing in flight.
  const bool busy = obs.running + obs.waiting > 0;
  if (e.state == EngineState::kRecovering && e.stalled && busy && obs.progress == e.stalled_progress) {
    if (now - e.restarted_at >= o_.restart_timeout) {
      e.restarted_at = now;
      out.push_back({ActionKind::kRestart, engine, "still hung after restart"});
    }
    return out;
  }
  if (!e.seen || obs.progress != e.progress || !busy) e.progress_at = now;
  e.seen = true;
  e.progress = obs.progress;
  switch (e.state) {
    case EngineState::kAdmitting:
      if (!e.gate_pending) {
        e.gate_pending = true;
        out.push_back({ActionKind::kRecordAnswer, engine, "admission"});
      }
      return out;
    case EngineState::kRecovering:
      if (!e.admitted) {
        e.state = EngineState::kAdmitting;
        e.gate_pending = true;
        out.push_back({ActionKind::kRecordAnswer, engine, "back after restart"});
        return out;
      }
      e.state = EngineState::kWarmup;
      e.gate_pending = true;
      out.push_back({ActionKind::kWarmup, engine, "back after restart"});
      return out;
    case EngineState::kWarmup:
    case EngineState::kCordoned:
      return out;
    case EngineState::kServing:
      break;
  }
  if (busy && now - e.progress_at >= o_.hang_after) {
    Evict(engine, now, "hang", out);
    return out;
  }
  // Not while busy without progress since the last scrape: a hung engine would hold the probe
  // (and the driver's round) for the probe's whole timeout, while the hang rule decides it.
  const bool moving = e.progress_at == now;
  if (moving && !e.gate_pending &&
      (e.probe_due || (o_.probe_period > 0 && now - e.probed_at >= o_.probe_period))) {
    e.gate_pending = true;
    out.push_back({ActionKind::kProbe, engine, e.probe_due ? "known answer from an earlier leader" : "periodic"});
    e.probe_due = false;
  }
  const size_t ranks = obs.rank_step_times.size();
  if (ranks >= 3) {  // a median of two ranks cannot single one out
    if (!e.detector || static_cast<size_t>(e.detector->ranks()) != ranks) {
      e.detector = std::make_unique<StragglerDetector>(static_cast<int>(ranks), o_.straggler);
    }
    const auto flagged = e.detector->Observe(obs.rank_step_times);
    if (!flagged.empty() && o_.evict_stragglers) {
      Evict(engine, now, "straggler rank " + std::to_string(flagged.front()), out, flagged.front());
    }
  }
  return out;
}

std::vector<FleetAction> FleetController::ChangeRole(int engine, Nanos now, const std::string& role) {
  if (At(engine).state != EngineState::kServing) return {};
  std::vector<FleetAction> out;
  const std::string reason = "change role to " + role;
  Evict(engine, now, reason, out);
  // The restart is the role change's own: one process stop and start, with the new role.
  out.back() = {ActionKind::kChangeRole, engine, reason, role};
  return out;
}

std::vector<FleetAction> FleetController::Maintain(int engine, Nanos now) {
  if (At(engine).state != EngineState::kServing) return {};
  std::vector<FleetAction> out;
  Evict(engine, now, "maintenance", out);
  return out;
}

void FleetController::Repaired(int engine, Nanos now) {
  Engine& e = At(engine);
  if (e.state != EngineState::kCordoned) return;
  e.state = EngineState::kRecovering;
  e.restarted_at = now;
  e.stalled = false;
  e.seen = false;
  e.gate_pending = false;
  e.probes.Reset();
  if (e.detector) e.detector->Reset();
}

void FleetController::AnswerKnown(int engine) {
  Engine& e = At(engine);
  if (e.state != EngineState::kAdmitting || e.seen) return;
  e.admitted = true;
  e.state = EngineState::kServing;
  e.probe_due = true;
}

std::vector<FleetAction> FleetController::AnswerRecorded(int engine, bool ok) {
  Engine& e = At(engine);
  if (e.state != EngineState::kAdmitting) return {};
  e.gate_pending = false;
  // A failed recording is tried again at the next scrape that reaches the engine.
  if (!ok) return {};
  e.admitted = true;
  e.state = EngineState::kServing;
  e.probed_at = e.progress_at;
  if (!e.drained) return {};
  e.drained = false;
  return {{ActionKind::kReadmit, engine, "answer recorded"}};
}

std::vector<FleetAction> FleetController::WarmupDone(int engine, Nanos now, ProbeOutcome probe, int completed) {
  Engine& e = At(engine);
  if (e.state != EngineState::kWarmup) return {};
  e.gate_pending = false;
  e.stalled = false;
  if (probe == ProbeOutcome::kMismatch) {
    e.state = EngineState::kCordoned;
    return {{ActionKind::kCordon, engine, "answer mismatch"}};
  }
  if (probe == ProbeOutcome::kNoAnswer || completed < o_.warmup_requests) {
    // Not warm yet (or it failed again): the next scrape that reaches it runs the gate again,
    // unless it has been failing the gate for restart_timeout since its restart.
    e.state = EngineState::kRecovering;
    if (now - e.restarted_at < o_.restart_timeout) return {};
    e.restarted_at = now;
    return {{ActionKind::kRestart, engine, "not through the gate after restart"}};
  }
  e.state = EngineState::kServing;
  e.drained = false;
  e.progress_at = now;
  e.probed_at = now;
  e.probes.Reset();
  return {{ActionKind::kReadmit, engine, "warmup passed"}};
}

std::vector<FleetAction> FleetController::ProbeDone(int engine, Nanos now, ProbeOutcome probe) {
  Engine& e = At(engine);
  if (e.state != EngineState::kServing || !e.gate_pending) return {};
  e.gate_pending = false;
  if (probe == ProbeOutcome::kMismatch) {
    e.state = EngineState::kCordoned;
    e.drained = true;
    return {{ActionKind::kDrain, engine, "answer mismatch"}, {ActionKind::kCordon, engine, "answer mismatch"}};
  }
  // No answer: probed again after another period, while the scrapes decide whether it is down.
  e.probed_at = now;
  return {};
}

std::vector<RadarEntry> FleetController::Radar(size_t k) const {
  std::vector<const StragglerDetector*> detectors;
  for (const Engine& e : engines_) detectors.push_back(e.detector.get());
  return TopRadar(detectors, k);
}

}  // namespace myriad::policy
