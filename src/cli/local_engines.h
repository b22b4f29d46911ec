#pragma once
// The emulated engines of a local cluster, started on loopback with their KV-event endpoints,
// and the backend entries a gateway needs for them: what `myriad up` and `myriad twin` share.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "control/local_actuator.h"
#include "emu/emu_server.h"
#include "gateway/config.h"

namespace myriad::cli {

// The most HBM blocks `up --kv-blocks` gives an engine: 2^24 blocks of 16 tokens, 268M tokens,
// beyond any GPU's KV memory.
inline constexpr int64_t kMaxUpKvBlocks = int64_t{1} << 24;

struct LocalEngineOptions {
  std::vector<gateway::BackendRole> roles;  // engine i is "engine-i" with roles[i]
  std::string served_model = "emu-model";
  std::string perf_model = "Llama-3.1-8B";
  std::string gpu = "H100";
  double speed = 1;
  int dp_ranks = 1;    // DP ranks per engine (vLLM's --data-parallel-size)
  int block_size = 0;  // 0: the emulator's default
  uint64_t seed = 1;   // engine i gets seed + i
  int64_t kv_blocks = 0;  // 0: what the GPU leaves for the KV cache
  // The KV store as every engine's second tier (emu::EngineOptions' fields); empty: none.
  std::string kv_store;
  std::string kv_store_namespace;
  double kv_store_gbps = 0;
  uint64_t kv_block_bytes = 0;
  std::shared_ptr<const tokenizer::PromptEncoder> encoder;
};

struct LocalEngines {
  LocalEngineOptions options;  // what they were started with: a restart starts the same engine
  std::vector<std::unique_ptr<emu::EmuServer>> servers;
  std::vector<gateway::BackendConfig> backends;
  ~LocalEngines() { Stop(); }
  LocalEngines() = default;
  LocalEngines(LocalEngines&&) = default;
  LocalEngines& operator=(LocalEngines&&) = default;
  void Stop() {
    for (auto& s : servers) {
      if (s) s->Stop();
    }
  }
};

// The roles of `colocated` engines, or of `prefill` + `decode` ones when prefill > 0.
std::vector<gateway::BackendRole> LocalRoles(int colocated, int prefill, int decode);

// Starts every engine; on an error the ones started are stopped. InvalidArgument: bad options.
absl::StatusOr<LocalEngines> StartLocalEngines(const LocalEngineOptions& o);

// The controller's local actuator over `myriad up`'s engines: a restart stops engine-i and
// starts the same engine (options, port, KV-event endpoints) again, fresh, then waits for its
// /health. The engines must outlive it.
// A change of role restarts it with the other role and hands its new backend entry to
// `reregister` (myriad up: removed from the gateway and added again). A scale-out starts
// engine-N (N the next index, never reused) and hands it to `reregister` too once its /health
// answers; a stop removes the engine through `deregister`, then stops it (its slot stays).
class LocalEnginesActuator : public control::LocalActuator {
 public:
  using Reregister = std::function<absl::Status(const gateway::BackendConfig&)>;
  using Deregister = std::function<void(const std::string& name)>;
  explicit LocalEnginesActuator(LocalEngines& engines, Reregister reregister = nullptr, Deregister deregister = nullptr)
      : engines_(engines), reregister_(std::move(reregister)), deregister_(std::move(deregister)) {}
  absl::Status Restart(const std::string& target, Nanos timeout) override;
  absl::Status ChangeRole(const std::string& target, const std::string& role, Nanos timeout) override;
  absl::StatusOr<control::EngineConfig> AddEngine(const std::string& role, Nanos timeout) override;
  absl::Status StopEngine(const std::string& target) override;

 private:
  LocalEngines& engines_;
  Reregister reregister_;
  Deregister deregister_;
};

}  // namespace myriad::cli
