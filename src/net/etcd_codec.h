#pragma once
// The wire side of etcd's v3 JSON gateway (etcd 3.4: POST /v3/kv/range, /v3/kv/put,
// /v3/kv/txn, /v3/watch, /v3/lease/...; keys and values base64, int64 as strings): range
// answers, the lines of a watch stream, a prefix's range end. Pure functions, no I/O, shared by
// the gateway's discovery, the KV store master's election and tests that feed them bytes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace myriad::net {

// etcd's "every key with this prefix" range end: the prefix with its last byte incremented,
// trailing 0xff bytes dropped first; "\0" (every key from the start) when nothing is left.
std::string EtcdPrefixRangeEnd(std::string_view prefix);

// One key-value of a range answer or a watch event, keys and values already base64-decoded.
struct EtcdKv {
  std::string key;
  std::string value;
  int64_t mod_revision = 0;
  int64_t create_revision = 0;
  int64_t lease = 0;
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

}  // namespace myriad::net
