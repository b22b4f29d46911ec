#include "sim/topology.h"

#include <fmt/format.h>

namespace myriad::sim {

absl::StatusOr<Placement> Topology::Place(int gpus, int nodes) {
  Placement p;
  int start = next_gpu_;
  const bool whole_nodes = nodes > 1 || gpus == gpus_per_node_;
  // A unit must not straddle a node boundary unless it owns whole nodes.
  if (whole_nodes || (start % gpus_per_node_) + gpus > gpus_per_node_) {
    start = (start + gpus_per_node_ - 1) / gpus_per_node_ * gpus_per_node_;
  }
  const int span = whole_nodes ? nodes * gpus_per_node_ : gpus;
  if (start + span > total_gpus()) {
    return absl::InvalidArgumentError(fmt::format(
        "the pools need more GPUs than the cluster's {} ({} nodes of {})", total_gpus(), nodes_,
        gpus_per_node_));
  }
  p.first_gpu = start;
  p.gpus = gpus;
  p.first_node = start / gpus_per_node_;
  p.nodes = whole_nodes ? nodes : 1;
  p.rack = p.first_node / nodes_per_rack_;
  next_gpu_ = start + span;
  return p;
}

perf::LinkKind Topology::Link(const Placement& a, const Placement& b) const {
  if (a.nodes == 1 && b.nodes == 1 && a.first_node == b.first_node) return perf::LinkKind::kNvlink;
  return perf::LinkKind::kNic;
}

bool Topology::CrossesSpine(const Placement& a, const Placement& b) const {
  return a.rack != b.rack;
}

}  // namespace myriad::sim
