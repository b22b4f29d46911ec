#include "kvstore/data_wire.h"

#include <fmt/format.h>

#include <algorithm>

namespace myriad::kvstore::wire {

std::string_view OpName(uint8_t op) {
  switch (static_cast<Op>(op & ~kReplyBit)) {
    case Op::kPut: return "put";
    case Op::kGet: return "get";
    case Op::kDelete: return "delete";
    case Op::kDropNamespace: return "drop_namespace";
    case Op::kCopyTo: return "copy_to";
    case Op::kStats: return "stats";
    case Op::kShmInfo: return "shm_info";
    case Op::kAuth: return "auth";
    case Op::kError: return "error";
  }
  return "unknown";
}

absl::Status ValidateRequestHead(const Header& h) {
  if (h.magic != kMagic) {
    return absl::InvalidArgumentError(
        fmt::format("bad frame: field 'magic' is {:#010x}, expected {:#010x}", h.magic, kMagic));
  }
  if (h.version != kVersion) {
    return absl::InvalidArgumentError(fmt::format(
        "bad frame: field 'version' is {}, this node speaks version {}", h.version, kVersion));
  }
  return absl::OkStatus();
}

absl::Status ValidateRequest(const Header& h, uint64_t max_body) {
  if (absl::Status st = ValidateRequestHead(h); !st.ok()) return st;
  if (!KnownRequestOp(h.op)) {
    return absl::InvalidArgumentError(fmt::format("bad frame: field 'op' is {}, unknown", h.op));
  }
  if (h.status != 0) {
    return absl::InvalidArgumentError("bad frame: field 'status' must be 0 in a request");
  }
  if (h.body_bytes > max_body) {
    return absl::ResourceExhaustedError(fmt::format(
        "bad frame: field 'body_bytes' is {}, above this node's limit of {}", h.body_bytes,
        max_body));
  }
  return absl::OkStatus();
}

absl::Status ValidateReply(const Header& h, uint8_t op, uint64_t request_id, uint64_t max_body) {
  if (h.magic != kMagic || h.version != kVersion) {
    return absl::InternalError("bad reply from the storage node: wrong magic or version");
  }
  const bool error_frame = h.op == (static_cast<uint8_t>(Op::kError) | kReplyBit);
  if (!error_frame && (h.op != (op | kReplyBit) || h.request_id != request_id)) {
    return absl::InternalError(fmt::format(
        "bad reply from the storage node: op {} id {} answers op {} id {}", h.op, h.request_id,
        op | kReplyBit, request_id));
  }
  const uint64_t limit = h.status != 0 ? std::max<uint64_t>(max_body, kMaxMessageBytes) : max_body;
  if (h.body_bytes > limit) {
    return absl::InternalError(fmt::format(
        "bad reply from the storage node: {} body bytes, above the limit of {}", h.body_bytes,
        max_body));
  }
  return absl::OkStatus();
}

Header ReplyHeader(const Header& req, uint64_t body_bytes) {
  Header r;
  r.op = static_cast<uint8_t>(req.op | kReplyBit);
  r.request_id = req.request_id;
  r.body_bytes = body_bytes;
  return r;
}

Header ErrorReply(const Header& req, const absl::Status& st, bool bad_header, std::string* message) {
  *message = std::string(st.message().substr(0, kMaxMessageBytes));
  Header r = ReplyHeader(req, message->size());
  if (bad_header) {
    r.op = static_cast<uint8_t>(Op::kError) | kReplyBit;
    if (req.magic != kMagic) r.request_id = 0;
  }
  r.status = static_cast<uint16_t>(st.code());
  return r;
}

}  // namespace myriad::kvstore::wire
