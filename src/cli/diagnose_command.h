#pragma once
// `myriad diagnose`: the scale runbook (policy/diagnose.h) over a simulation's results
// (--sim FILE) or live endpoints (--metrics URL..., or --prometheus URL), printing findings
// ranked by impact (docs/diagnose.md). Bad input (a file, a URL, a flag) exits 2; an endpoint
// that cannot be scraped exits 1.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace myriad::cli {

class DiagnoseCommand {
 public:
  explicit DiagnoseCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int Run();

 private:
  CLI::App* cmd_;
  std::string sim_path_;
  std::vector<std::string> metrics_urls_;
  std::string prometheus_url_;
  std::string router_;
  bool json_ = false;
  int top_ = 10;
};

}  // namespace myriad::cli
