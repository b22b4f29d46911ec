#pragma once
// NodeStore: the bytes a storage node holds, in preallocated segments (kvstore/segment_arena.h),
// keyed by (namespace id, object key). Writers reserve room, fill it outside the lock (straight
// from the socket) and commit; readers pin an object, send from it outside the lock and unpin.
// A delete or a newer version of a pinned object frees the old bytes at the last unpin, so a
// read in flight never sees its memory reused. Thread-safe (one mutex; the bytes are copied
// outside it).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/block_hash.h"
#include "kvstore/segment_arena.h"
#include "kvstore_core/types.h"

namespace myriad::kvstore {

struct ObjectName {
  NamespaceId ns = 0;
  BlockKey key = 0;
  bool operator==(const ObjectName&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const ObjectName& o) {
    return H::combine(std::move(h), o.ns, o.key);
  }
};

// Bytes reserved for a write, or an object pinned for a read.
struct Extent {
  uint32_t slot = UINT32_MAX;
  std::byte* data = nullptr;
  uint64_t size = 0;
  uint32_t segment = 0;  // where the bytes are: segment index and payload offset in it
  uint64_t offset = 0;
};

// A segment as the shared-memory path hands it out: its memfd (owned by the store; -1 when
// the segment is not shareable) and its size.
struct SegmentInfo {
  int fd = -1;
  uint64_t bytes = 0;
};

struct NodeStoreStats {
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;      // object bytes held (complete objects and writes in progress)
  uint64_t arena_bytes = 0;     // segment bytes in use, tags and alignment included
  uint64_t objects = 0;         // complete, visible objects
  uint64_t segments = 0;
  uint64_t allocation_failures = 0;
};

class NodeStore {
 public:
  // ceil(capacity / segment_bytes) segments of segment_bytes (the last one smaller).
  // `shareable`: segments that a ShmServer can hand to local clients (a memfd each, one open
  // descriptor per segment); otherwise plain anonymous memory.
  NodeStore(uint64_t capacity_bytes, uint64_t segment_bytes, bool shareable = false);

  // Room for `size` bytes of `name`; invisible until Commit. ResourceExhausted when no segment
  // has a large enough free block; InvalidArgument when `size` exceeds a segment.
  absl::StatusOr<Extent> Reserve(ObjectName name, uint64_t size);
  // Makes a reserved write visible, replacing an older version of the same object.
  void Commit(Extent write);
  // Gives back a reservation whose write failed.
  void Abort(Extent write);

  // The complete object, pinned until Unpin; nullopt when absent.
  std::optional<Extent> Pin(ObjectName name);
  void Unpin(Extent read);

  bool Delete(ObjectName name);
  // Frees every object of the namespace; how many.
  uint64_t DropNamespace(NamespaceId ns);

  // Reconciliation: up to `max` visible objects from slot `cursor` on, with their generations;
  // returns the cursor to continue from (0 once the slab has been walked through).
  uint32_t List(uint32_t cursor, size_t max, std::vector<HeldObject>* objects,
                std::vector<uint64_t>* generations);
  // Deletes the object unless it was rewritten since `generation` was listed.
  bool DeleteIfGeneration(ObjectName name, uint64_t generation);

  NodeStoreStats stats();
  // Fixed for the store's lifetime.
  std::vector<SegmentInfo> Segments() const;

 private:
  struct Entry {
    ObjectName name;
    uint64_t offset = 0;
    uint64_t size = 0;
    uint64_t generation = 0;
    uint32_t segment = 0;
    uint32_t pins = 0;
    uint8_t state = 0;  // kSlotFree, kWriting, kVisible, kDoomed (freed at the last unpin)
  };
  enum : uint8_t { kSlotFree, kWriting, kVisible, kDoomed };

  // Unmaps and frees `slot` now or, if pinned, at its last unpin. Needs mu_.
  void Retire(uint32_t slot);
  void Release(uint32_t slot);

  std::mutex mu_;
  std::vector<std::unique_ptr<SegmentArena>> segments_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> free_slots_;
  absl::flat_hash_map<ObjectName, uint32_t> index_;
  uint32_t next_segment_ = 0;
  uint64_t generation_ = 0;
  uint64_t capacity_ = 0;
  uint64_t used_ = 0;
  uint64_t allocation_failures_ = 0;
};

}  // namespace myriad::kvstore
