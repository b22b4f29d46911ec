#pragma once
// `myriad loadgen --url http://HOST:PORT [--concurrency N] [--duration 10s | --requests N] ...`
// sends OpenAI completion requests (cli/loadgen.h) and prints one table of counts, errors by
// kind, throughput, latency and TTFT quantiles, or the same as JSON with --json.
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/loadgen.h"

namespace myriad::cli {

class LoadgenCommand {
 public:
  explicit LoadgenCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int Run();

 private:
  CLI::App* cmd_;
  LoadgenOptions o_;
  std::string duration_;
  std::string timeout_ = "60s";
  bool json_ = false;
};

}  // namespace myriad::cli
