#include "kvstore/shm_wire.h"

#include <fmt/format.h>

namespace myriad::kvstore::shm {

std::string_view OpName(uint8_t op) {
  switch (static_cast<Op>(op & ~wire::kReplyBit)) {
    case Op::kHello: return "shm_hello";
    case Op::kGet: return "shm_get";
    case Op::kRelease: return "shm_release";
    case Op::kPutStart: return "shm_put_start";
    case Op::kPutEnd: return "shm_put_end";
  }
  return wire::OpName(op);
}

absl::Status ValidateRequest(const wire::Header& h, uint64_t max_body) {
  if (absl::Status st = wire::ValidateRequestHead(h); !st.ok()) return st;
  if (h.op < kFirstOp || h.op > kLastOp) {
    return absl::InvalidArgumentError(fmt::format(
        "bad frame: field 'op' is {}, not a shared-memory op ({}-{})", h.op, kFirstOp, kLastOp));
  }
  if (h.status != 0) {
    return absl::InvalidArgumentError("bad frame: field 'status' must be 0 in a request");
  }
  if (h.body_bytes > max_body) {
    return absl::InvalidArgumentError(fmt::format(
        "bad frame: field 'body_bytes' is {}, a {} body is at most {} bytes", h.body_bytes,
        OpName(h.op), max_body));
  }
  return absl::OkStatus();
}

}  // namespace myriad::kvstore::shm
