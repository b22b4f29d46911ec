#pragma once
// ShmServer: a storage node's same-host data path (kvstore/shm_wire.h). It listens on a Unix
// domain socket; a client on the same machine says hello with the node's token, receives the
// node's segment memfds and maps them, and from then on only locations cross the socket: a GET
// pins the objects and answers (segment, offset, size) per key, the client copies the bytes out
// of its own mapping and releases the pins; a PUT reserves room, the client copies the bytes in
// and commits (or aborts). A connection's pins and uncommitted reservations are given back when
// it ends, however it ends. One thread per connection (blocking I/O with deadlines): local
// clients are few and each call is a short exchange.
//
// Trust: a client maps every segment read-write, so it can read and corrupt any object (and the
// allocator's tags between them). The socket file is created mode 0600, so only the node's user
// (and root) can connect; run the node and its local clients as one user.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "core/time.h"
#include "kvstore/node_store.h"
#include "kvstore/shm_io.h"

namespace myriad::kvstore {

struct ShmServerOptions {
  std::string path;    // the Unix socket's path (at most 107 bytes)
  uint64_t token = 0;  // a client's hello must carry it (the TCP path's kShmInfo tells it)
  // The cluster's shared secret (kvstore/auth.h): a hello must carry it after the token.
  // Empty: the token alone.
  std::string auth_token = {};
  uint32_t max_batch = 4096;     // objects per GET / PUT_START / PUT_END / RELEASE
  uint32_t max_handles = 65536;  // pins and reservations one connection may hold at once
  // A connection idle this long between frames is closed (its pins and reservations given back).
  Nanos idle_timeout = 5 * kMinute;
  Nanos frame_timeout = 10 * kSecond;  // the rest of a frame, a reply's send
  int max_connections = 256;
  // How long a connection's thread polls for the next frame or for room before it sleeps
  // (kvstore/shm_io.h): faster answers for up to this much of a core per wait; 0 sleeps at once.
  Nanos spin = shm::kDefaultSpin;
};

struct ShmServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;
  uint64_t hellos = 0;
  uint64_t gets = 0, get_objects = 0, get_misses = 0;
  uint64_t puts = 0;              // objects committed
  uint64_t aborts = 0;            // reservations given back (by the client or at its end)
  uint64_t released_at_close = 0;  // pins given back because the connection ended
  uint64_t bytes_in = 0;          // committed payload bytes
  uint64_t bytes_out = 0;         // payload bytes handed out to GETs
  uint64_t bad_frames = 0;
  uint64_t errors = 0;
  uint64_t timeouts = 0;
  uint64_t held = 0;  // pins and reservations held now, all connections
};

class ShmServer {
 public:
  ShmServer(NodeStore* store, ShmServerOptions options);
  ~ShmServer();
  ShmServer(const ShmServer&) = delete;
  ShmServer& operator=(const ShmServer&) = delete;

  // Creates the socket (a stale socket file left by a dead node is replaced; a live one, or a
  // file that is not a socket, is an error). FailedPrecondition when the store's segments are
  // not shareable (memfd_create refused).
  absl::Status Start();
  // Closes every connection (their pins and reservations are given back), removes the socket.
  void Stop();  // idempotent
  const std::string& path() const;
  uint64_t token() const;
  ShmServerStats stats() const;
  int connections() const;
  // Called when a reservation found no room (as DataServer::set_on_no_room).
  void set_on_no_room(std::function<void()> f);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace myriad::kvstore
