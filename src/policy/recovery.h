#pragma once
// Rebuilding a failed serving unit. Inference keeps no state worth saving but its KV, so the
// pipeline is: eject the unit from routing (its in-flight requests are retried elsewhere), stop
// its processes, take a spare node for each bad one, load the weights on every node (the
// processes restarted), initialise the communicator, warm up (CUDA graph capture), pass the
// readiness gate, re-admit. Each stage has its own time; the weight load depends on where the
// weights come from: shared storage, whose bandwidth every loader shares, or healthy peers
// that already hold them (broadcast / point-to-point over RDMA).
#include <cstdint>
#include <string_view>

#include "core/time.h"
#include "policy/weight_plan.h"

namespace myriad::policy {

enum class RecoveryStage { kEject, kStop, kSpare, kLoad, kCommInit, kWarmup, kReadiness, kDone };
std::string_view StageName(RecoveryStage s);

struct RecoveryOptions {
  Nanos eject = 1 * kSecond;         // routing tables everywhere stop sending to the unit
  Nanos stop = 10 * kSecond;         // processes killed, GPU memory freed
  Nanos spare_acquire = 60 * kSecond;  // a spare node scheduled and its pod started
  Nanos comm_init = 30 * kSecond;    // NCCL/DeepEP communicator set-up across the unit
  Nanos warmup = 60 * kSecond;       // CUDA graph capture and warm-up batches
  Nanos readiness = 5 * kSecond;     // known-answer check before traffic returns
  // Where weights come from. Peers: each node pulls its shard from a healthy replica at this
  // rate (Kimi K2's 1 TB on 32 nodes by RDMA point-to-point in 7.2 s is ~4.3 GB/s per node;
  // SGLang/Mooncake, reference/PUBLIC_DATA.md). Storage: every loader in the cluster shares
  // `storage_bytes_per_s`, each capped at `storage_per_node_bytes_per_s`.
  bool weights_from_peers = true;
  double peer_bytes_per_s = 4.3e9;
  double storage_bytes_per_s = 20e9;
  double storage_per_node_bytes_per_s = 5e9;
  // A replaced node goes to repair and returns to the spare pool after this long.
  Nanos node_repair = 24 * kHour;
};

// Time for one node to pull `bytes` of weights from peers.
inline Nanos PeerLoadTime(double bytes, const RecoveryOptions& o) {
  return SecondsToNanos(bytes / o.peer_bytes_per_s);
}

// The fabric the weights travel over: storage and peer rates from these options, with the
// nodes' NICs and the spine's oversubscription where the caller knows them (0: no NIC cap).
WeightFabric FabricOf(const RecoveryOptions& o, double nic_bytes_per_s = 0, double oversubscription = 1);

// Scale-out of a new unit is this pipeline without the eject and stop: a node scheduled, the
// weights loaded as PlanWeightLoad plans `load` (the unit is one of `load.units` loading
// together), the communicator, warm-up and the readiness gate; the unit's time is the plan's
// makespan. The autoscaler plans with it; the simulator times each stage on its own.
Nanos ScaleOutLeadTime(const WeightLoad& load, const WeightFabric& f, const RecoveryOptions& o);
// One unit of `nodes` nodes and `bytes`: from a peer of its pool when `from_peers` (or from
// storage when that is faster), else from storage shared with `storage_loaders` loading nodes.
Nanos ScaleOutLeadTime(double bytes, int nodes, bool from_peers, int storage_loaders, const RecoveryOptions& o);

}  // namespace myriad::policy
