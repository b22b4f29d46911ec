#pragma once
// `myriad sim SCENARIO.yaml`: runs a scenario in virtual time and reports.
#include <cstdint>
#include <fstream>
#include <optional>
#include <span>
#include <string>

#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "sim/scenario.h"
#include "sim/timeseries.h"

namespace myriad::cli {

class SimCommand {
 public:
  explicit SimCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int Run();

 private:
  int RunCompare(const sim::Scenario& scenario);
  bool wants_series() const { return !report_path_.empty() || !timeseries_path_.empty(); }
  // --report and --timeseries are opened before the run, so an unwritable path fails at once
  // (exit 1) instead of after the simulation; 2 for a bad --sample-interval.
  int PrepareSeriesOutputs();
  int WriteSeriesOutputs(std::span<const nlohmann::ordered_json> reports, std::span<const sim::TimeSeries> series);

  CLI::App* cmd_;
  std::string scenario_path_;
  std::string output_path_;
  std::string request_log_path_;
  std::string report_path_, timeseries_path_;
  std::string sample_interval_text_ = "10s";
  Nanos sample_interval_ = sim::kDefaultSampleInterval;
  std::ofstream report_out_, timeseries_out_;
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
