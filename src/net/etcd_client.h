#pragma once
// EtcdClient: a small blocking client of etcd's v3 JSON gateway (etcd 3.4) over one kept-alive
// connection: get a key, put, delete, "create if absent" bound to a lease (a txn comparing the
// key's create_revision with 0, etcd's election primitive), lease grant / keepalive / revoke.
// Every call is bounded by the timeout. Not thread-safe: one client per thread. Watches are
// streams and live in the callers that need them (gateway/etcd_discovery.cc).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/time.h"
#include "net/etcd_codec.h"
#include "net/http_client.h"

namespace myriad::net {

struct EtcdCreateResult {
  bool created = false;   // the key was absent and is now ours
  int64_t revision = 0;   // the store's revision after the txn: our key's create_revision
  std::optional<EtcdKv> holder;  // when not created: the key as it is (its owner's value)
};

class EtcdClient {
 public:
  // "http://host:port". Fails on a malformed endpoint.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(std::string_view endpoint,
                                                             Nanos timeout = 5 * kSecond);

  const std::string& endpoint() const { return endpoint_; }

  // The key, or nullopt when absent.
  absl::StatusOr<std::optional<EtcdKv>> Get(std::string_view key);
  // Every key starting with `prefix`, in key order.
  absl::StatusOr<std::vector<EtcdKv>> GetPrefix(std::string_view prefix);
  absl::Status Put(std::string_view key, std::string_view value, int64_t lease = 0);
  // Deletes the key; OK when it was absent already.
  absl::Status Delete(std::string_view key);
  // Creates `key` = `value` bound to `lease` only if the key does not exist (create_revision
  // == 0 compare), atomically; otherwise reads it back in the same txn.
  absl::StatusOr<EtcdCreateResult> CreateIfAbsent(std::string_view key, std::string_view value,
                                                  int64_t lease);

  // A lease of `ttl_seconds`; returns its id.
  absl::StatusOr<int64_t> GrantLease(int64_t ttl_seconds);
  // Renews the lease once; returns the TTL (seconds) etcd granted from now. kNotFound when the
  // lease has expired or is unknown (its keys are gone).
  absl::StatusOr<int64_t> KeepAlive(int64_t lease);
  // Revokes the lease (its keys are deleted). OK when it had expired already.
  absl::Status Revoke(int64_t lease);

  // One POST to the gateway: the answer's JSON text when it is 200 without an "error"; etcd's
  // gRPC code 5 (NOT_FOUND) becomes kNotFound, anything else kUnavailable, naming the target.
  absl::StatusOr<std::string> Post(std::string_view target, std::string body);

 private:
  EtcdClient(std::string endpoint, std::unique_ptr<HttpClient> http)
      : endpoint_(std::move(endpoint)), http_(std::move(http)) {}
  std::string endpoint_;
  std::unique_ptr<HttpClient> http_;
};

}  // namespace myriad::net
