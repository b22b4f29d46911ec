#pragma once
// The storage nodes' binary data path (docs/kvstore.md, "Data path wire format"): frames of a
// fixed 24-byte header and a body, little-endian. Pure encoding and validation, no I/O: the
// server (kvstore/data_server.h) and the client (kvstore/data_client.h) share it.
//
// Header: magic u32 "MYKV" | version u8 | op u8 | status u16 | request_id u64 | body_bytes u64.
// A reply carries the request's op with kReplyBit set, the same request_id, and a status (an
// absl::StatusCode; nonzero replies carry a UTF-8 message as their body).
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/block_hash.h"
#include "kvstore_core/types.h"

namespace myriad::kvstore::wire {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

inline constexpr uint32_t kMagic = 0x564B594D;  // bytes 'M' 'Y' 'K' 'V'
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 24;
inline constexpr uint8_t kReplyBit = 0x80;
// Error messages in replies are cut to this, so a reply to garbage stays small.
inline constexpr size_t kMaxMessageBytes = 1024;

enum class Op : uint8_t {
  // body: PutHead, then `size` payload bytes. Reply: empty.
  kPut = 1,
  // body: u32 count, u32 0, count x ObjectRef. Reply: u32 count, u32 0, count x GetItem, then the
  // payloads of the found items, back to back in request order.
  kGet = 2,
  // body: as kGet. Reply: u32 count, u32 0, count x u32 status (0 deleted, 5 not found).
  kDelete = 3,
  // body: u32 namespace, u32 0. Reply: u64 objects freed.
  kDropNamespace = 4,
  // body: ObjectRef, u32 address length, u32 0, address "host:port". The node pushes its copy
  // of the object to that node (a kPut) and replies once that node has acknowledged it.
  kCopyTo = 5,
  // body: empty. Reply: the node's statistics as a JSON object.
  kStats = 6,
  // body: empty. Reply: u64 token, u32 path length, u32 0, path: the node's same-host
  // shared-memory socket (kvstore/shm_wire.h), length 0 when it has none.
  kShmInfo = 7,
  // body: the cluster's shared secret (kvstore/auth.h), 1 to kMaxAuthTokenBytes bytes. Reply:
  // empty. A node given a secret answers any other request before a good AUTH with
  // Unauthenticated and closes the connection; a wrong secret gets the same.
  kAuth = 8,
  // Reply only, to a frame whose header is invalid (the connection is closed after it).
  kError = 0x7f,
};

struct Header {
  uint32_t magic = kMagic;
  uint8_t version = kVersion;
  uint8_t op = 0;
  uint16_t status = 0;
  uint64_t request_id = 0;
  uint64_t body_bytes = 0;
};
static_assert(sizeof(Header) == kHeaderBytes);

struct ObjectRef {
  uint32_t ns = 0;
  uint32_t reserved = 0;
  uint64_t key = 0;
};
static_assert(sizeof(ObjectRef) == 16);

// The references of `names` (ObjectName: anything with .ns and .key), for a request's items.
template <typename Name>
std::vector<ObjectRef> Refs(std::span<const Name> names) {
  std::vector<ObjectRef> refs(names.size());
  for (size_t i = 0; i < names.size(); ++i) refs[i] = {names[i].ns, 0, names[i].key};
  return refs;
}

struct PutHead {
  uint32_t ns = 0;
  uint32_t reserved = 0;
  uint64_t key = 0;
  uint64_t size = 0;
};
static_assert(sizeof(PutHead) == 24);

struct GetItem {
  uint32_t status = 0;  // absl::StatusCode: 0 found, 5 not found
  uint32_t reserved = 0;
  uint64_t size = 0;    // payload bytes that follow for this item (0 unless found)
};
static_assert(sizeof(GetItem) == 16);

struct CountHead {
  uint32_t count = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(CountHead) == 8);

struct CopyHead {
  ObjectRef object;
  uint32_t address_bytes = 0;
  uint32_t flags = 0;  // kCopyChecksum or 0
};
static_assert(sizeof(CopyHead) == 24);
// COPY_TO flag: the object's checksum (u64) follows the address; the source pushes only bytes
// that match it, so a repair never spreads a corrupted copy.
inline constexpr uint32_t kCopyChecksum = 1;

inline constexpr uint32_t kMaxAddressBytes = 255;

template <typename T>
T Load(const void* p) {
  T t;
  std::memcpy(&t, p, sizeof(T));
  return t;
}

inline bool KnownRequestOp(uint8_t op) {
  return op >= static_cast<uint8_t>(Op::kPut) && op <= static_cast<uint8_t>(Op::kAuth);
}

// Why a request header cannot be served (naming the field), or OK. `max_body` bounds every
// body: nothing is allocated or reserved from a length before this check.
absl::Status ValidateRequest(const Header& h, uint64_t max_body);
// Its first checks, which do not depend on the op set: magic and version. The shared-memory
// path's requests (kvstore/shm_wire.h) share them.
absl::Status ValidateRequestHead(const Header& h);
// The same for a reply to request `request_id` of `op`.
absl::Status ValidateReply(const Header& h, uint8_t op, uint64_t request_id, uint64_t max_body);

std::string_view OpName(uint8_t op);

// The header of the reply to `req` with `body_bytes` of body.
Header ReplyHeader(const Header& req, uint64_t body_bytes);
// The header and body (the status's message, cut to kMaxMessageBytes) of an error reply to
// `req`: an ERROR frame when its header itself was bad (request id 0 when even the magic was
// wrong, so nothing of it is trusted), else its op's reply carrying the status.
Header ErrorReply(const Header& req, const absl::Status& st, bool bad_header, std::string* message);

}  // namespace myriad::kvstore::wire
