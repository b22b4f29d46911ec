#include "pystore/codes.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace myriad::pystore {

int CodeOf(const absl::Status& status, Call call) {
  switch (status.code()) {
    case absl::StatusCode::kOk: return kOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: return kInvalidParams;
    case absl::StatusCode::kNotFound: return kObjectNotFound;
    case absl::StatusCode::kAlreadyExists: return kObjectAlreadyExists;
    case absl::StatusCode::kFailedPrecondition:
      // 409: a put of a stored key; a removal of a leased (or pending) object.
      return call == Call::kPut      ? kObjectAlreadyExists
             : call == Call::kRemove ? kObjectHasLease
                                     : kReplicaIsNotReady;
    case absl::StatusCode::kResourceExhausted:
      return call == Call::kPut ? kNoAvailableHandle : kRpcFail;
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied: return kIllegalClient;
    case absl::StatusCode::kDataLoss: return kChecksumMismatch;
    case absl::StatusCode::kDeadlineExceeded: return kRpcTimeout;
    case absl::StatusCode::kUnavailable: return kRpcFail;
    default: return kInternalError;
  }
}

std::string_view CodeName(int code) {
  switch (code) {
    case kOk: return "OK";
    case kInternalError: return "INTERNAL_ERROR";
    case kBufferOverflow: return "BUFFER_OVERFLOW";
    case kNoAvailableHandle: return "NO_AVAILABLE_HANDLE";
    case kWriteFail: return "WRITE_FAIL";
    case kInvalidParams: return "INVALID_PARAMS";
    case kIllegalClient: return "ILLEGAL_CLIENT";
    case kReplicaIsNotReady: return "REPLICA_IS_NOT_READY";
    case kObjectNotFound: return "OBJECT_NOT_FOUND";
    case kObjectAlreadyExists: return "OBJECT_ALREADY_EXISTS";
    case kObjectHasLease: return "OBJECT_HAS_LEASE";
    case kChecksumMismatch: return "CHECKSUM_MISMATCH";
    case kRpcFail: return "RPC_FAIL";
    case kRpcTimeout: return "RPC_TIMEOUT";
    default: return "UNKNOWN";
  }
}

BlockKey StringKey(std::string_view key) {
  // "myriad_store" in ASCII: string keys live apart from token-block keys (seeded otherwise).
  constexpr uint64_t kSeed = 0x6d797269'61645f73;
  return XXH3_64bits_withSeed(key.data(), key.size(), kSeed);
}

}  // namespace myriad::pystore
