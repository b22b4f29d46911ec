#pragma once
// The wire side of backend discovery through etcd's v3 JSON gateway (etcd 3.4: POST /v3/kv/range,
// /v3/watch, /v3/lease/...; keys and values base64): the prefix's range end, the registration
// value (a backend as JSON), and the lines of a watch stream. Pure functions, no I/O, so the
// discovery loop and the registration helpers share one codec and tests can feed it bytes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gateway/config.h"

namespace myriad::gateway {

// etcd's "every key with this prefix" range end: the prefix with its last byte incremented,
// trailing 0xff bytes dropped first; "\0" (every key from the start) when nothing is left.
std::string EtcdPrefixRangeEnd(std::string_view prefix);

// The registration value: {"name","url","role","model","dp_ranks","kv_events","kv_replay"}.
std::string EncodeRegistration(const BackendConfig& b);
// Parses and validates a registration stored under `key`; the name defaults to the key's last
// path element. Errors name the key and the field.
absl::StatusOr<BackendConfig> DecodeRegistration(std::string_view key, std::string_view value);

// One key-value of a range answer or a watch event, keys and values already base64-decoded.
struct EtcdKv {
  std::string key;
  std::string value;
  int64_t mod_revision = 0;
};

struct EtcdRange {
  int64_t revision = 0;  // the store's revision the answer reflects: watch from revision + 1
  std::vector<EtcdKv> kvs;
};
absl::StatusOr<EtcdRange> DecodeRange(std::string_view body);

struct EtcdWatchEvent {
  bool is_delete = false;  // PUT events carry no "type" in the JSON gateway
  EtcdKv kv;
};

// One line of a /v3/watch stream.
struct EtcdWatchMessage {
  bool created = false;
  // The watch ended on the server's side (compaction past our revision, or another reason):
  // the caller must re-list.
  bool canceled = false;
  std::string cancel_reason;
  int64_t revision = 0;
  std::vector<EtcdWatchEvent> events;
};
// An {"error": ...} line or malformed JSON is an error (the stream cannot be trusted further).
absl::StatusOr<EtcdWatchMessage> DecodeWatchLine(std::string_view line);

// Splits a byte stream into lines: chunks may end mid-line or hold several lines.
class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line_bytes = size_t{16} << 20) : max_(max_line_bytes) {}
  // Appends data and returns the lines it completed (without their '\n'; empty lines dropped).
  // Fails when a line grows past the limit.
  absl::StatusOr<std::vector<std::string>> Feed(std::string_view data);

 private:
  std::string pending_;
  size_t max_;
};

}  // namespace myriad::gateway
