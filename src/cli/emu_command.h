#pragma once
// `myriad emu --listen HOST:PORT [--model NAME] [--served-model-name NAME] [--speed X] ...`
// serves an emulated vLLM engine (emu/emu_server.h) until SIGINT or SIGTERM.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "emu/engine.h"

#include <CLI/CLI.hpp>

namespace myriad::cli {

class EmuCommand {
 public:
  explicit EmuCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int Run();

 private:
  CLI::App* cmd_;
  std::string listen_ = "127.0.0.1:8100";
  std::string model_ = "Llama-3.1-8B";
  std::string gpu_ = "H100";
  std::string served_ = "emu-model";
  std::string role_ = "colocated";
  std::string engine_id_;
  int tp_ = 1;
  double speed_ = 1.0;
  int max_num_seqs_ = 256;
  int64_t max_batched_tokens_ = 8192;
  int64_t kv_blocks_ = 0;
  int threads_ = 2;
  int dp_ = 1;
  uint64_t seed_ = 1;
  std::string kv_events_;
  std::string tokenizer_;
  std::string kv_replay_;
  std::string kv_store_;
  std::string kv_store_namespace_;
  uint64_t kv_block_bytes_ = 0;
  double kv_store_gbps_ = 0;
  size_t kv_offload_queue_ = 4096;
  // --profile llama-server (docs/gateway.md, "Emulating llama-server").
  std::string profile_ = "vllm";
  emu::SlotProfile slots_;
  std::vector<CLI::Option*> llama_only_;
};

}  // namespace myriad::cli
