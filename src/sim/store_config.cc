#include "sim/store_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "core/yaml_reader.h"
#include "kvstore_core/types.h"

namespace myriad::sim {

absl::Status ParseStore(const YamlReader& rd, const YAML::Node& n, int racks, Nanos horizon, StoreConfig* c) {
  const std::string p = "store";
  MYRIAD_RETURN_IF_ERROR(rd.Map(n, p, {"nodes", "capacity_gb", "replicas", "fault_domains", "node_gbps",
                                       "repair_gbps", "detection", "node_loss"}));
  c->enabled = true;
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "nodes", p, &c->nodes));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "capacity_gb", p, &c->capacity_gb));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "replicas", p, &c->replicas));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "fault_domains", p, &c->fault_domains));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "node_gbps", p, &c->node_gbps));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "repair_gbps", p, &c->repair_gbps));
  MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "detection", p, &c->detection));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "nodes", p, c->nodes >= 1 && c->nodes <= kMaxStoreNodes,
                                  fmt::format("must be between 1 and {}", kMaxStoreNodes), c->nodes));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "capacity_gb", p, c->capacity_gb > 0 && c->capacity_gb <= kMaxStoreNodeCapacityGb,
                                  fmt::format("must be positive and at most {:.0f}", kMaxStoreNodeCapacityGb),
                                  c->capacity_gb));
  const int max_domains = std::min(c->nodes, racks);
  if (c->fault_domains == 0) c->fault_domains = max_domains;
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "fault_domains", p, c->fault_domains >= 1 && c->fault_domains <= max_domains,
                                  fmt::format("must be between 1 and {} (the store's nodes and the cluster's racks)",
                                              max_domains),
                                  c->fault_domains));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "replicas", p, c->replicas >= 1 && c->replicas <= kvstore::kMaxReplicas,
                                  fmt::format("must be between 1 and {}", kvstore::kMaxReplicas), c->replicas));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "replicas", p, c->replicas <= c->fault_domains,
                                  fmt::format("replicas go to distinct fault domains: at most fault_domains = {}",
                                              c->fault_domains),
                                  c->replicas));
  for (const char* k : {"node_gbps", "repair_gbps"}) {
    const double v = std::string(k) == "node_gbps" ? c->node_gbps : c->repair_gbps;
    MYRIAD_RETURN_IF_ERROR(rd.Check(n, k, p, v > 0 && v <= kMaxStoreGbps,
                                    fmt::format("must be positive and at most {:.0f}", kMaxStoreGbps), v));
  }
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "detection", p, c->detection > 0 && c->detection <= kMaxStoreDetection,
                                  fmt::format("must be positive and at most {}", FormatDuration(kMaxStoreDetection)),
                                  FormatDuration(c->detection)));
  const YAML::Node losses = n["node_loss"];
  if (!losses) return absl::OkStatus();
  const std::string lp = p + ".node_loss";
  if (!losses.IsSequence()) return rd.Error(losses, lp, "expected a list such as [{at: 10m, node: 0}]");
  if (losses.size() > static_cast<size_t>(kMaxStoreNodeLosses)) {
    return rd.Error(losses, lp, fmt::format("{} losses are more than the maximum of {}", losses.size(),
                                            kMaxStoreNodeLosses));
  }
  for (size_t i = 0; i < losses.size(); ++i) {
    const YAML::Node l = losses[i];
    const std::string ip = fmt::format("{}[{}]", lp, i);
    MYRIAD_RETURN_IF_ERROR(rd.Map(l, ip, {"at", "node"}));
    if (!l["at"]) return rd.Error(l, ip, "missing 'at'");
    if (!l["node"]) return rd.Error(l, ip, "missing 'node'");
    StoreNodeLoss loss;
    MYRIAD_RETURN_IF_ERROR(rd.Duration(l, "at", ip, &loss.at));
    MYRIAD_RETURN_IF_ERROR(rd.Get(l, "node", ip, &loss.node));
    MYRIAD_RETURN_IF_ERROR(rd.Check(l, "at", ip, loss.at <= horizon,
                                    fmt::format("must be within duration + drain ({})", FormatDuration(horizon)),
                                    FormatDuration(loss.at)));
    MYRIAD_RETURN_IF_ERROR(rd.Check(l, "node", ip, loss.node >= 0 && loss.node < c->nodes,
                                    fmt::format("must name a store node, 0 to {}", c->nodes - 1), loss.node));
    c->node_loss.push_back(loss);
  }
  return absl::OkStatus();
}

}  // namespace myriad::sim
