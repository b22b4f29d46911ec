#pragma once
// Where each serving unit sits: nodes, racks (leaf groups) and the link a KV transfer between
// two units takes. Units are packed onto consecutive nodes in pool order; a unit smaller than
// a node shares it with its neighbours.
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "perf/transfer.h"

namespace myriad::sim {

struct Placement {
  int first_node = 0;
  int nodes = 1;
  int first_gpu = 0;  // global GPU index of the unit's first GPU
  int gpus = 1;
  int rack = 0;       // leaf group of the first node
};

class Topology {
 public:
  Topology(int nodes, int gpus_per_node, int nodes_per_rack)
      : nodes_(nodes), gpus_per_node_(gpus_per_node), nodes_per_rack_(nodes_per_rack) {}

  // Reserves `gpus` GPUs on `nodes` nodes for the next unit. A unit spanning several nodes
  // starts on a fresh node and owns whole nodes.
  absl::StatusOr<Placement> Place(int gpus, int nodes);

  int used_gpus() const { return next_gpu_; }
  int total_gpus() const { return nodes_ * gpus_per_node_; }

  perf::LinkKind Link(const Placement& a, const Placement& b) const;
  bool CrossesSpine(const Placement& a, const Placement& b) const;

 private:
  int nodes_, gpus_per_node_, nodes_per_rack_;
  int next_gpu_ = 0;
};

}  // namespace myriad::sim
