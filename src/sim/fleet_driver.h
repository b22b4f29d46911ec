#pragma once
// The controller in the simulated world: policy::FleetController, the object `myriad control`
// drives against real engines, driven here against simulated units (FleetLoop, which the
// failure model of sim/failures.h drives too), so that one incident
// script gives comparable timelines in both worlds. Every scrape interval it builds each
// engine's EngineObservation from its unit (running and waiting sequences, generated tokens as
// the progress counter, per-rank step times) and carries the actions out: drain and readmit
// flip the unit's routability, a restart evacuates the unit (its requests are retried
// elsewhere, as the gateway retries before the first byte) and brings it back after a modelled
// restart time, the warmup gate's known-answer probe answers wrongly while the wrong_answer
// fault is on. The faults are injected through it, as the emulator's fault API injects them.
// Virtual time only: same seed, same timeline.
#include <memory>
#include <string>
#include <vector>

#include "core/time.h"
#include "policy/fleet_controller.h"
#include "sim/event_queue.h"
#include "sim/failures.h"
#include "sim/fleet_loop.h"
#include "sim/unit.h"

namespace myriad::sim {

enum class IncidentFaultKind { kCrash, kHang, kSlow, kWrongAnswer };

struct IncidentFault {
  Nanos at = 0;
  int engine = 0;
  IncidentFaultKind kind = IncidentFaultKind::kCrash;
  int rank = 0;       // kSlow: the DP rank slowed
  double factor = 1;  // kSlow: its step time multiplied by this
};

struct FleetDriverOptions {
  policy::FleetControllerOptions policy;
  Nanos scrape_interval = kSecond;
  // Stop, start and the first /health answer of a restarted engine (the local actuator's wait).
  Nanos restart_time = kSecond;
  int ranks = 1;  // DP ranks per engine, for the per-rank step times
};

class FleetDriver : public FleetLoop {
 public:
  // The units are the engines, in order; `host` retries the requests of a restarted unit.
  FleetDriver(FleetDriverOptions options, EventQueue& events, const std::vector<std::unique_ptr<Unit>>& units,
              FailureHost& host);

  // Schedules the scrapes (the first at once, as `myriad control` starts) and the faults, up
  // to `horizon`.
  void Start(Nanos horizon, const std::vector<IncidentFault>& faults);

 private:
  struct Engine {
    bool crashed = false, hung = false, wrong = false, restarting = false;
    bool recorded_wrong = false;  // the answer recorded at admission was a wrong one
    int slow_rank = -1;
    double slow = 1;
    uint64_t steps_seen = 0;
    Nanos busy_seen = 0;
  };
  void Inject(const IncidentFault& f);
  policy::EngineObservation Observe(int engine) override;
  policy::ProbeOutcome Probe(int engine) override;
  void Recorded(int engine) override;
  void Act(int engine, const policy::FleetAction& a) override;
  void Restart(int engine);

  FleetDriverOptions o_;
  EventQueue& events_;
  const std::vector<std::unique_ptr<Unit>>& units_;
  FailureHost& host_;
  std::vector<Engine> engines_;
};

}  // namespace myriad::sim
