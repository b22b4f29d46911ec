#include "gateway/etcd_register.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/escaping.h"
#include "gateway/etcd_codec.h"
#include "net/http_client.h"

namespace myriad::gateway {

using json = nlohmann::json;

namespace {

// One POST to etcd's JSON gateway; an answer that is not 200 or carries "error" is an error.
absl::StatusOr<json> EtcdPost(std::string_view endpoint, std::string_view target, const json& body,
                              Nanos timeout) {
  auto client = net::HttpClient::FromUrl(endpoint, net::HttpClientOptions{.timeout = timeout});
  if (!client.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("etcd endpoint '{}': {}", endpoint, std::string(client.status().message())));
  }
  auto r = (*client)->Post(target, body.dump());
  if (!r.ok()) return r.status();
  json j = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  const bool has_error = j.is_object() && j.contains("error");
  if (r->status != 200 || j.is_discarded() || has_error) {
    const std::string what = has_error && j["error"].is_string() ? j["error"].get<std::string>()
                                                                  : r->body.substr(0, 200);
    // etcd's gRPC code 5 is NOT_FOUND (an expired or unknown lease).
    if (has_error && j.value("code", 0) == 5) {
      return absl::NotFoundError(fmt::format("etcd {}{}: {}", endpoint, target, what));
    }
    return absl::UnavailableError(
        fmt::format("etcd {}{}: HTTP {}: {}", endpoint, target, r->status, what));
  }
  return j;
}

int64_t IdOf(const json& j) {
  auto it = j.find("ID");
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    try {
      return std::stoll(it->get<std::string>());
    } catch (const std::exception&) {
    }
  }
  return 0;
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
  int64_t lease = 0;
  if (lease_ttl_seconds > 0) {
    auto g = EtcdPost(endpoint, "/v3/lease/grant", json({{"TTL", lease_ttl_seconds}}), timeout);
    if (!g.ok()) return g.status();
    lease = IdOf(*g);
    if (lease == 0) return absl::InternalError(fmt::format("etcd {}: lease grant without an ID", endpoint));
  }
  json put = {{"key", absl::Base64Escape(std::string(prefix) + backend.name)},
              {"value", absl::Base64Escape(EncodeRegistration(backend))}};
  // int64 as a string, as etcd's gateway writes them (a double would lose precision).
  if (lease != 0) put["lease"] = std::to_string(lease);
  auto p = EtcdPost(endpoint, "/v3/kv/put", put, timeout);
  if (!p.ok()) return p.status();
  return lease;
}

absl::Status EtcdKeepAlive(std::string_view endpoint, int64_t lease_id, Nanos timeout) {
  auto r = EtcdPost(endpoint, "/v3/lease/keepalive", json({{"ID", std::to_string(lease_id)}}), timeout);
  if (!r.ok()) return r.status();
  // An unknown or expired lease is answered with a result without a TTL (TTL 0 is omitted).
  const json& res = r->contains("result") ? (*r)["result"] : *r;
  auto ttl = res.find("TTL");
  const bool alive = ttl != res.end() && ((ttl->is_string() && ttl->get<std::string>() != "0") ||
                                          (ttl->is_number_integer() && ttl->get<int64_t>() > 0));
  if (!alive) return absl::NotFoundError(fmt::format("etcd lease {}: expired or unknown", lease_id));
  return absl::OkStatus();
}

absl::Status EtcdDeregister(std::string_view endpoint, std::string_view prefix, std::string_view name,
                            int64_t lease_id, Nanos timeout) {
  auto d = EtcdPost(endpoint, "/v3/kv/deleterange",
                    json({{"key", absl::Base64Escape(std::string(prefix) + std::string(name))}}), timeout);
  if (!d.ok()) return d.status();
  if (lease_id != 0) {
    auto r = EtcdPost(endpoint, "/v3/lease/revoke", json({{"ID", std::to_string(lease_id)}}), timeout);
    // Already expired: the key is gone either way.
    if (!r.ok() && r.status().code() != absl::StatusCode::kNotFound) return r.status();
  }
  return absl::OkStatus();
}

}  // namespace myriad::gateway
