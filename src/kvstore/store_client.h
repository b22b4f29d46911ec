#pragma once
// StoreClient: the KV store's data calls for an engine's connector or a tool. The master places
// and finds objects (kvstore/master_client.h); the bytes go straight between this client and the
// storage nodes (kvstore/data_client.h), never through the master.
//   Put: PutStart (replicas on distinct fault domains) -> write every replica (objects of
//        256 KiB and more to all replicas at once) -> PutEnd; a failed write revokes the put
//        (and deletes the replicas already written).
//   BatchPut: one PlacePutBatch for the whole batch -> per node, every replica it holds written
//        pipelined on its connection (PutMany; the nodes at once for large batches) -> one
//        PutEndBatch for the objects fully written; an object whose write failed is revoked and
//        put again on its own (Put's retries, avoiding the nodes that failed it).
//   Get: the master's replica list (and a read lease) -> read from the first replica, falling
//        back to the next on failure. Batched forms send one request per node (the nodes at once
//        when 256 KiB or more are read).
// Checksums: Put hands the master the bytes' ObjectChecksum (kvstore/checksum.h); Get checks
// what it read against it and treats a mismatch (bytes changed on that node) as a failed read,
// so it returns another replica's bytes, or DataLoss when no replica's bytes match.
// Not thread-safe: one client per thread.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/block_hash.h"
#include "core/time.h"
#include "kvstore/data_client.h"
#include "kvstore/master_client.h"

namespace myriad::kvstore {

struct StoreClientOptions {
  Nanos master_timeout = 10 * kSecond;
  Nanos node_timeout = 10 * kSecond;
  // Same-host nodes through their shared-memory path when they offer one (kvstore/data_client.h).
  bool shared_memory = true;
  Nanos shm_spin = shm::kDefaultSpin;  // DataClientOptions::shm_spin
  // The cluster's shared secret (kvstore/auth.h), for the master and every node.
  std::string auth_token = {};
};

struct StoreClientStats {
  uint64_t puts = 0, gets = 0;
  uint64_t fallbacks = 0;     // reads served by a later replica after an earlier one failed
  uint64_t revoked = 0;       // puts revoked after a failed replica write
  uint64_t put_retries = 0;   // puts placed again, avoiding the nodes that failed them
  uint64_t checksum_mismatches = 0;  // replicas read whose bytes did not match the checksum
};

// One object of a batched put: a run of blocks (chain order) and its bytes.
struct PutItem {
  std::span<const BlockKey> keys;
  std::string_view bytes;
};

class StoreClient {
 public:
  static absl::StatusOr<std::unique_ptr<StoreClient>> Connect(std::string_view master_url,
                                                              StoreClientOptions options = {});

  // A put whose replica write fails is revoked and placed again without the nodes that
  // failed it, up to kPutAttempts times in all.
  static constexpr int kPutAttempts = 3;
  absl::Status Put(std::string_view ns, std::span<const BlockKey> keys, std::string_view bytes,
                   int replicas = 1, bool pinned = false);
  // One status per item, in order. Batches above kMaxBatchPuts items (or kMaxBatchKeys keys)
  // go as several.
  std::vector<absl::Status> BatchPut(std::string_view ns, std::span<const PutItem> items,
                                     int replicas = 1);
  std::vector<absl::Status> BatchPut(std::string_view ns, std::span<const PutItem> items,
                                     int replicas, bool pinned);
  // The bytes of the object (the whole run) holding `key`. NotFound when the master knows no
  // such key; DataLoss when every replica's bytes differ from the object's checksum;
  // Unavailable when no replica could be read otherwise (each failure in the message).
  absl::StatusOr<std::string> Get(std::string_view ns, BlockKey key);
  // One status per key; values[i] holds the bytes when statuses[i] is OK. The returned status
  // is the master call's.
  absl::Status BatchGet(std::string_view ns, std::span<const BlockKey> keys,
                        std::vector<std::string>* values, std::vector<absl::Status>* statuses);

  MasterClient& master() { return *master_; }
  const StoreClientStats& stats() const { return stats_; }

 private:
  // One attempt of Put: place (avoiding `avoid`), write every replica, end or revoke. The
  // nodes whose write failed are added to *failed_nodes.
  absl::Status PutOnce(std::string_view ns, std::span<const BlockKey> keys, std::string_view bytes,
                       uint64_t checksum, int replicas, bool pinned,
                       std::span<const NodeId> avoid, std::vector<NodeId>* failed_nodes);
  // Put's attempts, the first avoiding `avoid` already.
  absl::Status PutAvoiding(std::string_view ns, std::span<const BlockKey> keys,
                           std::string_view bytes, uint64_t checksum, int replicas, bool pinned,
                           std::vector<NodeId> avoid);
  // One BatchPut call to the master (items within its bounds), results into `out`.
  void BatchPutOnce(std::string_view ns, std::span<const PutItem> items, int replicas,
                    bool pinned, std::span<absl::Status> out);
  StoreClient(std::unique_ptr<MasterClient> master, StoreClientOptions options)
      : master_(std::move(master)), options_(options) {}
  DataClient& Node(const std::string& address);

  std::unique_ptr<MasterClient> master_;
  StoreClientOptions options_;
  absl::flat_hash_map<std::string, std::unique_ptr<DataClient>> nodes_;
  StoreClientStats stats_;
};

}  // namespace myriad::kvstore
