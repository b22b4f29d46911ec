#pragma once
// The gateway's side of backend discovery through etcd: the registration value (a backend as
// JSON). The generic etcd wire codec (range answers, watch lines, prefix range ends) lives in
// net/etcd_codec.h and is re-exported here under the gateway's names.
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "gateway/config.h"
#include "net/etcd_codec.h"

namespace myriad::gateway {

using net::DecodeRange;
using net::DecodeWatchLine;
using net::EtcdKv;
using net::EtcdPrefixRangeEnd;
using net::EtcdRange;
using net::EtcdWatchEvent;
using net::EtcdWatchMessage;
using net::LineSplitter;

// The registration value: {"name","url","role","model","dp_ranks","kv_events","kv_replay"}.
std::string EncodeRegistration(const BackendConfig& b);
// Parses and validates a registration stored under `key`; the name defaults to the key's last
// path element. Errors name the key and the field.
absl::StatusOr<BackendConfig> DecodeRegistration(std::string_view key, std::string_view value);

}  // namespace myriad::gateway
