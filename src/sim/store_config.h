#pragma once
// The scenario's `store:` section: a tier of KV cache store nodes (CPU DRAM or SSD servers in
// the racks) that the units offload evicted prefix blocks to and load them back from, run by
// the store's own metadata core (kvstore::KvMaster). No section, no store tier.
#include <cstdint>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "core/time.h"

namespace myriad {
class YamlReader;
}  // namespace myriad

namespace myriad::sim {

// Bounds of the section (docs/simulator.md, "Limits"). A node loss scans every object of the
// master, so the number of losses is bounded too.
inline constexpr int kMaxStoreNodes = 4096;
inline constexpr double kMaxStoreNodeCapacityGb = 1'000'000;  // 1 PB: under the master's 1 PiB
inline constexpr double kMaxStoreGbps = 10'000;
inline constexpr int kMaxStoreNodeLosses = 1024;
inline constexpr Nanos kMaxStoreDetection = kHour;

struct StoreNodeLoss {
  Nanos at = 0;
  int node = 0;
};

struct StoreConfig {
  bool enabled = false;
  int nodes = 4;
  double capacity_gb = 1000;  // per node, decimal GB
  int replicas = 1;
  // The racks the nodes are spread over, each a fault domain of the master's placement;
  // 0: as many as the nodes and the cluster's racks allow.
  int fault_domains = 0;
  double node_gbps = 400;     // each node's network link
  double repair_gbps = 8;     // the master's cap on repair traffic, whole cluster
  Nanos detection = 10 * kSecond;  // a silent node is declared dead after this
  std::vector<StoreNodeLoss> node_loss;
};

// `racks`: the cluster's racks; `horizon`: duration + drain (a loss must fall inside it).
absl::Status ParseStore(const YamlReader& rd, const YAML::Node& n, int racks, Nanos horizon, StoreConfig* c);

}  // namespace myriad::sim
