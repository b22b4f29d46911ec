#pragma once
// The simulated KV store tier: store nodes with capacity in the racks (each group of racks a
// fault domain), whose metadata is kept by the store's own metadata core, kvstore::KvMaster,
// not by a model of it: placement of replicas across domains, eviction between the
// watermarks, read leases, failure detection from heartbeats and repair planning under the
// master's byte-rate cap are the master's decisions. What this class adds is the world around
// it: the bytes moving on the store nodes' links (each link carries one transfer at a time),
// the simulated time of each write, read and repair copy, and nodes that die.
//
// Units offload the prefix blocks their HBM cache evicts (Offload; one object per block, the
// block's chain key naming it); a request whose prefix continues in the store loads those
// blocks back before its prefill (LoadBack) when that beats recomputing them
// (policy/store_load.h, the decision the emulated engine's store tier takes too). A node that dies stops heartbeating: until the
// master declares it dead (`detection`), reads of replicas on it fail and fall back to
// another replica or to recompute; then the master drops its replicas, counts the objects
// that had no other as lost and queues the rest for repair, which Tick hands to the links.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_set.h"
#include "core/block_hash.h"
#include "core/time.h"
#include "kvstore_core/master.h"
#include "perf/transfer.h"
#include "policy/prefill_cost.h"
#include "policy/tier_pricing.h"
#include "sim/event_queue.h"
#include "sim/store_config.h"

namespace myriad::sim {

struct StoreTierStats {
  // Offload: blocks the units' HBM caches evicted and offered, those written, those the store
  // already held (or was writing), those refused for want of room on enough fault domains,
  // and writes revoked because a replica's node died before the write finished.
  int64_t offered_blocks = 0, stored_blocks = 0, already_stored = 0, no_room = 0, revoked_writes = 0;
  double offload_bytes = 0;
  // Load-back: requests whose prompt continued past the unit's HBM prefix (probed), those that
  // found at least one block in the store, the blocks probed and loaded, and reads that found
  // only replicas on a dead node.
  int64_t probed_requests = 0, hit_requests = 0, probed_blocks = 0, loaded_blocks = 0, dead_reads = 0;
  // Requests whose store run was left to recompute because that was cheaper, and its blocks.
  int64_t declined_requests = 0, declined_blocks = 0;
  double load_bytes = 0;
  // Probed blocks the store did not supply (recomputed), before and after the first loss.
  int64_t missed_blocks_before_loss = 0, missed_blocks_after_loss = 0;
  // Repairs: copies issued, finished, failed (an end died mid-copy) and their bytes.
  int64_t repairs = 0, repairs_done = 0, repairs_failed = 0;
  double repair_bytes = 0;
  Nanos last_repair_end = -1;
  uint64_t log_bytes = 0;  // the master's operation log, as a standby would receive it
};

class StoreTier : public policy::SharedStoreView {
 public:
  // `racks`: the cluster's racks (store nodes are spread over them); `block_bytes`: the KV of
  // one prefix block; `transfer`: the GPUs' side of a transfer (their NICs, the spine).
  StoreTier(const StoreConfig& config, EventQueue& events, const perf::TransferModel& transfer, int racks,
            uint64_t block_bytes, uint64_t seed);

  // Schedules the housekeeping ticks and the scripted node losses up to `horizon`.
  void Start(Nanos horizon);
  // Called when the first node dies (the cluster notes what its recompute limiter had shed).
  void set_on_first_loss(std::function<void()> f) { on_first_loss_ = std::move(f); }

  // A unit in rack `rack` evicted `blocks` from its HBM prefix cache: each block not stored
  // yet is written to the replicas the master places it on, readable once written.
  void Offload(int rack, std::span<const BlockKey> blocks);

  struct Load {
    size_t blocks = 0;  // consecutive blocks after the unit's own prefix, loaded from the store
    Nanos ready_at = 0;
  };
  // What a load-back is weighed against: the unit's prefill of a prompt of `input_tokens`.
  struct Prefill {
    const policy::PrefillCost& cost;
    int64_t input_tokens = 0;
    int block_tokens = 1;
  };
  // A request's prompt `blocks`, of which the unit (in `rack`, TP degree `tp`) holds the first
  // `have`: reads the blocks that continue it from the store (leasing them) unless recomputing
  // them is cheaper, and says when they will have arrived. The path is priced at the unit's
  // side (its TP ranks' NICs), as the transfer's time below is bounded by.
  Load LoadBack(std::span<const BlockKey> blocks, size_t have, int rack, int tp, const Prefill& prefill);
  // What LoadBack decides to read, without reading it: of the blocks after the unit's `have`,
  // the run the store holds and the part of it that loading takes (policy/store_load.h). The
  // cluster counts `take` as cached (admission), so both agree.
  struct LoadPlan {
    size_t held = 0;
    size_t take = 0;  // 0 or `held`
  };
  LoadPlan PlanLoad(std::span<const BlockKey> blocks, size_t have, int tp, const Prefill& prefill) const;
  // The path a unit of TP degree `tp` loads over, priced at its side (its ranks' NICs, as the
  // transfer's time is bounded by): what LoadBack decides with and the router prices with.
  policy::StorePath PathFor(int tp) const;
  // Leading blocks of `blocks` the store holds, complete.
  size_t Covered(std::span<const BlockKey> blocks) const override;

  // A node's death, and when the master declared it dead (-1: not yet).
  struct NodeLoss {
    int node;
    Nanos at;
    Nanos detected = -1;
  };
  const std::vector<NodeLoss>& losses() const { return losses_; }
  const kvstore::KvMaster& master() const { return master_; }
  const StoreTierStats& stats() const { return stats_; }
  int node_rack(int node) const { return nodes_[static_cast<size_t>(node)].rack; }
  int node_domain(int node) const { return nodes_[static_cast<size_t>(node)].domain; }
  uint64_t block_bytes() const { return block_bytes_; }
  // The tier's section of the report (as of `end`; `block_tokens` per prefix block).
  nlohmann::ordered_json Report(Nanos end, int block_tokens) const;

  // Runs one housekeeping round now (the ticks call it; tests may too).
  void Tick();
  // Kills `node` now (the scripted losses call it; tests may too).
  void KillNode(int node);

 private:
  struct Node {
    int domain = 0;
    int rack = 0;
    bool dead = false;
    Nanos link_free = 0;  // when its link is free for the next transfer
  };
  struct Write {
    BlockKey key;
    kvstore::ReplicaList replicas;
  };
  // Bytes per second of a store node's link towards a peer (`crosses_spine`: another rack).
  double LinkRate(bool crosses_spine) const;
  // Occupies `node`'s link with `bytes` from `now` on; returns when they are through.
  Nanos Occupy(Node& node, double bytes, bool crosses_spine);
  void FinishWrites(const std::vector<Write>& writes);
  void StartRepair(const kvstore::RepairTask& task);
  void ScheduleTick();

  StoreConfig config_;
  EventQueue& events_;
  const perf::TransferModel& transfer_;
  uint64_t block_bytes_;
  kvstore::KvMaster master_;
  kvstore::NamespaceId ns_ = 0;
  std::vector<Node> nodes_;
  absl::flat_hash_set<BlockKey> writing_;  // blocks whose write is in flight
  std::vector<NodeLoss> losses_;
  std::function<void()> on_first_loss_;
  Nanos tick_ = kSecond;
  Nanos horizon_ = 0;
  StoreTierStats stats_;
};

}  // namespace myriad::sim
