#pragma once
// A simulation scenario: the cluster, the model, the pools of serving units, the workload,
// the routing policy, the SLOs and the price, as read from a YAML file.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "perf/step_model.h"
#include "sim/synthetic_workload.h"
#include "sim/trace_workload.h"
#include "sim/unit.h"

namespace myriad::sim {

struct HardwareConfig {
  std::string gpu = "H200";
  int nodes = 1;
  int gpus_per_node = 8;
  int nodes_per_rack = 16;  // nodes under one leaf group; flows between racks cross the spine
  double nic_gbps = 400;    // per GPU
  double spine_oversubscription = 1.0;
  int gpus() const { return nodes * gpus_per_node; }
};

struct PoolConfig {
  std::string name;
  Role role = Role::kColocated;
  int count = 1;
  perf::UnitLayout layout;
  int max_batch_tokens = 8192;  // per DP rank per step
  int max_seqs = 128;           // running sequences per DP rank
  int max_waiting = 0;          // queued requests per unit before new ones are rejected; 0: no cap
};

struct WorkloadConfig {
  std::string type = "synthetic";  // synthetic | mooncake | azure
  SyntheticOptions synthetic;
  std::string trace_path;          // resolved relative to the scenario file
  TraceReplayOptions replay;
};

struct SloConfig {
  Nanos ttft = 2 * kSecond;
  Nanos tpot = 100 * kMillisecond;
};

struct Scenario {
  std::string name;
  uint64_t seed = 1;
  Nanos duration = kHour;   // arrivals stop here
  Nanos drain = 10 * kMinute;  // then in-flight requests get this long to finish
  HardwareConfig hardware;
  std::string model = "DeepSeek-V3";
  std::vector<PoolConfig> pools;
  WorkloadConfig workload;
  std::string router = "least-loaded";
  SloConfig slo;
  double gpu_hour_price = 2.0;  // dollars
  int kv_block_tokens = 256;
  perf::Calibration calibration;
};

// Errors name the file, the line and the key: "default.yaml:12: pools[0].layout.tp: ...".
absl::StatusOr<Scenario> ParseScenario(std::string_view yaml, const std::string& source_name);
absl::StatusOr<Scenario> LoadScenario(const std::string& path);

// Scales the cluster, every pool's unit count and the workload's rate by `factor`, keeping the
// shape: the cost-versus-size benchmark uses it. Fails if a count would round to zero.
absl::Status ScaleScenario(Scenario& s, double factor);

std::string_view RoleName(Role r);

}  // namespace myriad::sim
