#include "cli/gateway_command.h"

#include "cli/stop_signals.h"

#include <fmt/format.h>
#include <pthread.h>

#include <csignal>

#include "gateway/gateway.h"
#include "net/http.h"

namespace myriad::cli {

GatewayCommand::GatewayCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("gateway", "Serve the OpenAI-compatible KV-aware gateway until SIGINT or SIGTERM");
  cmd_->add_option("--config", config_, "gateway YAML (backends, routing, tenants, timeouts)")->required();
  cmd_->add_option("--listen", listen_, "HOST:PORT, overriding the config's listen");
  cmd_->add_flag("--check", check_, "validate the config, print the backends, and exit");
}

int GatewayCommand::Run() {
  auto config = gateway::LoadGatewayConfig(config_);
  if (!config.ok()) {
    fmt::print(stderr, "myriad gateway: {}\n", std::string(config.status().message()));
    return 2;
  }
  if (!listen_.empty()) {
    if (!net::ParseHostPort(listen_).ok()) {
      fmt::print(stderr, "myriad gateway: --listen: '{}' is not HOST:PORT\n", listen_);
      return 2;
    }
    config->listen = listen_;
  }
  // Everything start would refuse in the config (policy, performance model, GPU, TP, the
  // tokenizer's files, KV-event endpoints) is refused here too, --check or not: Create builds
  // the gateway without binding or starting anything.
  auto gw = gateway::Gateway::Create(*config);
  if (!gw.ok()) {
    fmt::print(stderr, "myriad gateway: {}: {}\n", config_, std::string(gw.status().message()));
    return 2;
  }
  if (check_) {
    fmt::print("config ok: listen {}, policy {}, {} backends, {} tenants\n", config->listen,
               config->policy, config->backends.size(), config->tenants.size());
    for (const auto& b : config->backends) {
      fmt::print("  {} {} {} model={}\n", b.name, gateway::RoleName(b.role), b.url, b.model);
    }
    return 0;
  }
  StopSignals signals;  // before any thread starts
  if (absl::Status st = (*gw)->Start(); !st.ok()) {
    fmt::print(stderr, "myriad gateway: {}\n", std::string(st.message()));
    return 1;
  }
  fmt::print(stderr, "myriad gateway: listening on {} (port {}), {} backends, policy {}\n",
             config->listen, (*gw)->port(), config->backends.size(), config->policy);
  signals.Wait();
  (*gw)->Stop();
  return 0;
}

}  // namespace myriad::cli
