#pragma once
// DataClient: a blocking client of one storage node's data path (kvstore/data_wire.h), for the
// store client, the repair agent, tools and tests. One kept-alive connection, reconnected after
// a failure; every call is bounded by the timeout (connect included). Payloads go from the
// caller's buffer to the socket and from the socket into the caller's strings (scatter/gather),
// with no copy in between. Not thread-safe: one client per thread.
//
// Same host: when the node advertises a shared-memory socket (kShmInfo, asked once before the
// first put or get) that this host reaches and that answers with the node's token, puts and
// gets go through it instead (kvstore/shm_client.h): the client copies straight between the
// caller's buffers and the node's segments, no socket in the data's way. Any failure of that
// channel sends the call over TCP, and the socket is tried again after shm_retry (doubling
// with each failed try, up to 64 x: a node on another host is not asked every shm_retry).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/time.h"
#include "kvstore/node_store.h"
#include "kvstore/shm_io.h"

namespace myriad::kvstore {

struct DataClientOptions {
  Nanos timeout = 10 * kSecond;  // per call
  // Replies above this are refused before anything is allocated for them.
  uint64_t max_reply_bytes = uint64_t{4} << 30;
  // Use the node's same-host shared-memory path when it offers one.
  bool shared_memory = true;
  Nanos shm_retry = 5 * kSecond;
  // How long a wait for the node's shared-memory answer polls before it sleeps: faster
  // answers for up to this much of a core per wait (kvstore/shm_io.h); 0 sleeps at once.
  Nanos shm_spin = shm::kDefaultSpin;
  // The cluster's shared secret (kvstore/auth.h), presented on each new connection (TCP and
  // shared memory); empty: none.
  std::string auth_token = {};
};

class DataClient {
 public:
  // "host:port" of the node's data path.
  explicit DataClient(std::string address, DataClientOptions options = {});
  ~DataClient();
  DataClient(const DataClient&) = delete;
  DataClient& operator=(const DataClient&) = delete;

  absl::Status Put(ObjectName name, std::string_view bytes);
  // Puts every (names[i], values[i]) on the one connection, pipelined: each frame is sent
  // without waiting for the previous put's reply, and the replies are read as they come, so
  // the socket stays busy as a stream does. One status per object in *statuses (the node's
  // refusal, e.g. no room, is that object's); the returned status is the call's (unreachable,
  // timeout, connection lost: the objects not acknowledged carry it too). The timeout bounds
  // the whole call. Over shared memory: one put after another.
  absl::Status PutMany(std::span<const ObjectName> names, std::span<const std::string_view> values,
                       std::vector<absl::Status>* statuses);
  // One code per name: kOk with the bytes in (*values)[i], or kNotFound. The returned status
  // is the call's (node unreachable, timeout, bad reply).
  absl::Status Get(std::span<const ObjectName> names, std::vector<std::string>* values,
                   std::vector<absl::StatusCode>* codes);
  // One flag per name: deleted (false: the node did not hold it).
  absl::StatusOr<std::vector<bool>> Delete(std::span<const ObjectName> names);
  // Objects freed.
  absl::StatusOr<uint64_t> DropNamespace(NamespaceId ns);
  // Makes this node push its copy of `name` to the node at `destination` ("host:port").
  // `checksum` (nonzero): the object's ObjectChecksum; a node whose bytes differ refuses with
  // DataLoss and pushes nothing.
  absl::Status CopyTo(ObjectName name, std::string_view destination, uint64_t checksum = 0);
  // The node's statistics (JSON text).
  absl::StatusOr<std::string> Stats();

  const std::string& address() const;
  // Whether puts and gets go through shared memory now (asks the node once).
  bool UsesSharedMemory();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace myriad::kvstore
