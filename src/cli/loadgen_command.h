#pragma once
// `myriad loadgen --url http://HOST:PORT [--concurrency N] [--duration 10s | --requests N] ...`
// sends OpenAI completion requests (cli/loadgen.h) and prints one table of counts, errors by
// kind, throughput, latency and TTFT quantiles, or the same as JSON with --json. With --trace FILE
// it replays a recorded trace instead (cli/trace_replay.h), optionally logging every request.
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/loadgen.h"

namespace myriad::cli {

class LoadgenCommand {
 public:
  explicit LoadgenCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int Run();

 private:
  int RunTrace();

  CLI::App* cmd_;
  LoadgenOptions o_;
  std::string duration_;
  std::string timeout_ = "60s";
  bool json_ = false;
  std::string trace_, trace_format_ = "mooncake", log_;
  double time_scale_ = 1.0;
  std::vector<std::string> tenant_keys_;  // with --trace: the API key of each trace tenant
};

}  // namespace myriad::cli
