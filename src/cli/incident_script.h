#pragma once
// An incident script (docs/controller.md, "The incident script"): a fleet, a load, the
// controller's config and faults at given times. Two players read it: `myriad incident`
// (the simulator, sim/fleet_incident.h) and bench/control_incident.sh (`myriad up --control`
// with emulated engines, the faults through the emulator's fault API, `myriad loadgen`), which
// reads it through `myriad incident --plan`: one parser, one validation.
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "sim/fleet_incident.h"

namespace myriad::cli {

// Bounds (docs/controller.md).
inline constexpr int kMaxIncidentEngines = 64;  // myriad up --engines
inline constexpr int kMaxIncidentRanks = 64;
inline constexpr Nanos kMaxIncidentDuration = kHour;
inline constexpr double kMaxIncidentRate = 10'000;
inline constexpr int kMaxIncidentConcurrency = 10'000;
inline constexpr int kMaxIncidentTokens = 16'384;
inline constexpr size_t kMaxIncidentFaults = 1000;
inline constexpr double kMaxSlowFactor = 1000;
inline constexpr Nanos kMaxRestartTime = 10 * kMinute;

struct IncidentScript {
  std::string path;
  sim::FleetIncident incident;  // what both worlds share; incident.driver from the control config
  double speed = 1;             // the emulated engines' speed (the real world only)
  int concurrency = 64;         // loadgen's bound on requests in flight (the real world only)
  std::string control_config;   // the controller's YAML, resolved against the script's folder; "": defaults
};

// InvalidArgument naming the file, line and key; the control config's own errors name it.
absl::StatusOr<IncidentScript> LoadIncidentScript(const std::string& path);

// The script as the real-world player needs it: every value resolved (durations in seconds).
nlohmann::ordered_json IncidentPlan(const IncidentScript& s);

}  // namespace myriad::cli
