#pragma once
// `myriad calibrate BENCH.json...`: fits the step model's efficiencies to a user's own vLLM
// benchmark results and writes a hardware profile that a scenario names (docs/calibration.md).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace myriad::cli {

class CalibrateCommand {
 public:
  explicit CalibrateCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int Run();

 private:
  CLI::App* cmd_;
  std::vector<std::string> inputs_;
  std::vector<std::string> holdout_;
  std::string gpu_, model_, output_;
  int tp_ = 1, dp_ = 1, ep_ = 1;
  std::optional<int64_t> batch_size_, input_len_, output_len_;
  bool json_ = false;
};

}  // namespace myriad::cli
