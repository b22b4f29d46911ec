#pragma once
// Vocabulary of the KV cache store's metadata core (the master): ids, options and the results
// its API hands out. See kvstore_core/master.h for the model and the contract.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "core/block_hash.h"
#include "core/time.h"

namespace myriad::kvstore {

// Storage nodes are named by the caller (the server assigns ids at registration).
using NodeId = uint32_t;
// Namespaces (model version + KV format) get dense ids, never reused, from CreateNamespace.
using NamespaceId = uint32_t;

inline constexpr NodeId kNoNode = UINT32_MAX;
// Replicas live inline in the object's record: a fixed bound keeps the record small and its
// size known (memory budget), and more than four copies of a KV block is never worth the bytes.
inline constexpr int kMaxReplicas = 4;
inline constexpr int kShardCount = 1024;
// Bounds on sizes that arrive from the network or the command line (docs/kvstore.md, "Security
// and bounds"). With them no sum of sizes the master keeps can wrap: a node's used bytes stay
// below 2^51 and the cluster's capacity is summed with an overflow check.
inline constexpr uint64_t kMaxNodeCapacityBytes = uint64_t{1} << 50;  // 1 PiB per node
inline constexpr uint64_t kMaxObjectBytes = uint64_t{1} << 32;        // 4 GiB per object
// Keys per request of the master's API, and puts per batched put (the HTTP body limit bounds
// them too).
inline constexpr size_t kMaxBatchKeys = size_t{1} << 16;
inline constexpr size_t kMaxBatchPuts = 4096;
// A namespace's name: 1 to this many bytes of printable ASCII without spaces (0x21-0x7e), so it
// travels unchanged in a URL path segment (percent-encoded), a log line and a metric label.
inline constexpr size_t kMaxNamespaceNameBytes = 255;

struct KvMasterOptions {
  // A Get keeps the object from eviction and removal for this long (Mooncake's default).
  Nanos lease_ttl = 10 * kSecond;
  // A node whose last heartbeat is older than this is declared dead by Tick.
  Nanos dead_after = 10 * kSecond;
  // A put left pending this long (writer crashed between PutStart and PutEnd) is revoked.
  Nanos put_timeout = 60 * kSecond;
  // Eviction starts when a node (or the cluster) is at or above `high_watermark` of its
  // capacity and stops once it is below `low_watermark`.
  double high_watermark = 0.90;
  double low_watermark = 0.80;
  // Object slots the eviction hands may visit per Tick: bounds the time one Tick takes.
  uint64_t eviction_budget = 1 << 16;
  // A node that joins takes new writes in proportion to min(1, age / ramp) (but at least
  // `ramp_floor`), so a fresh empty node is not handed every write of the cluster at once.
  Nanos ramp = 5 * kMinute;
  double ramp_floor = 0.05;
  // Repair traffic cap: a token bucket of this rate and burst, in bytes.
  double repair_bytes_per_second = 1e9;
  uint64_t repair_burst_bytes = uint64_t{256} << 20;
  uint64_t seed = 1;
};

// Complete (readable) replicas of an object, in placement order.
struct ReplicaList {
  std::array<NodeId, kMaxReplicas> nodes{kNoNode, kNoNode, kNoNode, kNoNode};
  uint8_t count = 0;
};

// One object as a lookup sees it: the run that holds the looked-up block.
struct GetResult {
  // kOk, kNotFound (no such block in the namespace) or kUnavailable (its put is still
  // pending). A code, not an absl::Status: misses are the common case of prefix probing and a
  // Status with a message would allocate on each.
  absl::StatusCode code = absl::StatusCode::kNotFound;
  BlockKey object = 0;     // the run's name: its last block key
  uint32_t block = 0;      // position of the looked-up block in the run
  uint32_t blocks = 0;     // blocks in the run
  uint64_t size = 0;       // bytes of the whole run, per replica
  Nanos lease_until = 0;   // not evicted nor removed before this
  uint64_t checksum = 0;   // the writer's XXH3-64 of the bytes (ObjectChecksum); 0: none
  ReplicaList replicas;
};

struct PutRequest {
  // Consecutive blocks of one chain, in chain order; the last key names the object. The
  // span must stay valid for the duration of the call.
  const BlockKey* keys = nullptr;
  uint32_t blocks = 0;
  uint64_t size = 0;  // bytes of the whole run, per replica
  int replicas = 1;
  bool pinned = false;
  // Nodes not to place on (a writer retrying after these failed it); at most kMaxAvoidNodes.
  std::span<const NodeId> avoid = {};
  // The writer's ObjectChecksum of the bytes, handed to readers and repairs; 0: none given.
  uint64_t checksum = 0;
};
inline constexpr size_t kMaxAvoidNodes = 64;

// Copy one replica of `object` from `source` to `destination` (a fault domain the object has
// no replica in), then report RepairDone or RepairFailed.
struct RepairTask {
  NamespaceId ns = 0;
  BlockKey object = 0;
  uint64_t bytes = 0;
  NodeId source = kNoNode;
  NodeId destination = kNoNode;
  uint64_t checksum = 0;  // the object's (0: none); the source refuses to push other bytes
};

// An object a storage node holds, as the node names it: reconciliation (KvMaster::HeldBy).
struct HeldObject {
  NamespaceId ns = 0;
  BlockKey object = 0;
};

struct TickReport {
  int nodes_declared_dead = 0;
  uint64_t objects_evicted = 0;
  uint64_t puts_expired = 0;
  uint64_t namespaces_reclaimed = 0;
};

struct KvMasterStats {
  uint64_t objects = 0;          // runs, pending included
  uint64_t blocks = 0;           // blocks in those runs
  uint64_t pending = 0;
  uint64_t objects_lost = 0;     // removed because their last replica was lost
  uint64_t objects_evicted = 0;
  uint64_t repair_queue = 0;     // entries, stale ones included
  uint64_t repairs_in_flight = 0;
  uint64_t repair_bytes_issued = 0;
};

// The master-internal shard of a block key.
inline uint32_t ShardOfKey(BlockKey key) {
  // Chain keys are XXH3 output, already uniform; one multiply decorrelates the shard bits
  // from the bits the hash tables inside a shard use.
  return static_cast<uint32_t>((key * 0x9e3779b97f4a7c15ULL) >> 54);
}
static_assert(kShardCount == 1024, "ShardOfKey takes the top 10 bits");

}  // namespace myriad::kvstore
