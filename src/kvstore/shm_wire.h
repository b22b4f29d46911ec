#pragma once
// The same-host shared-memory data path's control messages (docs/kvstore.md, "Shared-memory
// data path"): frames on a Unix domain socket with the TCP path's 24-byte header
// (kvstore/data_wire.h: magic, version, op, status, request_id, body_bytes), ops of their own.
// Only locations and handles cross the socket; the bytes are copied by the client straight
// between its buffers and the node's segments, which it maps from memfds passed at the hello.
//
//   kHello: body: u64 token (from the TCP path's kShmInfo reply: proves the socket belongs to
//     the node the client asked), then the cluster's shared secret when the node has one
//     (kvstore/auth.h; at most 256 bytes). Reply: CountHead, count x u64 segment bytes, and the count
//     segment fds attached (SCM_RIGHTS) to the reply's header.
//   kGet: body: CountHead, count x ObjectRef. Reply: CountHead, count x Location. A found
//     object is pinned (its bytes cannot be freed or reused) until kRelease of its handle or the
//     connection's end.
//   kRelease: body: CountHead, count x u32 handle (padded to 8 bytes). No reply: a bad one gets
//     an error frame and the connection is closed (which releases everything it held).
//   kPutStart: body: CountHead, count x PutHead. Reply: CountHead, count x Location: room
//     reserved for each object, invisible until kPutEnd commits it; freed if the connection ends.
//   kPutEnd: body: CountHead, count x EndItem. Reply: CountHead, count x u32 status (padded).
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "kvstore/data_wire.h"

namespace myriad::kvstore::shm {

enum class Op : uint8_t {
  kHello = 16,
  kGet = 17,
  kRelease = 18,
  kPutStart = 19,
  kPutEnd = 20,
};

inline constexpr uint8_t kFirstOp = 16;
inline constexpr uint8_t kLastOp = 20;

// Where an object's bytes are (a get) or go (a put start).
struct Location {
  uint32_t status = 0;  // absl::StatusCode: 0, else the rest is zero
  uint32_t handle = 0;  // for kRelease / kPutEnd
  uint32_t segment = 0;
  uint32_t reserved = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};
static_assert(sizeof(Location) == 32);

struct EndItem {
  uint32_t handle = 0;
  uint32_t commit = 0;  // 1: make the object visible; 0: give the room back
};
static_assert(sizeof(EndItem) == 8);

// Hard limits on the control messages.
inline constexpr uint32_t kMaxSegments = 65536;
inline constexpr size_t kMaxFdsPerMessage = 250;  // the kernel's SCM_MAX_FD is 253

std::string_view OpName(uint8_t op);

// Why a request header on the Unix socket cannot be served, or OK.
absl::Status ValidateRequest(const wire::Header& h, uint64_t max_body);

// Bytes of a request body with a CountHead and `count` items of `item_bytes` (padded to 8).
inline uint64_t BodyBytes(uint64_t count, uint64_t item_bytes) {
  return sizeof(wire::CountHead) + (count * item_bytes + 7) / 8 * 8;
}

}  // namespace myriad::kvstore::shm
