#pragma once
// The metadata core of the shared KV cache store: which storage nodes hold which KV blocks.
// Single-threaded and pure (no I/O, clock or threads; time comes in as `now`), so the server
// wraps it behind its RPCs and locks, and the simulator runs the very same object.
//
// Model. An object is a *run*: consecutive blocks of one token-block chain stored by one put
// (blocks k..k+n of a prefix), named by its last block key (which, being a chain hash, names
// the whole prefix up to it). Metadata therefore grows with stored runs, not with pages: one
// 56-byte record per run, plus one 16-byte index slot per block so that a lookup finds the run
// by *any* of its block keys. That is what prefix caching needs: a request sharing only the
// first half of a stored run (same system prompt, another question) must still hit it, and
// the chain keys of the blocks it shares are the only names it knows. A put must not overlap
// blocks already stored in the namespace (the client puts the missing suffix), so a block key
// belongs to at most one run. Mutations (PutEnd, Remove, Pin...) name the object by its last key.
//
// Namespaces (model version + KV format) each have their own 1,024 shards, so a lookup never
// crosses namespaces, and DropNamespace is O(shards): the namespace turns invisible at once,
// its nodes get their bytes back once the last lease granted in it has expired (Tick), and
// its tables are freed a few per Tick.
//
// Replicas: PutStart places them on distinct fault domains (weighted by free bytes, new nodes
// ramped up), the object is pending until PutEnd. Get grants a read lease (10 s) during which
// the object is neither evicted nor removable. Pinned objects are never evicted. Tick(now) does
// the housekeeping: declares silent nodes dead (their replicas are dropped, under-replicated
// objects queued for repair, objects without replicas removed and counted as lost), revokes
// stale pending puts, evicts (CLOCK per shard) between the high and low watermarks, and
// reclaims dropped namespaces. PlanRepairs hands out copy tasks under a byte-rate cap.
//
// Every mutation appends a record to the operation log (kvstore_core/op_log.h); Apply on a fresh
// master reproduces the leader's metadata exactly (CanonicalHash). Leases, heartbeats and
// CLOCK bits are soft state and not logged: Promote(now) makes a standby the leader with every
// object leased for one lease period and every node's heartbeat clock restarted.
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/rng.h"
#include "core/time.h"
#include "kvstore_core/node_registry.h"
#include "kvstore_core/object_table.h"
#include "kvstore_core/op_log.h"
#include "kvstore_core/types.h"

namespace myriad::kvstore {

class KvMaster {
 public:
  explicit KvMaster(KvMasterOptions options = {});
  ~KvMaster();
  KvMaster(const KvMaster&) = delete;
  KvMaster& operator=(const KvMaster&) = delete;

  // --- storage nodes ---
  absl::Status AddNode(NodeId id, std::string_view fault_domain, uint64_t capacity_bytes,
                       Nanos now);
  absl::Status Heartbeat(NodeId id, Nanos now);
  // Decommission or a failure detected elsewhere: as if the node had died now.
  absl::Status RemoveNode(NodeId id);
  const NodeRegistry& nodes() const { return nodes_; }

  // --- namespaces ---
  // InvalidArgument naming the bound when `name` breaks kMaxNamespaceNameBytes's rule.
  static absl::Status ValidateNamespaceName(std::string_view name);
  absl::StatusOr<NamespaceId> CreateNamespace(std::string_view name);
  // The live namespace of that name.
  absl::StatusOr<NamespaceId> FindNamespace(std::string_view name) const;
  absl::Status DropNamespace(NamespaceId ns);

  // --- objects ---
  // Places `request.replicas` replicas on distinct fault domains and records the run as
  // pending; returns the nodes to write to, in order.
  absl::StatusOr<ReplicaList> PutStart(NamespaceId ns, const PutRequest& request, Nanos now);
  // `size` (nonzero): the writer's object size; a PutEnd of a complete object of that size is
  // then OK, so a PutEnd retried after a failover that applied the first one succeeds.
  absl::Status PutEnd(NamespaceId ns, BlockKey object, uint64_t size = 0);
  absl::Status PutRevoke(NamespaceId ns, BlockKey object);
  // Finds the run holding `key` (any of its blocks) and leases it until now + lease_ttl.
  GetResult Get(NamespaceId ns, BlockKey key, Nanos now);
  // True when `key` is a block of a complete run. Grants no lease.
  bool Exists(NamespaceId ns, BlockKey key) const;
  // Fails while the object is leased or its put is pending.
  absl::Status Remove(NamespaceId ns, BlockKey object, Nanos now);
  absl::Status Pin(NamespaceId ns, BlockKey object, bool pinned);

  // Batch forms: one namespace check for the batch, then one result per item, in order. The
  // returned status is the batch's (unknown namespace); per-item outcomes are in `out`.
  absl::Status BatchGet(NamespaceId ns, std::span<const BlockKey> keys, Nanos now,
                        std::vector<GetResult>* out);
  absl::Status BatchExists(NamespaceId ns, std::span<const BlockKey> keys,
                           std::vector<uint8_t>* out) const;
  absl::Status BatchPutStart(NamespaceId ns, std::span<const PutRequest> requests, Nanos now,
                             std::vector<absl::StatusOr<ReplicaList>>* out);
  // `sizes` (empty, or one per object): each writer's size, as PutEnd's.
  absl::Status BatchPutEnd(NamespaceId ns, std::span<const BlockKey> objects,
                           std::vector<absl::Status>* out, std::span<const uint64_t> sizes = {});
  absl::Status BatchRemove(NamespaceId ns, std::span<const BlockKey> objects, Nanos now,
                           std::vector<absl::Status>* out);

  // --- housekeeping ---
  TickReport Tick(Nanos now);
  // Up to `max_tasks` repair tasks, within the repair byte budget accrued by `now`. Each task
  // adds a not-yet-readable replica on its destination until RepairDone or RepairFailed.
  std::vector<RepairTask> PlanRepairs(Nanos now, size_t max_tasks);
  absl::Status RepairDone(const RepairTask& task);
  absl::Status RepairFailed(const RepairTask& task);

  // --- storage-node reconciliation (master_reconcile.cc) ---
  // For each object a node reports holding: 1 when the master still places a replica of it on
  // `node` (pending, complete or being repaired there) or its namespace is dropped but not yet
  // reclaimed (readers may hold leases), 0 when the node may free its bytes. Read-only.
  void HeldBy(NodeId node, std::span<const HeldObject> objects, std::vector<uint8_t>* keep) const;

  // --- replication ---
  // The log records written since the last call.
  std::string TakeLog() { return log_.Take(); }
  // Applies a leader's records (a standby). Fails on a corrupt record or one that does not fit
  // this master's state, naming the byte offset.
  absl::Status Apply(std::string_view records);
  // The whole replicated metadata as log records that, applied to a fresh master, rebuild it
  // exactly (CanonicalHash equal): what a standby too far behind the leader's log installs.
  // Nodes, then each namespace (created, its runs put, dropped or reclaimed as it stands), then
  // the counters. Soft state (leases, heartbeats, the repair queue) is not in it.
  std::string SnapshotLog() const;
  // Makes this (standby) master the leader at `now`: leases and heartbeats restart.
  void Promote(Nanos now);
  // The metadata that the log replicates, in a canonical order: namespaces, nodes, runs.
  std::string CanonicalDump() const;
  uint64_t CanonicalHash() const;

  KvMasterStats stats() const;
  // Heap bytes of the metadata, from the containers' capacities (see object_table.h).
  size_t memory_bytes() const;
  const KvMasterOptions& options() const { return options_; }

 private:
  using Run = internal::Run;
  using ObjectTable = internal::ObjectTable;
  using Namespace = internal::Namespace;

  struct RunPos {
    Run* run = nullptr;
    uint32_t shard = 0;
    uint32_t slot = 0;
    uint32_t offset = 0;
  };
  struct RepairEntry {
    NamespaceId ns;
    BlockKey object;
    // The source of a copy that failed (e.g. its bytes did not match the checksum): not
    // chosen again while another readable replica exists.
    NodeId failed_source = kNoNode;
  };

  Namespace* LiveNamespace(NamespaceId ns);
  const Namespace* LiveNamespace(NamespaceId ns) const;
  absl::Status NamespaceError(NamespaceId ns) const;
  // The run holding block `key`, or run == nullptr.
  RunPos Locate(Namespace& ns, BlockKey key) const;
  // The run named `object` (its last key); an error naming what is wrong otherwise.
  absl::StatusOr<RunPos> LocateObject(Namespace& ns, NamespaceId id, BlockKey object) const;
  bool Leased(const Run& run, Nanos now) const;
  // Get's answer for a located run (pos.run may be null): leases it.
  GetResult Read(Namespace& ns, const RunPos& pos, Nanos now);
  // Calls answer(i, position of keys[i]) in order, prefetching ahead (see master.cc).
  template <typename Answer>
  void Pipeline(Namespace& ns, std::span<const BlockKey> keys, Answer&& answer) const;
  absl::Status ValidatePut(Namespace& ns, NamespaceId id, const PutRequest& request) const;

  // Effects: the only code that mutates metadata; used by the leader and by Apply alike,
  // each writing its log record (none while applying).
  absl::Status DoAddNode(NodeId id, std::string_view domain, uint64_t capacity, Nanos joined_at);
  void DoNodeDead(NodeId id);
  void DoCreateNamespace(NamespaceId id, std::string_view name);
  void DoDropNamespace(NamespaceId id);
  void DoReclaimNamespace(NamespaceId id);
  void DoPutStart(NamespaceId id, std::span<const BlockKey> keys, uint64_t size, int target,
                  bool pinned, Nanos deadline, std::span<const NodeId> replicas,
                  uint64_t checksum);
  void DoPutEnd(NamespaceId id, const RunPos& pos);
  void DoRemove(NamespaceId id, const RunPos& pos, RemoveReason reason);
  void DoPin(NamespaceId id, const RunPos& pos, bool pinned);
  void DoRepairStart(NamespaceId id, const RunPos& pos, NodeId destination);
  void DoRepairEnd(NamespaceId id, const RunPos& pos, NodeId destination, bool ok);

  void ChargeReplica(Namespace& ns, NodeId node, int64_t bytes);
  void DropReplicaAt(Namespace& ns, Run& run, int r);
  void ExpirePuts(Nanos now, TickReport* report);
  void Evict(Nanos now, TickReport* report);
  void ReclaimNamespaces(Nanos now, TickReport* report);
  // Frees up to `budget` tables of reclaimed namespaces.
  void FreeTables(int budget);
  absl::Status ApplyOne(LogReader& in);
  // The snapshot-only records (kSnapshotCounters, kSnapshotRepairing).
  absl::Status ApplySnapshotRecord(LogType type, LogReader& in);
  // A run's PutStart record (kPutStartChecked when it has a checksum), for the log and
  // snapshots alike.
  static void WritePutStart(LogWriter& w, NamespaceId id, const Run& run);
  // RepairDone (ok) or RepairFailed: the copy to task.destination is over.
  absl::Status EndRepair(const RepairTask& task, bool ok);

  KvMasterOptions options_;
  Rng rng_;
  NodeRegistry nodes_;
  std::vector<std::unique_ptr<Namespace>> namespaces_;  // by id; never shrinks
  LogWriter log_;
  bool applying_ = false;  // inside Apply: effects write no log records
  // Inside an effect that logged itself (a node's death): nested effects stay unlogged.
  int quiet_ = 0;
  bool Logging() const { return !applying_ && quiet_ == 0; }
  // Every object counts as leased before this (a promoted standby knows no leases).
  Nanos lease_floor_ = 0;

  // Pending puts by deadline (deadlines only grow: now + put_timeout); stale entries skipped.
  struct PendingEntry {
    Nanos deadline;
    NamespaceId ns;
    BlockKey object;
  };
  std::deque<PendingEntry> pending_;
  std::deque<RepairEntry> repair_queue_;
  double repair_tokens_ = 0;
  Nanos repair_refill_at_ = 0;
  bool repair_started_ = false;
  uint64_t repairs_in_flight_ = 0;
  uint64_t repair_bytes_issued_ = 0;
  // Eviction: which (namespace, shard) the hand visits next.
  NamespaceId evict_ns_ = 0;
  uint32_t evict_shard_ = 0;
  // Dropped namespaces waiting for their leases to pass, then for their tables to be freed.
  std::vector<NamespaceId> reclaiming_;
  std::vector<NamespaceId> freeing_;
  uint64_t objects_ = 0;
  uint64_t blocks_ = 0;
  uint64_t pending_objects_ = 0;
  uint64_t objects_lost_ = 0;
  uint64_t objects_evicted_ = 0;
};

}  // namespace myriad::kvstore
