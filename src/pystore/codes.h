#pragma once
// What the Python module myriad_store (docs/kvstore-python.md) answers instead of absl statuses:
// Mooncake Store's integer error codes, so that engine code written against
// MooncakeDistributedStore (`if store.put(k, v) != 0`, `store.is_exist(k) == 1`) reads Myriad's
// answers alike, and the 64-bit block key of a key given as a string.
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "core/block_hash.h"

namespace myriad::pystore {

// The values of Mooncake Store's ErrorCode (mooncake-store/include/types.h) that Myriad's
// failures map onto.
enum Code : int {
  kOk = 0,
  kInternalError = -1,
  kBufferOverflow = -10,        // a caller's buffer is smaller than the object
  kNoAvailableHandle = -200,    // no room on the nodes
  kWriteFail = -500,            // a storage node failed the write
  kInvalidParams = -600,        // bad input (the message names it and its bound)
  kIllegalClient = -601,        // no or a wrong auth token
  kReplicaIsNotReady = -703,    // the object's put has not ended
  kObjectNotFound = -704,
  kObjectAlreadyExists = -705,
  kObjectHasLease = -706,       // read within the last lease period (10 s): not removable yet
  kChecksumMismatch = -801,     // every replica's bytes differ from the writer's checksum
  kRpcFail = -900,              // the master or a node could not be reached, or no placement
  kRpcTimeout = -901,
};

// The call a status came from: the master answers 409 (FailedPrecondition) both for a put of a
// key that exists and for a removal of a leased object, which Mooncake tells apart.
enum class Call { kPut, kGet, kRemove, kOther };

int CodeOf(const absl::Status& status, Call call);

// Mooncake's name of a code ("OBJECT_NOT_FOUND"), for messages and StoreError.code_name.
std::string_view CodeName(int code);

// The block key of a key given as text (a Mooncake-style string key): XXH3-64 of its UTF-8
// bytes under a seed of its own, so that it does not coincide with a token block's key by
// construction. Integers are used as block keys unchanged.
BlockKey StringKey(std::string_view key);

}  // namespace myriad::pystore
