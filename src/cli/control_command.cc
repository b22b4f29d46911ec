#include "cli/control_command.h"

#include <fmt/format.h>

#include <cstdio>

#include "cli/stop_signals.h"
#include "control/controller.h"
#include "net/http.h"

namespace myriad::cli {

ControlCommand::ControlCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("control",
                            "Watch the engines (hangs, crashes, stragglers) and drain, restart and re-admit them "
                            "until SIGINT or SIGTERM (docs/controller.md)");
  cmd_->add_option("--config", config_, "controller YAML (engines or gateway, detection, gate, actuators)")
      ->required();
  cmd_->add_option("--listen", listen_, "HOST:PORT of /metrics and /admin/engines, overriding the config's");
  cmd_->add_flag("--dry-run", dry_run_, "log each action as a JSON line and carry none out");
  cmd_->add_flag("--check", check_, "validate the config and exit");
}

int ControlCommand::Run() {
  auto config = control::LoadControlConfig(config_);
  if (!config.ok()) {
    fmt::print(stderr, "myriad control: {}\n", std::string(config.status().message()));
    return 2;
  }
  if (!listen_.empty()) {
    if (!net::ParseHostPort(listen_).ok()) {
      fmt::print(stderr, "myriad control: --listen: '{}' is not HOST:PORT\n", listen_);
      return 2;
    }
    config->listen = listen_;
  }
  config->dry_run |= dry_run_;
  if (check_) {
    fmt::print("config ok: listen {}, {} engines{}, hang_after {}\n", config->listen, config->engines.size(),
               config->engines.empty() ? " (from the gateway)" : "", FormatDuration(config->policy.hang_after));
    return 0;
  }
  auto ctl = control::Controller::Create(*config);
  if (!ctl.ok()) {
    fmt::print(stderr, "myriad control: {}: {}\n", config_, std::string(ctl.status().message()));
    return 2;
  }
  (*ctl)->set_log([](const std::string& line) {
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  });
  StopSignals signals;  // before any thread starts
  if (absl::Status st = (*ctl)->Start(); !st.ok()) {
    fmt::print(stderr, "myriad control: {}\n", std::string(st.message()));
    return 1;
  }
  fmt::print(stderr, "myriad control: listening on {} (port {}){}\n", config->listen, (*ctl)->port(),
             config->dry_run ? ", dry run" : "");
  signals.Wait();
  (*ctl)->Stop();
  return 0;
}

}  // namespace myriad::cli
