#pragma once
// `myriad incident SCRIPT [--plan]`: plays an incident script (cli/incident_script.h) in the
// simulator, with policy::FleetController driving the simulated engines, and prints the
// controller's timeline as `myriad control` logs it (one JSON line per action, t_s from the
// start of the load). --plan prints the validated script as JSON for the real-world player,
// bench/control_incident.sh.
#include <string>

#include <CLI/CLI.hpp>

namespace myriad::cli {

class IncidentCommand {
 public:
  explicit IncidentCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int Run();

 private:
  CLI::App* cmd_;
  std::string script_;
  bool plan_ = false;
};

}  // namespace myriad::cli
