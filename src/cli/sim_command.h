#pragma once
// `myriad sim SCENARIO.yaml`: runs a scenario in virtual time and reports.
#include <cstdint>
#include <optional>
#include <string>

#include <vector>

#include <CLI/CLI.hpp>

#include "sim/scenario.h"

namespace myriad::cli {

class SimCommand {
 public:
  explicit SimCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int Run();

 private:
  int RunCompare(const sim::Scenario& scenario);

  CLI::App* cmd_;
  std::string scenario_path_;
  std::string output_path_;
  std::string request_log_path_;
  std::optional<uint64_t> seed_;
  std::optional<std::string> router_;
  std::vector<std::string> compare_;
  std::vector<std::string> overrides_;
  double scale_ = 1.0;
  double load_ = 1.0;
  bool quiet_ = false;
  bool json_ = false;
  bool no_progress_ = false;
};

}  // namespace myriad::cli
