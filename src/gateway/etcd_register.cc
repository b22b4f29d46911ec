#include "gateway/etcd_register.h"

#include <fmt/format.h>

#include <memory>
#include <string>

#include "gateway/etcd_codec.h"
#include "net/etcd_client.h"

namespace myriad::gateway {

namespace {

absl::StatusOr<std::unique_ptr<net::EtcdClient>> Client(std::string_view endpoint, Nanos timeout) {
  return net::EtcdClient::Connect(endpoint, timeout);
}

}  // namespace

absl::StatusOr<int64_t> EtcdRegister(std::string_view endpoint, std::string_view prefix,
                                     const BackendConfig& backend, int64_t lease_ttl_seconds,
                                     Nanos timeout) {
  if (absl::Status st = ValidateBackend(backend, fmt::format("backend '{}'", backend.name));
      !st.ok()) {
    return st;
  }
  if (lease_ttl_seconds < 0) return absl::InvalidArgumentError("lease_ttl_seconds: must be >= 0");
  auto etcd = Client(endpoint, timeout);
  if (!etcd.ok()) return etcd.status();
  int64_t lease = 0;
  if (lease_ttl_seconds > 0) {
    auto g = (*etcd)->GrantLease(lease_ttl_seconds);
    if (!g.ok()) return g.status();
    lease = *g;
  }
  if (absl::Status st = (*etcd)->Put(std::string(prefix) + backend.name, EncodeRegistration(backend), lease);
      !st.ok()) {
    return st;
  }
  return lease;
}

absl::Status EtcdKeepAlive(std::string_view endpoint, int64_t lease_id, Nanos timeout) {
  auto etcd = Client(endpoint, timeout);
  if (!etcd.ok()) return etcd.status();
  return (*etcd)->KeepAlive(lease_id).status();
}

absl::Status EtcdDeregister(std::string_view endpoint, std::string_view prefix, std::string_view name,
                            int64_t lease_id, Nanos timeout) {
  auto etcd = Client(endpoint, timeout);
  if (!etcd.ok()) return etcd.status();
  if (absl::Status st = (*etcd)->Delete(std::string(prefix) + std::string(name)); !st.ok()) return st;
  // Already expired: the key is gone either way (Revoke says OK).
  if (lease_id != 0) return (*etcd)->Revoke(lease_id);
  return absl::OkStatus();
}

}  // namespace myriad::gateway
