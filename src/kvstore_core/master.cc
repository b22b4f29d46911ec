// KvMaster: nodes, namespaces and the object API. Housekeeping (node death, eviction, repair,
// expiry) is in master_maintenance.cc, the log and the canonical dump in master_replication.cc.
#include "kvstore_core/master.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "fmt/format.h"

namespace myriad::kvstore {

using internal::kComplete;
using internal::kPending;
using internal::kPinned;
using internal::kReferenced;
using internal::NamespaceState;

KvMaster::KvMaster(KvMasterOptions options) : options_(options), rng_(options.seed) {}
KvMaster::~KvMaster() = default;

// --- storage nodes ---

absl::Status KvMaster::AddNode(NodeId id, std::string_view fault_domain,
                               uint64_t capacity_bytes, Nanos now) {
  return DoAddNode(id, fault_domain, capacity_bytes, now);
}

absl::Status KvMaster::DoAddNode(NodeId id, std::string_view domain, uint64_t capacity,
                                 Nanos joined_at) {
  absl::Status st = nodes_.Add(id, domain, capacity, joined_at);
  if (!st.ok() || !Logging()) return st;
  log_.Type(LogType::kAddNode);
  log_.U64(id);
  log_.Str(domain);
  log_.U64(capacity);
  log_.I64(joined_at);
  log_.EndRecord();
  return st;
}

absl::Status KvMaster::Heartbeat(NodeId id, Nanos now) { return nodes_.Heartbeat(id, now); }

absl::Status KvMaster::RemoveNode(NodeId id) {
  if (nodes_.Find(id) == nullptr) {
    return absl::NotFoundError(fmt::format("RemoveNode: unknown node {}", id));
  }
  DoNodeDead(id);
  return absl::OkStatus();
}

// --- namespaces ---

absl::Status KvMaster::ValidateNamespaceName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNamespaceNameBytes) {
    return absl::InvalidArgumentError(
        fmt::format("namespace name has {} bytes; it must have 1 to {}", name.size(),
                    kMaxNamespaceNameBytes));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(fmt::format(
          "namespace name has byte {:#04x} at offset {}; only printable ASCII without spaces "
          "(0x21-0x7e) is allowed",
          c, i));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<NamespaceId> KvMaster::CreateNamespace(std::string_view name) {
  if (absl::Status st = ValidateNamespaceName(name); !st.ok()) return st;
  if (FindNamespace(name).ok()) {
    return absl::AlreadyExistsError(fmt::format("namespace '{}' already exists", name));
  }
  const auto id = static_cast<NamespaceId>(namespaces_.size());
  DoCreateNamespace(id, name);
  return id;
}

void KvMaster::DoCreateNamespace(NamespaceId id, std::string_view name) {
  namespaces_.push_back(std::make_unique<Namespace>());
  namespaces_.back()->name = std::string(name);
  if (!Logging()) return;
  log_.Type(LogType::kCreateNamespace);
  log_.U64(id);
  log_.Str(name);
  log_.EndRecord();
}

absl::StatusOr<NamespaceId> KvMaster::FindNamespace(std::string_view name) const {
  for (size_t i = 0; i < namespaces_.size(); ++i) {
    if (namespaces_[i]->state == NamespaceState::kLive && namespaces_[i]->name == name) {
      return static_cast<NamespaceId>(i);
    }
  }
  return absl::NotFoundError(fmt::format("no namespace '{}'", name));
}

absl::Status KvMaster::DropNamespace(NamespaceId ns) {
  if (LiveNamespace(ns) == nullptr) return NamespaceError(ns);
  DoDropNamespace(ns);
  return absl::OkStatus();
}

void KvMaster::DoDropNamespace(NamespaceId id) {
  namespaces_[id]->state = NamespaceState::kDropping;
  reclaiming_.push_back(id);
  if (!Logging()) return;
  log_.Type(LogType::kDropNamespace);
  log_.U64(id);
  log_.EndRecord();
}

KvMaster::Namespace* KvMaster::LiveNamespace(NamespaceId ns) {
  if (ns >= namespaces_.size() || namespaces_[ns]->state != NamespaceState::kLive) return nullptr;
  return namespaces_[ns].get();
}

const KvMaster::Namespace* KvMaster::LiveNamespace(NamespaceId ns) const {
  if (ns >= namespaces_.size() || namespaces_[ns]->state != NamespaceState::kLive) return nullptr;
  return namespaces_[ns].get();
}

absl::Status KvMaster::NamespaceError(NamespaceId ns) const {
  if (ns >= namespaces_.size()) return absl::NotFoundError(fmt::format("no namespace id {}", ns));
  return absl::NotFoundError(
      fmt::format("namespace '{}' (id {}) was dropped", namespaces_[ns]->name, ns));
}

// --- lookups ---

KvMaster::RunPos KvMaster::Locate(Namespace& ns, BlockKey key) const {
  const ObjectTable* t = ns.tables[ShardOfKey(key)].get();
  if (t == nullptr) return {};
  auto it = t->index.find(key);
  if (it == t->index.end()) return {};
  const uint64_t ref = it->second;
  RunPos pos{nullptr, internal::RefShard(ref), internal::RefSlot(ref), internal::RefOffset(ref)};
  pos.run = &ns.tables[pos.shard]->runs[pos.slot];
  return pos;
}

absl::StatusOr<KvMaster::RunPos> KvMaster::LocateObject(Namespace& ns, NamespaceId id,
                                                        BlockKey object) const {
  RunPos pos = Locate(ns, object);
  if (pos.run == nullptr) {
    return absl::NotFoundError(
        fmt::format("no object {:016x} in namespace '{}' (id {})", object, ns.name, id));
  }
  if (pos.offset + 1 != pos.run->blocks) {
    return absl::InvalidArgumentError(fmt::format(
        "key {:016x} is block {} of object {:016x}, not an object's name: objects are named by "
        "their last block key",
        object, pos.offset, pos.run->last_key));
  }
  return pos;
}

bool KvMaster::Leased(const Run& run, Nanos now) const {
  return run.state == kComplete && (run.deadline > now || lease_floor_ > now);
}

GetResult KvMaster::Get(NamespaceId ns, BlockKey key, Nanos now) {
  Namespace* n = LiveNamespace(ns);
  if (n == nullptr) return GetResult{};
  return Read(*n, Locate(*n, key), now);
}

GetResult KvMaster::Read(Namespace& ns, const RunPos& pos, Nanos now) {
  GetResult r;
  if (pos.run == nullptr) return r;
  Namespace* n = &ns;
  Run& run = *pos.run;
  if (run.state != kComplete) {
    r.code = absl::StatusCode::kUnavailable;
    return r;
  }
  run.deadline = std::max(run.deadline, now + options_.lease_ttl);
  run.flags |= kReferenced;
  n->lease_horizon = std::max(n->lease_horizon, run.deadline);
  r.code = absl::StatusCode::kOk;
  r.object = run.last_key;
  r.block = pos.offset;
  r.blocks = run.blocks;
  r.size = run.size;
  r.checksum = run.checksum;
  r.lease_until = std::max(run.deadline, lease_floor_);
  for (int i = 0; i < kMaxReplicas && run.replicas[i] != kNoNode; ++i) {
    if ((run.pending_mask >> i) & 1) continue;
    r.replicas.nodes[r.replicas.count++] = run.replicas[i];
  }
  return r;
}

bool KvMaster::Exists(NamespaceId ns, BlockKey key) const {
  // Locate takes a mutable namespace only to hand out a mutable run; nothing is written here.
  auto* n = const_cast<Namespace*>(LiveNamespace(ns));
  if (n == nullptr) return false;
  RunPos pos = Locate(*n, key);
  return pos.run != nullptr && pos.run->state == kComplete;
}

// The batches hide memory latency: a lookup is two dependent cache misses (the index slot,
// then the run record), each ~100 ns on a master of tens of millions of objects. Keys are
// taken through a pipeline: the index slot of key i + kIndexAhead is prefetched, the run of
// key i + kRunAhead located and prefetched, and key i answered from what is then in cache.
namespace {
constexpr size_t kIndexAhead = 16;
constexpr size_t kRunAhead = 8;
constexpr size_t kRing = 16;  // > kRunAhead: located runs wait here until answered
static_assert((kRing & (kRing - 1)) == 0 && kRing > kRunAhead && kIndexAhead > kRunAhead);
}  // namespace

template <typename Answer>
void KvMaster::Pipeline(Namespace& ns, std::span<const BlockKey> keys, Answer&& answer) const {
  RunPos ring[kRing];
  const size_t n = keys.size();
  auto prefetch_index = [&](size_t i) {
    if (const ObjectTable* t = ns.tables[ShardOfKey(keys[i])].get()) t->index.prefetch(keys[i]);
  };
  auto locate = [&](size_t i) {
    RunPos& p = ring[i & (kRing - 1)];
    p = Locate(ns, keys[i]);
    if (p.run != nullptr) __builtin_prefetch(p.run, 1);
  };
  for (size_t i = 0; i < std::min(n, kIndexAhead); ++i) prefetch_index(i);
  for (size_t i = 0; i < std::min(n, kRunAhead); ++i) locate(i);
  for (size_t i = 0; i < n; ++i) {
    if (i + kIndexAhead < n) prefetch_index(i + kIndexAhead);
    if (i + kRunAhead < n) locate(i + kRunAhead);
    answer(i, ring[i & (kRing - 1)]);
  }
}

absl::Status KvMaster::BatchGet(NamespaceId ns, std::span<const BlockKey> keys, Nanos now,
                                std::vector<GetResult>* out) {
  out->clear();
  Namespace* n = LiveNamespace(ns);
  if (n == nullptr) return NamespaceError(ns);
  out->resize(keys.size());
  Pipeline(*n, keys, [&](size_t i, const RunPos& pos) { (*out)[i] = Read(*n, pos, now); });
  return absl::OkStatus();
}

absl::Status KvMaster::BatchExists(NamespaceId ns, std::span<const BlockKey> keys,
                                   std::vector<uint8_t>* out) const {
  out->clear();
  // Locate hands out mutable runs; nothing is written here.
  auto* n = const_cast<Namespace*>(LiveNamespace(ns));
  if (n == nullptr) return NamespaceError(ns);
  out->resize(keys.size());
  Pipeline(*n, keys, [&](size_t i, const RunPos& pos) {
    (*out)[i] = pos.run != nullptr && pos.run->state == kComplete ? 1 : 0;
  });
  return absl::OkStatus();
}

// --- puts ---

absl::Status KvMaster::ValidatePut(Namespace& ns, NamespaceId id, const PutRequest& q) const {
  if (q.blocks == 0 || q.keys == nullptr) {
    return absl::InvalidArgumentError("PutStart: a put needs at least one block key");
  }
  if (q.blocks > internal::kMaxRunBlocks) {
    return absl::InvalidArgumentError(fmt::format(
        "PutStart: {} blocks in one put exceed the maximum {}", q.blocks, internal::kMaxRunBlocks));
  }
  if (q.size == 0) return absl::InvalidArgumentError("PutStart: size must be > 0 bytes");
  if (q.avoid.size() > kMaxAvoidNodes) {
    return absl::InvalidArgumentError(fmt::format(
        "PutStart: {} nodes to avoid exceed the maximum {}", q.avoid.size(), kMaxAvoidNodes));
  }
  if (q.size > kMaxObjectBytes) {
    return absl::InvalidArgumentError(fmt::format(
        "PutStart: size {} bytes exceeds the maximum object size {} (4 GiB)", q.size,
        kMaxObjectBytes));
  }
  if (q.replicas < 1 || q.replicas > kMaxReplicas) {
    return absl::InvalidArgumentError(fmt::format(
        "PutStart: replica target {} is outside [1, {}]", q.replicas, kMaxReplicas));
  }
  const BlockKey last = q.keys[q.blocks - 1];
  if (RunPos pos = Locate(ns, last); pos.run != nullptr) {
    if (pos.offset + 1 == pos.run->blocks) {
      return absl::AlreadyExistsError(fmt::format(
          "PutStart: object {:016x} already exists in namespace '{}' (id {}, {})", last, ns.name,
          id, pos.run->state == kPending ? "its put is pending" : "complete"));
    }
  }
  absl::flat_hash_set<BlockKey> seen;
  if (q.blocks > 1) seen.reserve(q.blocks);
  for (uint32_t i = 0; i < q.blocks; ++i) {
    if (q.blocks > 1 && !seen.insert(q.keys[i]).second) {
      return absl::InvalidArgumentError(fmt::format(
          "PutStart: block key {:016x} appears twice in the put (again at block {})", q.keys[i],
          i));
    }
    if (RunPos pos = Locate(ns, q.keys[i]); pos.run != nullptr) {
      return absl::AlreadyExistsError(fmt::format(
          "PutStart: block {} of the put (key {:016x}) is already stored in namespace '{}' as "
          "block {} of object {:016x}: put only the missing blocks",
          i, q.keys[i], ns.name, pos.offset, pos.run->last_key));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ReplicaList> KvMaster::PutStart(NamespaceId ns, const PutRequest& request,
                                               Nanos now) {
  Namespace* n = LiveNamespace(ns);
  if (n == nullptr) return NamespaceError(ns);
  if (absl::Status st = ValidatePut(*n, ns, request); !st.ok()) return st;
  std::vector<NodeId> placed;
  if (absl::Status st = nodes_.Place(request.size, request.replicas, {}, now, options_, rng_,
                                     &placed, request.avoid);
      !st.ok()) {
    return absl::ResourceExhaustedError(fmt::format("PutStart of object {:016x}: {}",
                                                    request.keys[request.blocks - 1],
                                                    std::string(st.message())));
  }
  DoPutStart(ns, std::span<const BlockKey>(request.keys, request.blocks), request.size,
             request.replicas, request.pinned, now + options_.put_timeout, placed,
             request.checksum);
  ReplicaList out;
  for (NodeId id : placed) out.nodes[out.count++] = id;
  return out;
}

void KvMaster::DoPutStart(NamespaceId id, std::span<const BlockKey> keys, uint64_t size,
                          int target, bool pinned, Nanos deadline,
                          std::span<const NodeId> replicas, uint64_t checksum) {
  Namespace& ns = *namespaces_[id];
  const auto blocks = static_cast<uint32_t>(keys.size());
  const BlockKey last = keys.back();
  const uint32_t shard = ShardOfKey(last);
  ObjectTable& table = ns.Table(shard);
  const uint32_t slot = table.Allocate();
  Run& run = table.runs[slot];
  if (blocks > 1) {
    run.keys.reset(new BlockKey[blocks - 1]);
    std::copy(keys.begin(), keys.end() - 1, run.keys.get());
    table.key_bytes += internal::KeyArrayBytes(blocks);
  }
  run.last_key = last;
  run.size = size;
  run.checksum = checksum;
  run.deadline = deadline;
  run.blocks = blocks;
  run.state = kPending;
  run.target = static_cast<uint8_t>(target);
  run.flags = pinned ? kPinned : 0;
  run.pending_mask = 0;
  for (size_t r = 0; r < replicas.size() && r < kMaxReplicas; ++r) {
    run.replicas[r] = replicas[r];
    ChargeReplica(ns, replicas[r], static_cast<int64_t>(size));
  }
  for (uint32_t i = 0; i < blocks; ++i) {
    ns.Table(ShardOfKey(keys[i])).index[keys[i]] = internal::MakeRef(shard, slot, i);
  }
  ns.objects++;
  ns.blocks += blocks;
  objects_++;
  blocks_ += blocks;
  pending_objects_++;
  pending_.push_back({deadline, id, last});
  if (!Logging()) return;
  WritePutStart(log_, id, run);
}

void KvMaster::ChargeReplica(Namespace& ns, NodeId node, int64_t bytes) {
  nodes_.AddUsed(node, bytes);
  uint64_t& b = ns.node_bytes[node];
  b = static_cast<uint64_t>(static_cast<int64_t>(b) + bytes);
  if (b == 0) ns.node_bytes.erase(node);
}

absl::Status KvMaster::PutEnd(NamespaceId ns, BlockKey object, uint64_t size) {
  Namespace* n = LiveNamespace(ns);
  if (n == nullptr) return NamespaceError(ns);
  absl::StatusOr<RunPos> pos = LocateObject(*n, ns, object);
  if (!pos.ok()) return pos.status();
  // A PutEnd sent again (its answer lost in a failover) finds its own work done.
  if (pos->run->state == kComplete && size != 0 && pos->run->size == size) return absl::OkStatus();
  if (pos->run->state != kPending) {
    return absl::FailedPreconditionError(
        fmt::format("PutEnd: object {:016x} is already complete", object));
  }
  DoPutEnd(ns, *pos);
  return absl::OkStatus();
}

void KvMaster::DoPutEnd(NamespaceId id, const RunPos& pos) {
  Run& run = *pos.run;
  run.state = kComplete;
  run.deadline = 0;
  run.flags |= kReferenced;  // a fresh object gets one CLOCK round before it can be evicted
  pending_objects_--;
  if (!Logging()) return;
  log_.Type(LogType::kPutEnd);
  log_.U64(id);
  log_.Key(run.last_key);
  log_.EndRecord();
}

absl::Status KvMaster::PutRevoke(NamespaceId ns, BlockKey object) {
  Namespace* n = LiveNamespace(ns);
  if (n == nullptr) return NamespaceError(ns);
  absl::StatusOr<RunPos> pos = LocateObject(*n, ns, object);
  if (!pos.ok()) return pos.status();
  if (pos->run->state != kPending) {
    return absl::FailedPreconditionError(fmt::format(
        "PutRevoke: object {:016x} is complete; Remove it instead", object));
  }
  DoRemove(ns, *pos, RemoveReason::kRevoked);
  return absl::OkStatus();
}

absl::Status KvMaster::Remove(NamespaceId ns, BlockKey object, Nanos now) {
  Namespace* n = LiveNamespace(ns);
  if (n == nullptr) return NamespaceError(ns);
  absl::StatusOr<RunPos> pos = LocateObject(*n, ns, object);
  if (!pos.ok()) return pos.status();
  const Run& run = *pos->run;
  if (run.state == kPending) {
    return absl::FailedPreconditionError(fmt::format(
        "Remove: object {:016x}'s put is pending; PutRevoke it or wait for PutEnd", object));
  }
  if (Leased(run, now)) {
    return absl::FailedPreconditionError(fmt::format(
        "Remove: object {:016x} is leased to a reader for another {}", object,
        FormatDuration(std::max(run.deadline, lease_floor_) - now)));
  }
  DoRemove(ns, *pos, RemoveReason::kRemoved);
  return absl::OkStatus();
}

void KvMaster::DoRemove(NamespaceId id, const RunPos& pos, RemoveReason reason) {
  Namespace& ns = *namespaces_[id];
  Run& run = *pos.run;
  const BlockKey last = run.last_key;
  for (int r = 0; r < kMaxReplicas && run.replicas[r] != kNoNode; ++r) {
    ChargeReplica(ns, run.replicas[r], -static_cast<int64_t>(run.size));
    if ((run.pending_mask >> r) & 1) repairs_in_flight_ -= repairs_in_flight_ > 0 ? 1 : 0;
  }
  for (uint32_t i = 0; i < run.blocks; ++i) {
    const BlockKey k = run.KeyAt(i);
    ns.tables[ShardOfKey(k)]->index.erase(k);
  }
  ObjectTable& table = *ns.tables[pos.shard];
  table.key_bytes -= internal::KeyArrayBytes(run.blocks);
  ns.objects--;
  ns.blocks -= run.blocks;
  objects_--;
  blocks_ -= run.blocks;
  if (run.state == kPending) pending_objects_--;
  if (reason == RemoveReason::kEvicted) objects_evicted_++;
  table.Free(pos.slot);
  if (!Logging()) return;
  log_.Type(LogType::kRemove);
  log_.U64(id);
  log_.Key(last);
  log_.U64(static_cast<uint64_t>(reason));
  log_.EndRecord();
}

absl::Status KvMaster::Pin(NamespaceId ns, BlockKey object, bool pinned) {
  Namespace* n = LiveNamespace(ns);
  if (n == nullptr) return NamespaceError(ns);
  absl::StatusOr<RunPos> pos = LocateObject(*n, ns, object);
  if (!pos.ok()) return pos.status();
  DoPin(ns, *pos, pinned);
  return absl::OkStatus();
}

void KvMaster::DoPin(NamespaceId id, const RunPos& pos, bool pinned) {
  Run& run = *pos.run;
  run.flags = static_cast<uint8_t>(pinned ? (run.flags | kPinned) : (run.flags & ~kPinned));
  if (!Logging()) return;
  log_.Type(LogType::kPin);
  log_.U64(id);
  log_.Key(run.last_key);
  log_.U64(pinned ? 1 : 0);
  log_.EndRecord();
}

// --- batches ---

absl::Status KvMaster::BatchPutStart(NamespaceId ns, std::span<const PutRequest> requests,
                                     Nanos now, std::vector<absl::StatusOr<ReplicaList>>* out) {
  out->clear();
  if (LiveNamespace(ns) == nullptr) return NamespaceError(ns);
  out->reserve(requests.size());
  for (const PutRequest& q : requests) out->push_back(PutStart(ns, q, now));
  return absl::OkStatus();
}

absl::Status KvMaster::BatchPutEnd(NamespaceId ns, std::span<const BlockKey> objects,
                                   std::vector<absl::Status>* out,
                                   std::span<const uint64_t> sizes) {
  out->clear();
  if (LiveNamespace(ns) == nullptr) return NamespaceError(ns);
  if (!sizes.empty() && sizes.size() != objects.size()) {
    return absl::InvalidArgumentError(fmt::format(
        "BatchPutEnd: {} sizes for {} objects; give one per object or none", sizes.size(),
        objects.size()));
  }
  out->reserve(objects.size());
  for (size_t i = 0; i < objects.size(); ++i) {
    out->push_back(PutEnd(ns, objects[i], sizes.empty() ? 0 : sizes[i]));
  }
  return absl::OkStatus();
}

absl::Status KvMaster::BatchRemove(NamespaceId ns, std::span<const BlockKey> objects, Nanos now,
                                   std::vector<absl::Status>* out) {
  out->clear();
  if (LiveNamespace(ns) == nullptr) return NamespaceError(ns);
  out->reserve(objects.size());
  for (BlockKey k : objects) out->push_back(Remove(ns, k, now));
  return absl::OkStatus();
}

}  // namespace myriad::kvstore
