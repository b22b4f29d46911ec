#pragma once
// `myriad plan SPEC.yaml`: searches deployments (P/D split, units per pool, layouts, routers,
// batch caps, GPU types) for the lowest cost per million tokens within the SLO, scoring each
// candidate with the simulator on a slice of the cluster (docs/plan.md).
#include <string>

#include <CLI/CLI.hpp>

namespace myriad::cli {

class PlanCommand {
 public:
  explicit PlanCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int Run();

 private:
  CLI::App* cmd_;
  std::string spec_path_, out_path_, json_path_, baseline_path_;
  int jobs_ = 2;
  bool confirm_ = false;
  bool quiet_ = false;
};

}  // namespace myriad::cli
