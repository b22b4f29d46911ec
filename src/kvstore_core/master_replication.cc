// KvMaster replication: applying a leader's operation log, promotion, and the canonical dump
// that proves a standby equal to its leader. Also the stats and memory accounting.
#include <algorithm>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "fmt/format.h"
#include "kvstore_core/master.h"

namespace myriad::kvstore {

using internal::kComplete;
using internal::kFree;
using internal::kPending;
using internal::kPinned;
using internal::NamespaceState;

absl::Status KvMaster::Apply(std::string_view records) {
  LogReader in(records);
  applying_ = true;
  absl::Status st;
  while (!in.done() && st.ok()) {
    const size_t at = in.position();
    st = ApplyOne(in);
    if (st.ok() && in.failed()) st = absl::DataLossError("truncated record");
    if (!st.ok()) {
      st = absl::Status(st.code(), fmt::format("log record at byte {}: {}", at,
                                               std::string(st.message())));
    }
  }
  applying_ = false;
  FreeTables(kShardCount);
  return st;
}

absl::Status KvMaster::ApplyOne(LogReader& in) {
  const auto type = static_cast<LogType>(in.Byte());
  // Objects are named (namespace, last key) in every record after kPutStart.
  auto object = [&](NamespaceId* id) -> absl::StatusOr<RunPos> {
    *id = static_cast<NamespaceId>(in.U64());
    const BlockKey key = in.Key();
    if (in.failed()) return absl::DataLossError("truncated record");
    if (*id >= namespaces_.size() || namespaces_[*id]->state == NamespaceState::kGone) {
      return NamespaceError(*id);
    }
    return LocateObject(*namespaces_[*id], *id, key);
  };
  switch (type) {
    case LogType::kAddNode: {
      const auto id = static_cast<NodeId>(in.U64());
      const std::string_view domain = in.Str();
      const uint64_t capacity = in.U64();
      const Nanos joined = in.I64();
      if (in.failed()) return absl::DataLossError("truncated AddNode");
      return DoAddNode(id, domain, capacity, joined);
    }
    case LogType::kNodeDead: {
      const auto id = static_cast<NodeId>(in.U64());
      if (in.failed()) return absl::DataLossError("truncated NodeDead");
      if (nodes_.Find(id) == nullptr) {
        return absl::NotFoundError(fmt::format("NodeDead of unknown node {}", id));
      }
      DoNodeDead(id);
      return absl::OkStatus();
    }
    case LogType::kCreateNamespace: {
      const auto id = static_cast<NamespaceId>(in.U64());
      const std::string_view name = in.Str();
      if (in.failed()) return absl::DataLossError("truncated CreateNamespace");
      if (id != namespaces_.size()) {
        return absl::FailedPreconditionError(
            fmt::format("CreateNamespace of id {}, expected {}", id, namespaces_.size()));
      }
      DoCreateNamespace(id, name);
      return absl::OkStatus();
    }
    case LogType::kDropNamespace:
    case LogType::kReclaimNamespace: {
      const auto id = static_cast<NamespaceId>(in.U64());
      if (in.failed()) return absl::DataLossError("truncated namespace record");
      const NamespaceState want =
          type == LogType::kDropNamespace ? NamespaceState::kLive : NamespaceState::kDropping;
      if (id >= namespaces_.size() || namespaces_[id]->state != want) {
        return absl::FailedPreconditionError(
            fmt::format("namespace id {} is not in the state the record expects", id));
      }
      if (type == LogType::kDropNamespace) {
        DoDropNamespace(id);
      } else {
        std::erase(reclaiming_, id);
        DoReclaimNamespace(id);
      }
      return absl::OkStatus();
    }
    case LogType::kPutStart:
    case LogType::kPutStartChecked: {
      const auto id = static_cast<NamespaceId>(in.U64());
      const uint64_t blocks = in.U64();
      if (in.failed() || blocks == 0 || blocks > internal::kMaxRunBlocks) {
        return absl::DataLossError("PutStart with a bad block count");
      }
      std::vector<BlockKey> keys(blocks);
      for (BlockKey& k : keys) k = in.Key();
      const uint64_t size = in.U64();
      const auto target = static_cast<int>(in.U64());
      const bool pinned = in.U64() != 0;
      const Nanos deadline = in.I64();
      const uint64_t count = in.U64();
      if (in.failed() || count > kMaxReplicas) return absl::DataLossError("bad PutStart");
      std::vector<NodeId> replicas(count);
      for (NodeId& r : replicas) r = static_cast<NodeId>(in.U64());
      const uint64_t checksum = type == LogType::kPutStartChecked ? in.Key() : 0;
      if (in.failed()) return absl::DataLossError("truncated PutStart");
      Namespace* ns = LiveNamespace(id);
      if (ns == nullptr) return NamespaceError(id);
      PutRequest q{keys.data(), static_cast<uint32_t>(blocks), size, target, pinned};
      if (absl::Status st = ValidatePut(*ns, id, q); !st.ok()) return st;
      for (NodeId r : replicas) {
        if (nodes_.Find(r) == nullptr) {
          return absl::NotFoundError(fmt::format("PutStart places a replica on unknown node {}", r));
        }
      }
      DoPutStart(id, keys, size, target, pinned, deadline, replicas, checksum);
      return absl::OkStatus();
    }
    case LogType::kPutEnd: {
      NamespaceId id;
      absl::StatusOr<RunPos> pos = object(&id);
      if (!pos.ok()) return pos.status();
      if (pos->run->state != kPending) return absl::FailedPreconditionError("PutEnd of a complete object");
      DoPutEnd(id, *pos);
      return absl::OkStatus();
    }
    case LogType::kRemove: {
      NamespaceId id;
      absl::StatusOr<RunPos> pos = object(&id);
      const uint64_t reason = in.U64();
      if (in.failed() || reason > static_cast<uint64_t>(RemoveReason::kExpired)) {
        return absl::DataLossError("bad Remove");
      }
      if (!pos.ok()) return pos.status();
      DoRemove(id, *pos, static_cast<RemoveReason>(reason));
      return absl::OkStatus();
    }
    case LogType::kPin: {
      NamespaceId id;
      absl::StatusOr<RunPos> pos = object(&id);
      const bool pinned = in.U64() != 0;
      if (in.failed()) return absl::DataLossError("truncated Pin");
      if (!pos.ok()) return pos.status();
      DoPin(id, *pos, pinned);
      return absl::OkStatus();
    }
    case LogType::kRepairStart:
    case LogType::kRepairEnd: {
      NamespaceId id;
      absl::StatusOr<RunPos> pos = object(&id);
      const auto dst = static_cast<NodeId>(in.U64());
      const bool ok = type == LogType::kRepairEnd && in.U64() != 0;
      if (in.failed()) return absl::DataLossError("truncated repair record");
      if (!pos.ok()) return pos.status();
      const Run& run = *pos->run;
      int r = 0;
      while (r < kMaxReplicas && run.replicas[r] != dst) ++r;
      if (type == LogType::kRepairStart) {
        if (r != kMaxReplicas || run.ReplicaCount() == kMaxReplicas || nodes_.Find(dst) == nullptr) {
          return absl::FailedPreconditionError(fmt::format("RepairStart to node {} does not fit", dst));
        }
        DoRepairStart(id, *pos, dst);
      } else {
        if (r == kMaxReplicas || ((run.pending_mask >> r) & 1) == 0) {
          return absl::FailedPreconditionError(fmt::format("RepairEnd without a repair to node {}", dst));
        }
        DoRepairEnd(id, *pos, dst, ok);
      }
      return absl::OkStatus();
    }
    case LogType::kSnapshotCounters:
    case LogType::kSnapshotRepairing:
      return ApplySnapshotRecord(type, in);
  }
  return absl::DataLossError(fmt::format("unknown record type {}", static_cast<int>(type)));
}

void KvMaster::Promote(Nanos now) {
  lease_floor_ = now + options_.lease_ttl;
  nodes_.ResetHeartbeats(now);
  // The repair planner starts with a full bucket; the queue was kept while applying.
  repair_started_ = false;
}

std::string KvMaster::CanonicalDump() const {
  std::string out;
  std::vector<NodeInfo> nodes = nodes_.nodes();
  std::sort(nodes.begin(), nodes.end(),
            [](const NodeInfo& a, const NodeInfo& b) { return a.id < b.id; });
  for (const NodeInfo& n : nodes) {
    out += fmt::format("node {} domain={} capacity={} used={} joined={}\n", n.id,
                       nodes_.DomainName(n.domain), n.capacity, n.used, n.joined_at);
  }
  out += fmt::format("objects={} blocks={} pending={} lost={} evicted={}\n", objects_, blocks_,
                     pending_objects_, objects_lost_, objects_evicted_);
  for (size_t i = 0; i < namespaces_.size(); ++i) {
    const Namespace& ns = *namespaces_[i];
    out += fmt::format("namespace {} '{}' state={} objects={} blocks={}\n", i, ns.name,
                       static_cast<int>(ns.state), ns.objects, ns.blocks);
    std::vector<std::pair<NodeId, uint64_t>> bytes(ns.node_bytes.begin(), ns.node_bytes.end());
    std::sort(bytes.begin(), bytes.end());
    for (const auto& [node, b] : bytes) out += fmt::format("  bytes node={} {}\n", node, b);
    if (ns.state == NamespaceState::kGone) continue;
    std::vector<const Run*> runs;
    for (const auto& t : ns.tables) {
      if (t == nullptr) continue;
      for (const Run& r : t->runs) {
        if (r.state != kFree) runs.push_back(&r);
      }
    }
    std::sort(runs.begin(), runs.end(),
              [](const Run* a, const Run* b) { return a->last_key < b->last_key; });
    for (const Run* r : runs) {
      out += fmt::format("  run {:016x} blocks={} size={} target={} state={} pinned={} replicas=",
                         r->last_key, r->blocks, r->size, r->target, r->state,
                         (r->flags & kPinned) ? 1 : 0);
      for (int k = 0; k < kMaxReplicas && r->replicas[k] != kNoNode; ++k) {
        out += fmt::format("{}{}{}", k ? "," : "", r->replicas[k],
                           ((r->pending_mask >> k) & 1) ? "(repairing)" : "");
      }
      if (r->state == kPending) out += fmt::format(" deadline={}", r->deadline);
      if (r->checksum != 0) out += fmt::format(" checksum={:016x}", r->checksum);
      out += " keys=";
      for (uint32_t b = 0; b < r->blocks; ++b) out += fmt::format("{:x}.", r->KeyAt(b));
      out += '\n';
    }
  }
  return out;
}

uint64_t KvMaster::CanonicalHash() const {
  const std::string dump = CanonicalDump();
  return XXH3_64bits(dump.data(), dump.size());
}

KvMasterStats KvMaster::stats() const {
  KvMasterStats s;
  s.objects = objects_;
  s.blocks = blocks_;
  s.pending = pending_objects_;
  s.objects_lost = objects_lost_;
  s.objects_evicted = objects_evicted_;
  s.repair_queue = repair_queue_.size();
  s.repairs_in_flight = repairs_in_flight_;
  s.repair_bytes_issued = repair_bytes_issued_;
  return s;
}

size_t KvMaster::memory_bytes() const {
  // absl's flat_hash_map: one control byte per slot beside the slot itself.
  constexpr size_t kIndexSlot = sizeof(std::pair<const BlockKey, uint64_t>) + 1;
  size_t b = sizeof(*this) + nodes_.memory_bytes() +
             namespaces_.capacity() * sizeof(std::unique_ptr<Namespace>);
  for (const auto& ns : namespaces_) {
    b += sizeof(Namespace) + ns->name.capacity() +
         ns->node_bytes.capacity() * (sizeof(std::pair<const NodeId, uint64_t>) + 1);
    for (const auto& t : ns->tables) {
      if (t == nullptr) continue;
      b += sizeof(ObjectTable) + t->index.capacity() * kIndexSlot +
           t->runs.capacity() * sizeof(Run) + t->key_bytes;
    }
  }
  // std::deque stores its elements in 512-byte blocks.
  b += pending_.size() * sizeof(PendingEntry) + repair_queue_.size() * sizeof(RepairEntry);
  b += reclaiming_.capacity() * sizeof(NamespaceId) + freeing_.capacity() * sizeof(NamespaceId);
  return b;
}

}  // namespace myriad::kvstore
