#pragma once
// `myriad gateway --config gateway.yaml [--listen HOST:PORT]` serves the OpenAI-compatible,
// KV-aware gateway (gateway/gateway.h) until SIGINT or SIGTERM. `--check` only validates the
// configuration and prints it as the gateway will run it.
#include <string>

#include <CLI/CLI.hpp>

namespace myriad::cli {

class GatewayCommand {
 public:
  explicit GatewayCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int Run();

 private:
  CLI::App* cmd_;
  std::string config_;
  std::string listen_;
  bool check_ = false;
};

}  // namespace myriad::cli
