#include "cli/emu_command.h"

#include "cli/stop_signals.h"

#include <fmt/format.h>
#include <pthread.h>

#include <csignal>
#include <cstdlib>

#include "emu/emu_server.h"
#include "net/http.h"
#include "net/http_server.h"

namespace myriad::cli {

EmuCommand::EmuCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("emu", "Serve an emulated vLLM engine (OpenAI API, metrics, P/D) until SIGINT or SIGTERM");
  cmd_->add_option("--listen", listen_, "HOST:PORT to serve on")->capture_default_str();
  cmd_->add_option("--model", model_, "model of the performance model (timing)")->capture_default_str();
  cmd_->add_option("--gpu", gpu_, "GPU of the performance model")->capture_default_str();
  cmd_->add_option("--tp", tp_, "tensor parallelism of the emulated engine")->check(CLI::Range(1, 64))->capture_default_str();
  cmd_->add_option("--served-model-name", served_, "model name the API answers to")->capture_default_str();
  cmd_->add_option("--role", role_, "prefill, decode or colocated")
      ->check(CLI::IsMember({"prefill", "decode", "colocated"}))->capture_default_str();
  cmd_->add_option("--engine-id", engine_id_, "engine id in kv_transfer_params (default: emu-PORT)");
  cmd_->add_option("--speed", speed_, "emulated seconds per real second")->check(CLI::Range(1e-3, 1e6))->capture_default_str();
  cmd_->add_option("--max-num-seqs", max_num_seqs_, "running batch limit")->check(CLI::Range(1, 65536))->capture_default_str();
  cmd_->add_option("--max-num-batched-tokens", max_batched_tokens_, "tokens per step")->check(CLI::Range(1, 1 << 24))->capture_default_str();
  cmd_->add_option("--kv-blocks", kv_blocks_, "KV cache size in 16-token blocks (0: from the model and GPU)")
      ->check(CLI::Range(0, 1 << 28))->capture_default_str();
  cmd_->add_option("--threads", threads_, "HTTP threads")->check(CLI::Range(1, net::kMaxHttpThreads))->capture_default_str();
  cmd_->add_option("--kv-events", kv_events_, "bind vLLM's KV-event PUB socket here, e.g. tcp://127.0.0.1:5557");
  cmd_->add_option("--kv-replay", kv_replay_, "bind the KV-event replay socket here, e.g. tcp://127.0.0.1:5558");
  cmd_->add_option("--tokenizer", tokenizer_,
                   "the model's tokenizer.json, or a folder with it and tokenizer_config.json");
  cmd_->add_option("--seed", seed_, "seed of the generated tokens")->capture_default_str();
  cmd_->add_option("--data-parallel-size,--dp", dp_,
                   "DP ranks behind this API (vLLM's --data-parallel-size): an engine each, KV events "
                   "on consecutive ports, X-data-parallel-rank picks one")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  // The KV store as the engine's second tier (docs/kvstore.md, "Engines' second tier").
  CLI::Option* store =
      cmd_->add_option("--kv-store", kv_store_,
                       "KV store master URL(s), e.g. http://127.0.0.1:7700: blocks evicted from HBM are "
                       "offloaded there and prefix misses loaded from it");
  cmd_->add_option("--kv-store-namespace", kv_store_namespace_,
                   "the store namespace (one per model version; default: the served model name)")
      ->needs(store);
  cmd_->add_option("--kv-block-bytes", kv_block_bytes_,
                   fmt::format("bytes stored per 16-token block, 8 to {} (default: the model's KV bytes per "
                               "token x 16)", emu::kMaxKvBlockBytes))
      ->check(CLI::Range(uint64_t{8}, emu::kMaxKvBlockBytes))->needs(store);
  cmd_->add_option("--kv-store-gbps", kv_store_gbps_,
                   "a load from the store takes at least its bytes over this many GB/s, up to 10000 "
                   "(default: the GPU's NIC line rate)")
      ->check(CLI::Range(1e-3, 1e4))->needs(store);
  cmd_->add_option("--kv-offload-queue", kv_offload_queue_,
                   fmt::format("evicted blocks waiting to be offloaded, 1 to {}; more are dropped and counted",
                               emu::kMaxOffloadQueue))
      ->check(CLI::Range(size_t{1}, emu::kMaxOffloadQueue))->needs(store)->capture_default_str();
  cmd_->add_option("--profile", profile_,
                   "the engine emulated: vllm, or llama-server (llama.cpp: slots that each cache their last "
                   "sequence, no KV events, CPU-like speed, /props and /slots)")
      ->check(CLI::IsMember({"vllm", "llama-server"}))->capture_default_str();
  llama_only_ = {
      cmd_->add_option("--slots", slots_.slots, "llama-server: slots (its --parallel), 1 to 256")
          ->check(CLI::Range(1, 256))->capture_default_str(),
      cmd_->add_option("--slot-prompt-similarity", slots_.similarity,
                       "llama-server: a request takes the idle slot whose cache shares the longest prefix with "
                       "its prompt when that is more than this fraction of the prompt, 0 to 1 (0: least "
                       "recently used only)")
          ->check(CLI::Range(0.0, 1.0))->capture_default_str(),
      cmd_->add_option("--slot-ctx", slots_.n_ctx, "llama-server: context tokens per slot, 16 to 1048576")
          ->check(CLI::Range(int64_t{16}, int64_t{1} << 20))->capture_default_str(),
      cmd_->add_option("--prompt-token-ms", slots_.prompt_token_ms,
                       "llama-server: emulated ms per prompt token computed, 0.001 to 1000")
          ->check(CLI::Range(1e-3, 1e3))->capture_default_str(),
      cmd_->add_option("--cached-token-ms", slots_.cached_token_ms,
                       "llama-server: emulated ms per prompt token found in the slot, 0 to 1000")
          ->check(CLI::Range(0.0, 1e3))->capture_default_str(),
      cmd_->add_option("--decode-step-ms", slots_.decode_step_ms,
                       "llama-server: emulated ms per decode step (all slots decode together), 0.01 to 10000")
          ->check(CLI::Range(1e-2, 1e4))->capture_default_str(),
  };
}

int EmuCommand::Run() {
  absl::StatusOr<net::HostPort> hp = net::ParseHostPort(listen_);
  if (!hp.ok()) {
    fmt::print(stderr, "myriad emu: --listen: {}\n", std::string(hp.status().message()));
    return 2;
  }
  StopSignals signals;  // before any thread starts

  const bool llama = profile_ == "llama-server";
  for (const CLI::Option* opt : llama_only_) {
    if (!llama && opt->count() > 0) {
      fmt::print(stderr, "myriad emu: {} needs --profile llama-server\n", opt->get_name());
      return 2;
    }
  }
  if (llama && (!kv_events_.empty() || !kv_store_.empty() || dp_ != 1)) {
    fmt::print(stderr, "myriad emu: --profile llama-server: no --kv-events, --kv-store or --data-parallel-size "
                       "(llama-server has none of them)\n");
    return 2;
  }
  emu::EmuOptions o;
  o.http.address = hp->host;
  o.http.port = hp->port;
  o.http.threads = threads_;
  o.http.max_body_bytes = size_t{32} << 20;
  o.served_model_name = served_;
  o.role = role_;
  o.engine.model = model_;
  o.engine.gpu = gpu_;
  o.engine.layout.tp = tp_;
  o.engine.speed = speed_;
  o.engine.max_num_seqs = max_num_seqs_;
  o.engine.max_batched_tokens = max_batched_tokens_;
  if (llama) {
    o.engine.slots = slots_;
    // llama-server's --batch-size: the prompt tokens one step computes, unless given.
    if (cmd_->get_option("--max-num-batched-tokens")->count() == 0) o.engine.max_batched_tokens = 2048;
  }
  o.engine.kv_blocks = kv_blocks_;
  o.engine.seed = seed_;
  o.engine.kv_store = kv_store_;
  o.engine.kv_store_namespace = kv_store_namespace_;
  o.engine.kv_block_bytes = kv_block_bytes_;
  o.engine.kv_store_gbps = kv_store_gbps_;
  o.engine.kv_offload_queue = kv_offload_queue_;
  o.kv_events = kv_events_;
  o.kv_replay = kv_replay_;
  o.dp_ranks = dp_;
  if (!tokenizer_.empty()) {
    auto enc = tokenizer::PromptEncoder::Load(tokenizer_);
    if (!enc.ok()) {
      fmt::print(stderr, "myriad emu: --tokenizer: {}\n", std::string(enc.status().message()));
      return 2;
    }
    o.encoder = *std::move(enc);
  }
  o.engine_id = engine_id_.empty() ? fmt::format("emu-{}", hp->port) : engine_id_;
  auto server = emu::EmuServer::Create(o);
  if (!server.ok()) {
    fmt::print(stderr, "myriad emu: {}\n", std::string(server.status().message()));
    return 2;
  }
  // A crash on command is a real one: the process dies without cleaning up.
  (*server)->set_on_crash([] { std::_Exit(1); });
  if (absl::Status st = (*server)->Start(); !st.ok()) {
    fmt::print(stderr, "myriad emu: {}\n", std::string(st.message()));
    return 1;
  }
  if (llama) {
    fmt::print("myriad emu: serving {} as llama-server ({} slots of {} tokens) on http://{}:{}\n", served_,
               slots_.slots, slots_.n_ctx, hp->host, (*server)->port());
  } else {
    fmt::print("myriad emu: serving {} ({} on {} x{}) as {} on http://{}:{}\n", served_, model_, gpu_, tp_, role_,
               hp->host, (*server)->port());
  }
  std::fflush(stdout);
  signals.Wait();
  (*server)->Stop();
  return 0;
}

}  // namespace myriad::cli
