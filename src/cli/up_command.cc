#include "cli/up_command.h"

#include "cli/stop_signals.h"

#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <memory>
#include <random>
#include <vector>

#include "cli/local_engines.h"
#include "cli/local_store.h"
#include "control/controller.h"
#include "gateway/gateway.h"
#include "net/http.h"
#include "perf/hardware.h"
#include "perf/model.h"
#include "perf/step_model.h"

namespace myriad::cli {

namespace {

// An admin token for the gateway nobody but this process's controller knows.
std::string RandomToken() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
}

// The model's KV bytes per 16-token block, as an engine of `up` computes it.
absl::StatusOr<double> ModelBlockBytes(const std::string& model, const std::string& gpu) {
  absl::StatusOr<perf::GpuSpec> g = perf::FindGpu(gpu);
  if (!g.ok()) return g.status();
  absl::StatusOr<perf::ModelSpec> m = perf::FindModel(model);
  if (!m.ok()) return m.status();
  absl::StatusOr<perf::StepModel> step = perf::StepModel::Create(*g, *m, perf::UnitLayout{}, {});
  if (!step.ok()) return step.status();
  return step->KvBytesPerToken() * 16;
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
  cmd_->add_option("--kv-blocks", kv_blocks_,
                   fmt::format("each engine's HBM KV cache in blocks of 16 tokens, 1 to {} (default: what the GPU "
                               "leaves for it)",
                               kMaxUpKvBlocks))
      ->check(CLI::Range(int64_t{1}, kMaxUpKvBlocks));
  CLI::Option* store = cmd_->add_flag(
      "--store", store_,
      "run a KV store (a master and --store-nodes storage nodes) as the engines' second tier: they offload "
      "blocks evicted from HBM to it and load them back instead of recomputing, and the gateway prices it");
  cmd_->add_option("--store-nodes", store_nodes_, fmt::format("storage nodes, 1 to {}", kMaxLocalStoreNodes))
      ->check(CLI::Range(1, kMaxLocalStoreNodes))->needs(store)->capture_default_str();
  cmd_->add_option("--store-node-capacity", store_node_capacity_,
                   fmt::format("bytes of memory each storage node holds objects in, {} to {} (1 PiB); committed "
                               "as written",
                               kMinLocalStoreNodeBytes, kvstore::kMaxNodeCapacityBytes))
      ->check(CLI::Range(kMinLocalStoreNodeBytes, kvstore::kMaxNodeCapacityBytes))->needs(store)->capture_default_str();
  cmd_->add_option("--kv-store-gbps", kv_store_gbps_,
                   "GB/s of the engines' path to the store, 0.001 to 10000: a load takes at least its bytes over "
                   "it, the engines and the gateway price loads by it (default: the GPU's NIC)")
      ->check(CLI::Range(1e-3, 1e4))->needs(store);
  cmd_->add_option("--kv-block-bytes", kv_block_bytes_,
                   fmt::format("bytes stored per 16-token block, 8 to {} (default: the model's KV per block)",
                               emu::kMaxKvBlockBytes))
      ->check(CLI::Range(uint64_t{8}, emu::kMaxKvBlockBytes))->needs(store);
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

  std::unique_ptr<LocalStore> kv_store;
  if (store_) {
    auto started = LocalStore::Start({.nodes = store_nodes_, .node_capacity_bytes = store_node_capacity_});
    if (!started.ok()) {
      fmt::print(stderr, "myriad up: --store: {}\n", std::string(started.status().message()));
      return started.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
    kv_store = *std::move(started);
    fmt::print("  {:<10} {:<9} {}  {} nodes of {} bytes\n", "kv-store", "master", kv_store->url(),
               kv_store->nodes().size(), store_node_capacity_);
    for (size_t i = 0; i < kv_store->nodes().size(); ++i) {
      fmt::print("  {:<10} {:<9} tcp://{}\n", fmt::format("kv-node-{}", i + 1), "node", kv_store->nodes()[i]->address());
    }
  }

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
  lo.kv_blocks = kv_blocks_;
  if (kv_store) {
    lo.kv_store = kv_store->url();
    lo.kv_store_namespace = model_;  // one namespace per served model
    lo.kv_store_gbps = kv_store_gbps_;
    lo.kv_block_bytes = kv_block_bytes_;
    // The gateway prices the engines' store tiers on the path they load over (Gb/s there).
    gc.store_load_gbps = kv_store_gbps_ > 0 ? kv_store_gbps_ * 8 : perf::Fabric{}.nic_gbps;
    // It weighs a block as the model's KV (tier_pricing.h); engines that store smaller
    // stand-ins move fewer bytes over the same path, so the rate it sees scales with them.
    if (kv_block_bytes_ > 0) {
      absl::StatusOr<double> model_block = ModelBlockBytes(perf_model_, gpu_);
      if (!model_block.ok()) {
        fmt::print(stderr, "myriad up: {}\n", std::string(model_block.status().message()));
        return 2;
      }
      gc.store_load_gbps = std::min(gateway::kMaxStoreLoadGbps,
                                    gc.store_load_gbps * *model_block / static_cast<double>(kv_block_bytes_));
    }
  }
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
  fmt::print("myriad up: gateway on http://127.0.0.1:{} ({} engines, policy {}{}); try\n"
             "  curl -N http://127.0.0.1:{}/v1/completions -d '{{\"model\":\"{}\",\"prompt\":\"hello\",\"max_tokens\":8,\"stream\":true}}'\n",
             (*gw)->port(), engines->servers.size(), policy_, kv_store ? ", kv store tier" : "", (*gw)->port(),
             model_);
  std::unique_ptr<control::Controller> ctl;
  if (control_) {
    cc.gateway_url = fmt::format("http://127.0.0.1:{}", (*gw)->port());
    cc.gateway_admin_token = admin_token_;
    for (const gateway::BackendConfig& b : engines->backends) {
      cc.engines.push_back({b.name, b.url, std::string(gateway::RoleName(b.role))});
    }
    // A change of role registers the engine anew: the gateway drops the old entry first. A
    // scale-out registers a new one the same way; a scale-in's stop removes it.
    auto reregister = [g = gw->get()](const gateway::BackendConfig& b) {
      g->RemoveBackend(b.name);
      return g->AddBackend(b);
    };
    auto deregister = [g = gw->get()](const std::string& name) { g->RemoveBackend(name); };
    auto made = control::Controller::Create(
        cc, nullptr, std::make_shared<LocalEnginesActuator>(*engines, reregister, deregister));
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
  if (kv_store) kv_store->Stop();  // after the engines: their tiers' threads call it until joined
  return 0;
}

}  // namespace myriad::cli
