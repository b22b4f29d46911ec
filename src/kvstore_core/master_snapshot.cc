// KvMaster snapshots: the whole replicated metadata written as operation-log records, so that a
// standby too far behind the leader's in-memory log (the batches it needs were trimmed) rebuilds
// the state with the same Apply it uses for the log, and no second format has to be kept in step
// with the first. A namespace's runs are put before it is dropped, so a dropped namespace that
// still holds bytes on its nodes comes back that way; replicas keep their order, and the repair
// copies in flight are marked with a snapshot-only record.
#include "fmt/format.h"
#include "kvstore_core/master.h"

namespace myriad::kvstore {

using internal::kComplete;
using internal::kFree;
using internal::kPending;
using internal::kPinned;
using internal::NamespaceState;

void KvMaster::WritePutStart(LogWriter& w, NamespaceId id, const Run& run) {
  w.Type(run.checksum != 0 ? LogType::kPutStartChecked : LogType::kPutStart);
  w.U64(id);
  w.U64(run.blocks);
  for (uint32_t b = 0; b < run.blocks; ++b) w.Key(run.KeyAt(b));
  w.U64(run.size);
  w.U64(run.target);
  w.U64((run.flags & kPinned) ? 1 : 0);
  w.I64(run.deadline);
  const int count = run.ReplicaCount();
  w.U64(static_cast<uint64_t>(count));
  for (int k = 0; k < count; ++k) w.U64(run.replicas[k]);
  if (run.checksum != 0) w.Key(run.checksum);
  w.EndRecord();
}

std::string KvMaster::SnapshotLog() const {
  LogWriter w;
  for (const NodeInfo& n : nodes_.nodes()) {
    w.Type(LogType::kAddNode);
    w.U64(n.id);
    w.Str(nodes_.DomainName(n.domain));
    w.U64(n.capacity);
    w.I64(n.joined_at);
    w.EndRecord();
  }
  for (size_t i = 0; i < namespaces_.size(); ++i) {
    const Namespace& ns = *namespaces_[i];
    w.Type(LogType::kCreateNamespace);
    w.U64(i);
    w.Str(ns.name);
    w.EndRecord();
    if (ns.state != NamespaceState::kGone) {
      for (const auto& t : ns.tables) {
        if (t == nullptr) continue;
        for (const Run& r : t->runs) {
          if (r.state == kFree) continue;
          WritePutStart(w, static_cast<NamespaceId>(i), r);
          if (r.state == kComplete) {
            w.Type(LogType::kPutEnd);
            w.U64(i);
            w.Key(r.last_key);
            w.EndRecord();
          }
          if (r.pending_mask != 0) {
            w.Type(LogType::kSnapshotRepairing);
            w.U64(i);
            w.Key(r.last_key);
            w.U64(r.pending_mask);
            w.EndRecord();
          }
        }
      }
    }
    if (ns.state != NamespaceState::kLive) {
      w.Type(LogType::kDropNamespace);
      w.U64(i);
      w.EndRecord();
    }
    if (ns.state == NamespaceState::kGone) {
      w.Type(LogType::kReclaimNamespace);
      w.U64(i);
      w.EndRecord();
    }
  }
  w.Type(LogType::kSnapshotCounters);
  w.U64(objects_lost_);
  w.U64(objects_evicted_);
  w.EndRecord();
  return w.Take();
}

absl::Status KvMaster::ApplySnapshotRecord(LogType type, LogReader& in) {
  if (type == LogType::kSnapshotCounters) {
    const uint64_t lost = in.U64();
    const uint64_t evicted = in.U64();
    if (in.failed()) return absl::DataLossError("truncated SnapshotCounters");
    objects_lost_ = lost;
    objects_evicted_ = evicted;
    return absl::OkStatus();
  }
  const auto id = static_cast<NamespaceId>(in.U64());
  const BlockKey key = in.Key();
  const uint64_t mask = in.U64();
  if (in.failed()) return absl::DataLossError("truncated SnapshotRepairing");
  Namespace* ns = LiveNamespace(id);
  if (ns == nullptr) return NamespaceError(id);
  absl::StatusOr<RunPos> pos = LocateObject(*ns, id, key);
  if (!pos.ok()) return pos.status();
  Run& run = *pos->run;
  if (mask >= (uint64_t{1} << run.ReplicaCount())) {
    return absl::DataLossError(fmt::format("SnapshotRepairing mask {:#x} beyond the replicas", mask));
  }
  run.pending_mask = static_cast<uint8_t>(mask);
  return absl::OkStatus();
}

}  // namespace myriad::kvstore
