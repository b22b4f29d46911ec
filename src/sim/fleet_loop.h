#pragma once
// The controller's loop in a simulated world: scrapes on virtual time, the one decision core
// (policy::FleetController), actions carried out by the world. Shared by `myriad incident`
// (sim/fleet_driver.h) and the 10k-GPU failure model (sim/failures.h).
#include <cstddef>
#include <string>
#include <vector>

#include "core/time.h"
#include "policy/fleet_controller.h"
#include "sim/event_queue.h"

namespace myriad::sim {

// One line of the controller's timeline, as `myriad control` logs it.
struct ControllerEvent {
  Nanos at = 0;
  int engine = 0;
  std::string action;  // policy::ActionName
  std::string reason;
  std::string probe;   // the gate's and the periodic probe's outcome; "" for other actions
};

// policy::FleetController driven in a simulated world: every scrape interval each engine's
// observation goes to the controller, and the actions it returns are carried out by the world
// (a subclass), which also answers the known-answer probes; their outcomes are fed back. Two
// worlds: FleetDriver below (`myriad incident`) and the 10k-GPU failure model
// (sim/failures.h, its recovery pipeline). It decides nothing itself.
class FleetLoop {
 public:
  FleetLoop(policy::FleetControllerOptions options, EventQueue& events, size_t engines, Nanos scrape_interval);
  virtual ~FleetLoop() = default;

  const std::vector<ControllerEvent>& timeline() const { return timeline_; }
  policy::EngineState state(int engine) const { return policy_.state(engine); }

 protected:
  // Scrapes every engine now, then every interval while it is no later than `horizon`.
  void StartScrapes(Nanos horizon);
  // Carries out actions in order (a scrape's, or an operator's request's), the gate's
  // outcomes feeding more.
  void Carry(int engine, std::vector<policy::FleetAction> actions);
  policy::FleetController& controller() { return policy_; }
  const policy::FleetController& controller() const { return policy_; }
  EventQueue& loop_events() { return events_; }

  virtual void BeginRound() {}
  virtual policy::EngineObservation Observe(int engine) = 0;
  // The known-answer probe's outcome now: kNoAnswer from an engine down, stopped or restarting.
  virtual policy::ProbeOutcome Probe(int engine) = 0;
  // record_answer got an answer: the world records what the engine answers now.
  virtual void Recorded(int /*engine*/) {}
  // drain, readmit, cordon, restart, change_role.
  virtual void Act(int engine, const policy::FleetAction& a) = 0;

 private:
  void Round();
  void Log(int engine, const policy::FleetAction& a, std::string probe = "");

  policy::FleetController policy_;
  EventQueue& events_;
  Nanos interval_;
  Nanos horizon_ = 0;
  std::vector<ControllerEvent> timeline_;
};

}  // namespace myriad::sim
