#pragma once
// `myriad up`: a whole local cluster in one process to try everything on one machine: N
// emulated engines (colocated, or prefill and decode pools), each publishing vLLM KV events,
// and a gateway in front of them routing on those events. Runs until SIGINT or SIGTERM.
//   myriad up [--port 8000] [--engines 3] [--prefill P --decode D] [--speed 1]
//             [--policy kv-aware] [--model emu-model] [--perf-model Llama-3.1-8B]
//             [--tokenizer DIR]   (the model's tokenizer.json + tokenizer_config.json: exact
//                                  routing for text and chat prompts)
//             [--control [--control-config control.yaml] [--control-listen HOST:PORT]]
//               (`myriad control` over these engines, restarting them itself: docs/controller.md)
//             [--kv-blocks N]     (each engine's HBM prefix cache, in blocks)
//             [--store [--store-nodes 2] [--store-node-capacity BYTES] [--kv-store-gbps G]
//                      [--kv-block-bytes B]]
//               (a KV store master and nodes; the engines offload to it and load from it, the
//                gateway prices it: docs/kvstore.md, "myriad up --store")
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace myriad::cli {

class UpCommand {
 public:
  explicit UpCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int Run();

 private:
  CLI::App* cmd_;
  int port_ = 8000;
  int engines_ = 3;
  int prefill_ = 0;
  int decode_ = 0;
  double speed_ = 1.0;
  int dp_ = 1;
  std::string policy_ = "kv-aware";
  std::string model_ = "emu-model";
  std::string perf_model_ = "Llama-3.1-8B";
  std::string gpu_ = "H100";
  std::string admin_token_;
  std::string tokenizer_;
  bool control_ = false;
  std::string control_config_;
  std::string control_listen_ = "127.0.0.1:0";
  int64_t kv_blocks_ = 0;
  bool store_ = false;
  int store_nodes_ = 2;
  uint64_t store_node_capacity_ = uint64_t{1} << 30;
  double kv_store_gbps_ = 0;
  uint64_t kv_block_bytes_ = 0;
};

}  // namespace myriad::cli
