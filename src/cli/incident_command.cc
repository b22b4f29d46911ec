#include "cli/incident_command.h"

#include <fmt/format.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/incident_script.h"
#include "sim/fleet_incident.h"

namespace myriad::cli {

IncidentCommand::IncidentCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("incident",
                            "Play an incident script (faults under load) in the simulator with the controller's "
                            "policy, and print its timeline (docs/controller.md)");
  cmd_->add_option("script", script_, "incident script YAML")->required();
  cmd_->add_flag("--plan", plan_, "validate the script and print it as JSON (for bench/control_incident.sh)");
}

int IncidentCommand::Run() {
  auto script = LoadIncidentScript(script_);
  if (!script.ok()) {
    fmt::print(stderr, "myriad incident: {}\n", std::string(script.status().message()));
    return 2;
  }
  if (plan_) {
    fmt::print("{}\n", IncidentPlan(*script).dump());
    return 0;
  }
  auto result = sim::RunFleetIncident(script->incident);
  if (!result.ok()) {
    fmt::print(stderr, "myriad incident: {}: {}\n", script_, std::string(result.status().message()));
    return 1;
  }
  for (const sim::ControllerEvent& e : result->timeline) {
    nlohmann::ordered_json line = {{"t_s", NanosToSeconds(e.at)}, {"action", e.action},
                                   {"target", fmt::format("engine-{}", e.engine)}, {"reason", e.reason}};
    if (!e.probe.empty()) line["probe"] = e.probe;
    fmt::print("{}\n", line.dump());
  }
  fmt::print(stderr, "myriad incident: {} requests arrived, {} completed, {} rejected\n", result->arrived,
             result->completed, result->rejected);
  return 0;
}

}  // namespace myriad::cli
