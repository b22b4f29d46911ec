// KvMaster housekeeping: node death, expiry of pending puts, namespace reclamation, eviction
// between the watermarks, and the rate-capped repair planner.
#include <algorithm>

#include "fmt/format.h"
#include "kvstore_core/master.h"

namespace myriad::kvstore {

using internal::kComplete;
using internal::kFree;
using internal::kPending;
using internal::kPinned;
using internal::kReferenced;
using internal::NamespaceState;

namespace {
// Slots one visit of the eviction hand inspects in a table before moving to the next, so the
// pressure spreads over the shards (approximate global LRU from per-shard CLOCKs).
constexpr uint32_t kStepsPerVisit = 64;
// Tables of reclaimed namespaces freed per Tick.
constexpr int kTablesFreedPerTick = 64;
}  // namespace

// A dead node's replicas are gone. This is a scan of every run (tens of ms per million), paid
// once per node death, which is rare; keeping a per-node list of replicas instead would cost
// 8+ bytes per replica on every object for the whole life of the master.
void KvMaster::DoNodeDead(NodeId id) {
  if (Logging()) {
    log_.Type(LogType::kNodeDead);
    log_.U64(id);
    log_.EndRecord();
  }
  ++quiet_;  // the record above stands for everything below, on the standby too
  for (size_t n = 0; n < namespaces_.size(); ++n) {
    Namespace& ns = *namespaces_[n];
    if (ns.state == NamespaceState::kGone) continue;
    const auto nsid = static_cast<NamespaceId>(n);
    for (uint32_t shard = 0; shard < kShardCount; ++shard) {
      ObjectTable* t = ns.tables[shard].get();
      if (t == nullptr || t->live == 0) continue;
      for (uint32_t slot = 0; slot < t->runs.size(); ++slot) {
        Run& run = t->runs[slot];
        if (run.state == kFree) continue;
        int r = 0;
        while (r < kMaxReplicas && run.replicas[r] != id) ++r;
        if (r == kMaxReplicas) continue;
        const RunPos pos{&run, shard, slot, run.blocks - 1};
        if (run.state == kPending) {
          // The writer cannot finish a put to a dead node; its PutEnd will get NotFound.
          DoRemove(nsid, pos, RemoveReason::kRevoked);
          continue;
        }
        if ((run.pending_mask >> r) & 1) repairs_in_flight_ -= repairs_in_flight_ > 0 ? 1 : 0;
        DropReplicaAt(ns, run, r);
        if (run.CompleteCount() == 0) {
          objects_lost_++;
          DoRemove(nsid, pos, RemoveReason::kRemoved);
        } else if (run.ReplicaCount() < run.target && ns.state == NamespaceState::kLive) {
          repair_queue_.push_back({nsid, run.last_key});
        }
      }
    }
  }
  --quiet_;
  nodes_.Remove(id);
}

void KvMaster::DropReplicaAt(Namespace& ns, Run& run, int r) {
  ChargeReplica(ns, run.replicas[r], -static_cast<int64_t>(run.size));
  const uint8_t low = run.pending_mask & static_cast<uint8_t>((1u << r) - 1);
  const uint8_t high = static_cast<uint8_t>(run.pending_mask >> (r + 1));
  run.pending_mask = static_cast<uint8_t>(low | (high << r));
  for (int i = r; i + 1 < kMaxReplicas; ++i) run.replicas[i] = run.replicas[i + 1];
  run.replicas[kMaxReplicas - 1] = kNoNode;
}

TickReport KvMaster::Tick(Nanos now) {
  TickReport report;
  for (NodeId id : nodes_.Expired(now, options_.dead_after)) {
    DoNodeDead(id);
    report.nodes_declared_dead++;
  }
  ExpirePuts(now, &report);
  ReclaimNamespaces(now, &report);
  Evict(now, &report);
  FreeTables(kTablesFreedPerTick);
  return report;
}

void KvMaster::ExpirePuts(Nanos now, TickReport* report) {
  while (!pending_.empty() && pending_.front().deadline <= now) {
    const PendingEntry e = pending_.front();
    pending_.pop_front();
    Namespace* ns = LiveNamespace(e.ns);
    if (ns == nullptr) continue;
    RunPos pos = Locate(*ns, e.object);
    // Stale entries: the put ended, or was revoked and put again with a later deadline.
    if (pos.run == nullptr || pos.offset + 1 != pos.run->blocks || pos.run->state != kPending ||
        pos.run->deadline != e.deadline) {
      continue;
    }
    DoRemove(e.ns, pos, RemoveReason::kExpired);
    report->puts_expired++;
  }
}

void KvMaster::ReclaimNamespaces(Nanos now, TickReport* report) {
  std::erase_if(reclaiming_, [&](NamespaceId id) {
    Namespace& ns = *namespaces_[id];
    if (ns.state != NamespaceState::kDropping) return true;
    if (std::max(ns.lease_horizon, lease_floor_) > now) return false;
    DoReclaimNamespace(id);
    report->namespaces_reclaimed++;
    return true;
  });
}

void KvMaster::DoReclaimNamespace(NamespaceId id) {
  Namespace& ns = *namespaces_[id];
  for (const auto& [node, bytes] : ns.node_bytes) nodes_.AddUsed(node, -static_cast<int64_t>(bytes));
  ns.node_bytes.clear();
  objects_ -= ns.objects;
  blocks_ -= ns.blocks;
  // Its pending puts stop counting; their expiry entries are skipped as stale.
  for (const auto& t : ns.tables) {
    if (t == nullptr) continue;
    for (const Run& r : t->runs) pending_objects_ -= r.state == kPending ? 1 : 0;
  }
  ns.objects = 0;
  ns.blocks = 0;
  ns.state = NamespaceState::kGone;
  freeing_.push_back(id);
  if (!Logging()) return;
  log_.Type(LogType::kReclaimNamespace);
  log_.U64(id);
  log_.EndRecord();
}

void KvMaster::FreeTables(int budget) {
  while (budget > 0 && !freeing_.empty()) {
    Namespace& ns = *namespaces_[freeing_.back()];
    bool any = false;
    for (auto& t : ns.tables) {
      if (t == nullptr) continue;
      t.reset();
      any = true;
      if (--budget == 0) break;
    }
    if (!any || budget > 0) freeing_.pop_back();
  }
}

void KvMaster::Evict(Nanos now, TickReport* report) {
  // Bytes to free per node over its high watermark, and for the cluster as a whole.
  struct Over {
    NodeId id;
    int64_t to_free;
  };
  std::vector<Over> over;
  int64_t over_total = 0;
  for (const NodeInfo& n : nodes_.nodes()) {
    const double cap = static_cast<double>(n.capacity);
    if (static_cast<double>(n.used) >= options_.high_watermark * cap) {
      over.push_back({n.id, static_cast<int64_t>(static_cast<double>(n.used) -
                                                 options_.low_watermark * cap)});
      over_total += over.back().to_free;
    }
  }
  int64_t cluster_to_free = 0;
  const double total_cap = static_cast<double>(nodes_.total_capacity());
  if (total_cap > 0 && static_cast<double>(nodes_.total_used()) >= options_.high_watermark * total_cap) {
    cluster_to_free = static_cast<int64_t>(static_cast<double>(nodes_.total_used()) -
                                           options_.low_watermark * total_cap);
  }
  if (over_total <= 0 && cluster_to_free <= 0) return;
  if (namespaces_.empty()) return;

  uint64_t budget = options_.eviction_budget;
  while (budget > 0 && (over_total > 0 || cluster_to_free > 0)) {
    if (evict_ns_ >= namespaces_.size()) evict_ns_ = 0;
    const NamespaceId nsid = evict_ns_;
    Namespace& ns = *namespaces_[nsid];
    const uint32_t shard = evict_shard_;
    ObjectTable* t = ns.state == NamespaceState::kLive ? ns.tables[shard].get() : nullptr;
    if (++evict_shard_ == kShardCount) {
      evict_shard_ = 0;
      ++evict_ns_;
    }
    --budget;  // a visit costs budget even when the table is empty, so the loop ends
    if (t == nullptr || t->live == 0) continue;
    const auto size = static_cast<uint32_t>(t->runs.size());
    uint32_t steps = static_cast<uint32_t>(std::min<uint64_t>({budget, kStepsPerVisit, size}));
    for (; steps > 0 && (over_total > 0 || cluster_to_free > 0); --steps, --budget) {
      const uint32_t slot = t->hand;
      t->hand = slot + 1 == size ? 0 : slot + 1;
      Run& run = t->runs[slot];
      if (run.state != kComplete || (run.flags & kPinned) || Leased(run, now)) continue;
      if (run.flags & kReferenced) {
        run.flags &= static_cast<uint8_t>(~kReferenced);
        continue;
      }
      bool helps = cluster_to_free > 0;
      for (int r = 0; r < kMaxReplicas && run.replicas[r] != kNoNode; ++r) {
        for (Over& o : over) {
          if (o.id == run.replicas[r] && o.to_free > 0) helps = true;
        }
      }
      if (!helps) continue;
      const auto bytes = static_cast<int64_t>(run.size);
      for (int r = 0; r < kMaxReplicas && run.replicas[r] != kNoNode; ++r) {
        for (Over& o : over) {
          if (o.id != run.replicas[r] || o.to_free <= 0) continue;
          const int64_t freed = std::min(o.to_free, bytes);
          o.to_free -= freed;
          over_total -= freed;
        }
        cluster_to_free -= bytes;
      }
      DoRemove(nsid, RunPos{&run, shard, slot, run.blocks - 1}, RemoveReason::kEvicted);
      report->objects_evicted++;
    }
  }
}

std::vector<RepairTask> KvMaster::PlanRepairs(Nanos now, size_t max_tasks) {
  std::vector<RepairTask> tasks;
  if (!repair_started_) {
    repair_started_ = true;
    repair_tokens_ = static_cast<double>(options_.repair_burst_bytes);
    repair_refill_at_ = now;
  }
  if (now > repair_refill_at_) {
    repair_tokens_ = std::min(static_cast<double>(options_.repair_burst_bytes),
                              repair_tokens_ + options_.repair_bytes_per_second *
                                                   NanosToSeconds(now - repair_refill_at_));
    repair_refill_at_ = now;
  }
  std::vector<RepairEntry> later;
  size_t attempts = repair_queue_.size();
  // Tokens may go negative by one object: a task is issued while the bucket is positive, so
  // objects larger than the burst still get repaired, and the overshoot is paid back first.
  while (tasks.size() < max_tasks && repair_tokens_ > 0 && attempts > 0 &&
         !repair_queue_.empty()) {
    --attempts;
    const RepairEntry e = repair_queue_.front();
    repair_queue_.pop_front();
    Namespace* ns = LiveNamespace(e.ns);
    if (ns == nullptr) continue;
    RunPos pos = Locate(*ns, e.object);
    if (pos.run == nullptr || pos.offset + 1 != pos.run->blocks || pos.run->state != kComplete) {
      continue;
    }
    Run& run = *pos.run;
    const int count = run.ReplicaCount();
    if (count >= run.target) continue;
    std::vector<NodeId> dst;
    if (!nodes_.Place(run.size, 1, std::span<const NodeId>(run.replicas.data(), count), now,
                      options_, rng_, &dst)
             .ok()) {
      later.push_back(e);  // no room on a new fault domain now; try again next round
      continue;
    }
    // Source: a random readable replica, spreading the read load of a repair wave.
    NodeId sources[kMaxReplicas];
    int n_sources = 0;
    for (int r = 0; r < count; ++r) {
      if (((run.pending_mask >> r) & 1) == 0) sources[n_sources++] = run.replicas[r];
    }
    if (n_sources > 1) {
      // A source whose copy failed (its bytes may not match the checksum) is tried last.
      for (int k = 0; k < n_sources; ++k) {
        if (sources[k] == e.failed_source) sources[k] = sources[--n_sources];
      }
    }
    const NodeId source = sources[rng_.Below(static_cast<uint64_t>(n_sources))];
    DoRepairStart(e.ns, pos, dst[0]);
    repair_tokens_ -= static_cast<double>(run.size);
    repair_bytes_issued_ += run.size;
    repairs_in_flight_++;
    tasks.push_back(RepairTask{e.ns, run.last_key, run.size, source, dst[0], run.checksum});
    if (count + 1 < run.target) later.push_back({e.ns, e.object});
  }
  repair_queue_.insert(repair_queue_.end(), later.begin(), later.end());
  return tasks;
}

void KvMaster::DoRepairStart(NamespaceId id, const RunPos& pos, NodeId destination) {
  Run& run = *pos.run;
  const int r = run.ReplicaCount();
  run.replicas[r] = destination;
  run.pending_mask |= static_cast<uint8_t>(1u << r);
  ChargeReplica(*namespaces_[id], destination, static_cast<int64_t>(run.size));
  if (!Logging()) return;
  log_.Type(LogType::kRepairStart);
  log_.U64(id);
  log_.Key(run.last_key);
  log_.U64(destination);
  log_.EndRecord();
}

void KvMaster::DoRepairEnd(NamespaceId id, const RunPos& pos, NodeId destination, bool ok) {
  Run& run = *pos.run;
  int r = 0;
  while (r < kMaxReplicas && run.replicas[r] != destination) ++r;
  if (ok) {
    run.pending_mask &= static_cast<uint8_t>(~(1u << r));
  } else {
    DropReplicaAt(*namespaces_[id], run, r);
  }
  if (!Logging()) return;
  log_.Type(LogType::kRepairEnd);
  log_.U64(id);
  log_.Key(run.last_key);
  log_.U64(destination);
  log_.U64(ok ? 1 : 0);
  log_.EndRecord();
}

absl::Status KvMaster::RepairDone(const RepairTask& task) { return EndRepair(task, true); }

absl::Status KvMaster::RepairFailed(const RepairTask& task) { return EndRepair(task, false); }

absl::Status KvMaster::EndRepair(const RepairTask& task, bool ok) {
  Namespace* ns = LiveNamespace(task.ns);
  if (ns == nullptr) return NamespaceError(task.ns);
  absl::StatusOr<RunPos> pos = LocateObject(*ns, task.ns, task.object);
  if (!pos.ok()) return pos.status();
  const Run& run = *pos->run;
  int r = 0;
  while (r < kMaxReplicas && run.replicas[r] != task.destination) ++r;
  if (r == kMaxReplicas || ((run.pending_mask >> r) & 1) == 0) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: object {:016x} has no repair in progress to node {}", ok ? "RepairDone" : "RepairFailed",
        task.object, task.destination));
  }
  DoRepairEnd(task.ns, *pos, task.destination, ok);
  repairs_in_flight_ -= repairs_in_flight_ > 0 ? 1 : 0;
  // A failed copy goes back in the queue to be planned again.
  if (!ok) repair_queue_.push_back({task.ns, task.object, task.source});
  return absl::OkStatus();
}

}  // namespace myriad::kvstore
