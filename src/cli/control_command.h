#pragma once
// `myriad control --config control.yaml [--dry-run] [--check] [--listen HOST:PORT]`: the
// controller (control/controller.h) until SIGINT or SIGTERM; one JSON line per action on stdout.
#include <string>

#include <CLI/CLI.hpp>

namespace myriad::cli {

class ControlCommand {
 public:
  explicit ControlCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int Run();

 private:
  CLI::App* cmd_;
  std::string config_;
  std::string listen_;
  bool dry_run_ = false;
  bool check_ = false;
};

}  // namespace myriad::cli
