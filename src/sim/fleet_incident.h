#pragma once
// An incident script played in the simulator: a fleet of identical colocated engines (one unit
// each, `ranks` DP ranks, the emulator's default model and GPU), open-loop load at a rate, the
// faults at their times, and policy::FleetController driving the units through FleetDriver.
// The script's other player is bench/control_incident.sh, against `myriad up --control`.
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "sim/fleet_driver.h"

namespace myriad::sim {

struct FleetIncident {
  int engines = 3;
  int ranks = 1;
  Nanos duration = kMinute;  // load, from t=0; the run lasts until `duration` + `drain`
  Nanos drain = 30 * kSecond;
  double rate = 4;           // requests per second (Poisson)
  int prompt_tokens = 64;
  int max_tokens = 64;
  uint64_t seed = 1;
  FleetDriverOptions driver;  // its `ranks` is set from `ranks`
  std::vector<IncidentFault> faults;
};

struct FleetIncidentResult {
  std::vector<ControllerEvent> timeline;
  int64_t arrived = 0, completed = 0, rejected = 0;
};

absl::StatusOr<FleetIncidentResult> RunFleetIncident(const FleetIncident& incident);

}  // namespace myriad::sim
