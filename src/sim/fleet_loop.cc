#include "sim/fleet_loop.h"

#include <deque>
#include <utility>

namespace myriad::sim {

using policy::ActionKind;
using policy::ProbeOutcome;

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

FleetLoop::FleetLoop(policy::FleetControllerOptions options, EventQueue& events, size_t engines, Nanos scrape_interval)
    : policy_(options), events_(events), interval_(scrape_interval) {
  for (size_t i = 0; i < engines; ++i) policy_.AddEngine();
}

void FleetLoop::StartScrapes(Nanos horizon) {
  horizon_ = horizon;
  events_.At(events_.now(), [this] { Round(); });
}

void FleetLoop::Round() {
  BeginRound();
  const Nanos now = events_.now();
  for (size_t i = 0; i < policy_.engines(); ++i) {
    const int engine = static_cast<int>(i);
    std::vector<policy::FleetAction> actions = policy_.Observe(engine, now, Observe(engine));
    if (!actions.empty()) Carry(engine, std::move(actions));
  }
  if (now + interval_ <= horizon_) events_.After(interval_, [this] { Round(); });
}

void FleetLoop::Log(int engine, const policy::FleetAction& a, std::string probe) {
  timeline_.push_back({events_.now(), engine, std::string(policy::ActionName(a.kind)), a.reason, std::move(probe)});
}

void FleetLoop::Carry(int engine, std::vector<policy::FleetAction> actions) {
  std::deque<policy::FleetAction> todo(actions.begin(), actions.end());
  while (!todo.empty()) {
    const policy::FleetAction a = std::move(todo.front());
    todo.pop_front();
    std::vector<policy::FleetAction> more;
    const Nanos now = events_.now();
    switch (a.kind) {
      case ActionKind::kRecordAnswer: {
        const ProbeOutcome p = Probe(engine);
        // Whatever it answers is recorded, a wrong answer included.
        if (p != ProbeOutcome::kNoAnswer) Recorded(engine);
        Log(engine, a);
        more = policy_.AnswerRecorded(engine, p != ProbeOutcome::kNoAnswer);
        break;
      }
      case ActionKind::kWarmup: {
        const ProbeOutcome p = Probe(engine);
        // A matching engine is up and serves its warmup requests.
        const int completed = p == ProbeOutcome::kMatch ? policy_.options().warmup_requests : 0;
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
      case ActionKind::kReadmit:
      case ActionKind::kRestart:
      case ActionKind::kChangeRole:
        Log(engine, a);
        Act(engine, a);
        break;
    }
    todo.insert(todo.end(), more.begin(), more.end());
  }
}

}  // namespace myriad::sim
