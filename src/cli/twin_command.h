#pragma once
// `myriad twin DESCRIPTION.yaml [--out DIR] [--json] [--check] [--sim-only]`: issue 19's twin
// check (cli/twin.h). Prints the simulated and live runs side by side; with --check the exit
// code is 1 when a target is missed.
#include <string>

#include <CLI/CLI.hpp>

namespace myriad::cli {

class TwinCommand {
 public:
  explicit TwinCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int Run();

 private:
  CLI::App* cmd_;
  std::string description_, out_;
  double speed_ = 0;
  bool json_ = false, check_ = false, sim_only_ = false;
};

}  // namespace myriad::cli
