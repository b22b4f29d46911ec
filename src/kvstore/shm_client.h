#pragma once
// ShmChannel: the client end of a storage node's same-host data path (kvstore/shm_server.h,
// kvstore/shm_wire.h). Connect says hello, receives the node's segment memfds and maps them;
// Get and Put then copy the bytes straight between the caller's buffers and the node's
// segments: one round trip and one memcpy per GET batch (plus a release message), two round
// trips and one memcpy per PUT. DataClient uses it on its own when the node advertises a socket
// this host can reach (kvstore/data_client.h); the lower-level calls (Pin, Release, Reserve, End)
// are for tests and tools. Not thread-safe.
//
// Errors: a node's answer about an object (NotFound, ResourceExhausted, InvalidArgument) comes
// back with the channel still usable; a failure of the channel itself (socket, protocol, a bad
// reply, a timeout) marks it broken() and the caller opens a new one or uses TCP.
//
// A node that goes away while the channel is idle: a thread of the process (one for all
// channels) sees its socket hang up and breaks the channel at once, unmapping the segments, so
// an idle client does not keep a dead node's memory alive (a memfd's pages live while anything
// maps them; a restarted node would allocate its memory again beside them). The methods take a
// lock for that; a location's bytes (At) are valid until the channel breaks.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/time.h"
#include "kvstore/node_store.h"
#include "kvstore/shm_io.h"
#include "kvstore/shm_wire.h"

namespace myriad::kvstore {

class ShmChannel {
 public:
  // `token` as the node's TCP path told it (DataClient asks with kShmInfo). NotFound when no
  // socket is at `path`; PermissionDenied when the socket is another node's; Unauthenticated
  // when the node wants the cluster's `auth_token` (kvstore/auth.h) and it is wrong. `spin`:
  // how long a wait for the node's answer polls before it sleeps (kvstore/shm_io.h).
  static absl::StatusOr<std::unique_ptr<ShmChannel>> Connect(const std::string& path,
                                                             uint64_t token, Nanos timeout,
                                                             Nanos spin = shm::kDefaultSpin,
                                                             std::string_view auth_token = {});
  ~ShmChannel();
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;

  // As DataClient::Put / Get.
  absl::Status Put(ObjectName name, std::string_view bytes);
  absl::Status Get(std::span<const ObjectName> names, std::vector<std::string>* values,
                   std::vector<absl::StatusCode>* codes);

  // One location per name (status kOk: pinned until Release of its handle or the channel's end).
  absl::StatusOr<std::vector<shm::Location>> Pin(std::span<const ObjectName> names);
  // No reply: a bad handle makes the node close the connection (the next call fails).
  absl::Status Release(std::span<const uint32_t> handles);
  // Room for sizes[i] bytes of names[i], invisible until End commits it.
  absl::StatusOr<std::vector<shm::Location>> Reserve(std::span<const ObjectName> names,
                                                     std::span<const uint64_t> sizes);
  // Commits or aborts reservations; one code per item.
  absl::StatusOr<std::vector<absl::StatusCode>> End(std::span<const shm::EndItem> items);
  // The bytes of a location from Pin or Reserve (checked against the mapping there).
  std::byte* At(const shm::Location& l) const { return maps_[l.segment].base + l.offset; }

  bool broken() const {
    std::lock_guard lock(mu_);
    return fd_ < 0;
  }
  size_t segments() const {
    std::lock_guard lock(mu_);
    return maps_.size();
  }

 private:
  friend class ShmHangupWatcher;
  struct Map {
    std::byte* base = nullptr;
    uint64_t bytes = 0;
  };
  ShmChannel(int fd, Nanos timeout, Nanos spin) : fd_(fd), timeout_(timeout), spin_(spin) {}
  absl::Status Hello(uint64_t token, std::string_view auth_token);
  // Sends a request with a CountHead and `items`, reads the reply's header and body into
  // reply_ (error replies become the status); breaks the channel on transport failures.
  absl::Status Call(shm::Op op, uint32_t count, const void* items, size_t item_bytes,
                    uint64_t max_reply);
  // Call of `op` with n items, whose reply is one location per item (GET, PUT_START).
  absl::StatusOr<std::vector<shm::Location>> CallForLocations(shm::Op op, const void* items, size_t n,
                                                              size_t item_bytes);
  absl::Status Broken(absl::Status st);
  // Closes the socket and unmaps the segments.
  void Close();
  // For the watcher: breaks the channel if its socket `fd` hung up. kBusy: a call holds the
  // channel (it will see the hangup itself, or the watcher asks again).
  enum class Reap { kReaped, kAlive, kBusy };
  Reap ReapIfHungUp(int fd);

  // Held by every public method (Get and Put call the others) and by the watcher.
  mutable std::recursive_mutex mu_;
  int fd_;
  Nanos timeout_;
  Nanos spin_;
  uint64_t next_id_ = 0;
  std::vector<Map> maps_;
  std::vector<uint8_t> reply_;
};

}  // namespace myriad::kvstore
