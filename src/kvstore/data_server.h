#pragma once
// DataServer: a storage node's binary TCP data path (kvstore/data_wire.h) over Boost.Asio:
// PUT reads the payload straight into the node's segment, GET answers a batch with one gathered
// write from the pinned objects, DELETE, DROP_NAMESPACE, COPY_TO (push an object to another
// node, for repairs) and STATS. Every header field is validated before anything is reserved;
// a bad header gets an error frame and the connection is closed (the stream position is
// lost), a bad body of a known op gets an error reply. A peer that stalls mid-frame is cut off
// after frame_timeout, an idle one after idle_timeout. Asio stays inside the .cc.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "core/time.h"
#include "kvstore/node_store.h"

namespace myriad::kvstore {

struct DataServerOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;  // 0: ephemeral, see port()
  int threads = 2;
  // The largest frame body accepted: a put of this minus 24 bytes is the largest object.
  uint64_t max_body_bytes = (uint64_t{256} << 20) + 64;
  // Objects per GET or DELETE.
  uint32_t max_batch = 4096;
  Nanos idle_timeout = 5 * kMinute;  // waiting for the next frame
  Nanos frame_timeout = 10 * kSecond;  // reading the rest of a frame, writing a reply
  Nanos copy_timeout = 30 * kSecond;   // a COPY_TO's push to the other node
  // At the cap, a new connection closes the connection idle the longest (one waiting for its
  // next frame), so idle peers cannot lock real clients out; only when every connection is
  // busy mid-frame is the new one refused.
  int max_connections = 1024;
  // SO_SNDBUF / SO_RCVBUF of each connection (0: the kernel's autotuning); capped by the
  // kernel's net.core.wmem_max / rmem_max.
  int socket_buffer_bytes = 4 << 20;
  // The cluster's shared secret (kvstore/auth.h): a connection must present it (an AUTH frame)
  // before any other request, and the node presents it when it pushes a COPY_TO. Empty: open.
  std::string auth_token = {};
};

struct DataServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;
  uint64_t connections_shed = 0;  // idle connections closed to admit a new one at the cap
  uint64_t puts = 0, gets = 0, get_objects = 0, get_misses = 0, deletes = 0, copies = 0;
  uint64_t bytes_in = 0;   // payload bytes written into the store
  uint64_t bytes_out = 0;  // payload bytes sent (GET, COPY_TO)
  uint64_t bad_frames = 0;  // invalid headers or bodies
  uint64_t errors = 0;      // error replies of any kind
  uint64_t timeouts = 0;    // connections cut for a stall
  uint64_t truncated = 0;   // peers gone mid-frame
  uint64_t copy_failures = 0;
  uint64_t unauthenticated = 0;  // connections refused for a missing or wrong secret
};

class DataServer {
 public:
  DataServer(NodeStore* store, DataServerOptions options);
  ~DataServer();
  DataServer(const DataServer&) = delete;
  DataServer& operator=(const DataServer&) = delete;

  absl::Status Start();
  void Stop();  // idempotent
  uint16_t port() const;
  DataServerStats stats() const;
  int connections() const;
  // Called (outside locks, on an I/O thread) when a put found no room: the node then asks the
  // master which of its objects it may free (kvstore/storage_node.h).
  void set_on_no_room(std::function<void()> f);
  // Whether a COPY_TO may push to `address` (called on an I/O thread, before connecting; it
  // must not block). A refused destination gets PermissionDenied, so a node cannot be made to
  // connect to any host:port. Unset: every destination is allowed. Before Start.
  void set_copy_destinations(std::function<bool(std::string_view address)> allowed);
  // The same-host shared-memory socket (kvstore/shm_server.h) that kShmInfo advertises, and the
  // token a client's hello must carry. Before Start.
  void set_shm_socket(std::string path, uint64_t token);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace myriad::kvstore
