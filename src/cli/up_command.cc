#include "cli/up_command.h"

#include "cli/stop_signals.h"

#include <fmt/format.h>
#include <pthread.h>

#include <csignal>
#include <memory>
#include <vector>

#include "cli/local_engines.h"
#include "gateway/gateway.h"

namespace myriad::cli {

UpCommand::UpCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("up", "Run a local cluster (a gateway and emulated engines) until SIGINT or SIGTERM");
  cmd_->add_option("--port", port_, "gateway port")->check(CLI::Range(0, 65535))->capture_default_str();
  cmd_->add_option("--engines", engines_, "colocated engines (ignored with --prefill/--decode)")
      ->check(CLI::Range(1, 64))->capture_default_str();
  cmd_->add_option("--prefill", prefill_, "prefill engines (P/D)")->check(CLI::Range(0, 64));
  cmd_->add_option("--decode", decode_, "decode engines (P/D)")->check(CLI::Range(0, 64));
  cmd_->add_option("--speed", speed_, "emulated seconds per real second")->check(CLI::Range(1e-3, 1e6))->capture_default_str();
  cmd_->add_option("--policy", policy_, "routing policy (kv-aware, least-loaded, round-robin, ...)")->capture_default_str();
  cmd_->add_option("--model", model_, "served model name")->capture_default_str();
  cmd_->add_option("--perf-model", perf_model_, "model of the timing")->capture_default_str();
  cmd_->add_option("--gpu", gpu_, "GPU of the timing")->capture_default_str();
  cmd_->add_option("--admin-token", admin_token_, "enables the gateway's admin endpoints");
  cmd_->add_option("--tokenizer", tokenizer_,
                   "the model's tokenizer.json or its folder (with tokenizer_config.json)");
}

int UpCommand::Run() {
  if ((prefill_ > 0) != (decode_ > 0)) {
    fmt::print(stderr, "myriad up: --prefill and --decode go together\n");
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
  std::fflush(stdout);
  signals.Wait();
  (*gw)->Stop();
  engines->Stop();
  return 0;
}

}  // namespace myriad::cli
