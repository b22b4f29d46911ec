#include "cli/up_command.h"

#include "cli/stop_signals.h"

#include <fmt/format.h>
#include <pthread.h>

#include <csignal>
#include <memory>
#include <random>
#include <vector>

#include "cli/local_engines.h"
#include "control/controller.h"
#include "gateway/gateway.h"
#include "net/http.h"

namespace myriad::cli {

namespace {

// An admin token for the gateway nobody but this process's controller knows.
std::string RandomToken() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
}

}  // namespace

UpCommand::UpCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("up", "Run a local cluster (a gateway and emulated engines) until SIGINT or SIGTERM");
  cmd_->add_option("--port", port_, "gateway port")->check(CLI::Range(0, 65535))->capture_default_str();
  cmd_->add_option("--engines", engines_, "colocated engines (ignored with --prefill/--decode)")
      ->check(CLI::Range(1, 64))->capture_default_str();
  cmd_->add_option("--prefill", prefill_, "prefill engines (P/D)")->check(CLI::Range(0, 64));
  cmd_->add_option("--decode", decode_, "decode engines (P/D)")->check(CLI::Range(0, 64));
  cmd_->add_option("--dp", dp_, "DP ranks per engine, each with its own scheduler (vLLM's --data-parallel-size)")
      ->check(CLI::Range(1, 64))->capture_default_str();
  cmd_->add_option("--speed", speed_, "emulated seconds per real second")->check(CLI::Range(1e-3, 1e6))->capture_default_str();
  cmd_->add_option("--policy", policy_, "routing policy (kv-aware, least-loaded, round-robin, ...)")->capture_default_str();
  cmd_->add_option("--model", model_, "served model name")->capture_default_str();
  cmd_->add_option("--perf-model", perf_model_, "model of the timing")->capture_default_str();
  cmd_->add_option("--gpu", gpu_, "GPU of the timing")->capture_default_str();
  cmd_->add_option("--admin-token", admin_token_, "enables the gateway's admin endpoints");
  cmd_->add_option("--tokenizer", tokenizer_,
                   "the model's tokenizer.json or its folder (with tokenizer_config.json)");
  cmd_->add_flag("--control", control_,
                 "run the controller over these engines: it drains them in the gateway and restarts them "
                 "itself (stop, start on the same port, wait for /health)");
  cmd_->add_option("--control-config", control_config_,
                   "controller YAML for --control (detection, gate, hooks, ha); its engines and gateway are "
                   "this cluster's");
  cmd_->add_option("--control-listen", control_listen_, "HOST:PORT of the controller's /metrics (port 0: any)")
      ->capture_default_str();
}

int UpCommand::Run() {
  if ((prefill_ > 0) != (decode_ > 0)) {
    fmt::print(stderr, "myriad up: --prefill and --decode go together\n");
    return 2;
  }
  control::ControlConfig cc;
  if (control_) {
    if (!control_config_.empty()) {
      auto loaded = control::LoadControlConfig(control_config_, /*fleet_given=*/true);
      if (!loaded.ok()) {
        fmt::print(stderr, "myriad up: --control-config: {}\n", std::string(loaded.status().message()));
        return 2;
      }
      cc = *std::move(loaded);
    }
    if (!net::ParseHostPort(control_listen_).ok()) {
      fmt::print(stderr, "myriad up: --control-listen: '{}' is not HOST:PORT\n", control_listen_);
      return 2;
    }
    cc.listen = control_listen_;
    // The controller drains through the gateway's admin API, which needs a token.
    if (admin_token_.empty()) admin_token_ = RandomToken();
  } else if (!control_config_.empty()) {
    fmt::print(stderr, "myriad up: --control-config needs --control\n");
    return 2;
  }
  StopSignals signals;  // before any thread starts

  gateway::GatewayConfig gc;
  gc.listen = fmt::format("127.0.0.1:{}", port_);
  gc.policy = policy_;
  gc.perf_model = perf_model_;
  gc.perf_gpu = gpu_;
  gc.admin_token = admin_token_;
  gc.tokenizer = tokenizer_;
  LocalEngineOptions lo;
  lo.roles = LocalRoles(engines_, prefill_, decode_);
  lo.served_model = model_;
  lo.perf_model = perf_model_;
  lo.gpu = gpu_;
  lo.speed = speed_;
  lo.dp_ranks = dp_;
  if (!tokenizer_.empty()) {
    auto enc = tokenizer::PromptEncoder::Load(tokenizer_);
    if (!enc.ok()) {
      fmt::print(stderr, "myriad up: --tokenizer: {}\n", std::string(enc.status().message()));
      return 2;
    }
    lo.encoder = *std::move(enc);
  }
  auto engines = StartLocalEngines(lo);
  if (!engines.ok()) {
    fmt::print(stderr, "myriad up: {}\n", std::string(engines.status().message()));
    return engines.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  gc.backends = engines->backends;
  for (const gateway::BackendConfig& b : gc.backends) {
    fmt::print("  {:<10} {:<9} {}  kv events {}\n", b.name, gateway::RoleName(b.role), b.url, b.kv_events);
  }
  auto gw = gateway::Gateway::Create(gc);
  if (!gw.ok()) {
    fmt::print(stderr, "myriad up: {}\n", std::string(gw.status().message()));
    return 2;
  }
  if (absl::Status st = (*gw)->Start(); !st.ok()) {
    fmt::print(stderr, "myriad up: gateway: {}\n", std::string(st.message()));
    return 1;
  }
  fmt::print("myriad up: gateway on http://127.0.0.1:{} ({} engines, policy {}); try\n"
             "  curl -N http://127.0.0.1:{}/v1/completions -d '{{\"model\":\"{}\",\"prompt\":\"hello\",\"max_tokens\":8,\"stream\":true}}'\n",
             (*gw)->port(), engines->servers.size(), policy_, (*gw)->port(), model_);
  std::unique_ptr<control::Controller> ctl;
  if (control_) {
    cc.gateway_url = fmt::format("http://127.0.0.1:{}", (*gw)->port());
    cc.gateway_admin_token = admin_token_;
    for (const gateway::BackendConfig& b : engines->backends) cc.engines.push_back({b.name, b.url});
    // A change of role registers the engine anew: the gateway drops the old entry first.
    auto reregister = [g = gw->get()](const gateway::BackendConfig& b) {
      g->RemoveBackend(b.name);
      return g->AddBackend(b);
    };
    auto made = control::Controller::Create(cc, nullptr, std::make_shared<LocalEnginesActuator>(*engines, reregister));
    if (!made.ok()) {
      fmt::print(stderr, "myriad up: --control: {}\n", std::string(made.status().message()));
      (*gw)->Stop();
      return 2;
    }
    ctl = *std::move(made);
    ctl->set_log([](const std::string& line) {
      fmt::print("{}\n", line);
      std::fflush(stdout);
    });
    if (absl::Status st = ctl->Start(); !st.ok()) {
      fmt::print(stderr, "myriad up: controller: {}\n", std::string(st.message()));
      (*gw)->Stop();
      return 1;
    }
    fmt::print("myriad up: controller on http://127.0.0.1:{}/metrics\n", ctl->port());
  }
  std::fflush(stdout);
  signals.Wait();
  if (ctl) ctl->Stop();  // first: it restarts engines
  (*gw)->Stop();
  engines->Stop();
  return 0;
}

}  // namespace myriad::cli
