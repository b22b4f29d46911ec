#pragma once
// Registration of a backend in etcd, the other side of EtcdDiscovery: what an engine's sidecar,
// the CLI or a test calls. The key is prefix + name, the value the backend as JSON; with a lease
// the registration disappears by itself when its owner stops renewing it (a dead engine leaves
// the gateway within the TTL). Blocking calls, each bounded by `timeout`.
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "gateway/config.h"

namespace myriad::gateway {

// Grants a lease of `lease_ttl_seconds` (0: no lease, the key stays until deregistered) and puts
// the registration with it. Returns the lease id (0 without a lease).
absl::StatusOr<int64_t> EtcdRegister(std::string_view endpoint, std::string_view prefix,
                                     const BackendConfig& backend, int64_t lease_ttl_seconds,
                                     Nanos timeout = 5 * kSecond);

// Renews a lease once; call it every TTL/3 or so. kNotFound when the lease has expired (the
// registration is gone: register again).
absl::Status EtcdKeepAlive(std::string_view endpoint, int64_t lease_id, Nanos timeout = 5 * kSecond);

// Deletes the registration and, when lease_id != 0, revokes the lease.
absl::Status EtcdDeregister(std::string_view endpoint, std::string_view prefix, std::string_view name,
                            int64_t lease_id = 0, Nanos timeout = 5 * kSecond);

}  // namespace myriad::gateway
