#include "net/etcd_client.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "net/json_text.h"

namespace myriad::net {

using json = nlohmann::json;

namespace {

std::string B64(std::string_view s) { return absl::Base64Escape(std::string(s)); }

// etcd's JSON gateway writes int64 as strings.
int64_t IntOf(const json& j, const char* field) {
  auto it = j.find(field);
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

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(std::string_view endpoint,
                                                                 Nanos timeout) {
  auto http = HttpClient::FromUrl(endpoint, HttpClientOptions{.timeout = timeout});
  if (!http.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("etcd endpoint '{}': {}", endpoint, std::string(http.status().message())));
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::string(endpoint), std::move(*http)));
}

absl::StatusOr<std::string> EtcdClient::Post(std::string_view target, std::string body) {
  auto r = http_->Post(target, std::move(body));
  if (!r.ok()) {
    return absl::Status(r.status().code(), fmt::format("etcd {}{}: {}", endpoint_, target,
                                                       std::string(r.status().message())));
  }
  json j = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  const bool has_error = j.is_object() && j.contains("error");
  if (r->status != 200 || j.is_discarded() || has_error) {
    std::string what = r->body.substr(0, 200);
    if (has_error && j["error"].is_string()) what = j["error"].get<std::string>();
    if (has_error && j.value("code", 0) == 5) {
      return absl::NotFoundError(fmt::format("etcd {}{}: {}", endpoint_, target, what));
    }
    return absl::UnavailableError(
        fmt::format("etcd {}{}: HTTP {}: {}", endpoint_, target, r->status, what));
  }
  return std::move(r->body);
}

absl::StatusOr<std::optional<EtcdKv>> EtcdClient::Get(std::string_view key) {
  auto body = Post("/v3/kv/range", net::JsonText(json({{"key", B64(key)}})));
  if (!body.ok()) return body.status();
  auto range = DecodeRange(*body);
  if (!range.ok()) return range.status();
  if (range->kvs.empty()) return std::optional<EtcdKv>();
  return std::optional<EtcdKv>(std::move(range->kvs.front()));
}

absl::StatusOr<std::vector<EtcdKv>> EtcdClient::GetPrefix(std::string_view prefix) {
  const json req = {{"key", B64(prefix)}, {"range_end", B64(EtcdPrefixRangeEnd(prefix))}};
  auto body = Post("/v3/kv/range", net::JsonText(req));
  if (!body.ok()) return body.status();
  auto range = DecodeRange(*body);
  if (!range.ok()) return range.status();
  return std::move(range->kvs);
}

absl::Status EtcdClient::Put(std::string_view key, std::string_view value, int64_t lease) {
  json put = {{"key", B64(key)}, {"value", B64(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  return Post("/v3/kv/put", net::JsonText(put)).status();
}

absl::Status EtcdClient::Delete(std::string_view key) {
  return Post("/v3/kv/deleterange", net::JsonText(json({{"key", B64(key)}}))).status();
}

absl::StatusOr<EtcdCreateResult> EtcdClient::CreateIfAbsent(std::string_view key,
                                                            std::string_view value,
                                                            int64_t lease) {
  // Compare create_revision == 0 (the key does not exist); the JSON gateway omits zero values,
  // so the comparison is spelled with its enum names and an explicit "0".
  json put = {{"key", B64(key)}, {"value", B64(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  const json txn = {
      {"compare", json::array({{{"key", B64(key)},
                                {"result", "EQUAL"},
                                {"target", "CREATE"},
                                {"create_revision", "0"}}})},
      {"success", json::array({{{"request_put", put}}})},
      {"failure", json::array({{{"request_range", {{"key", B64(key)}}}}})}};
  auto body = Post("/v3/kv/txn", net::JsonText(txn));
  if (!body.ok()) return body.status();
  json j = json::parse(*body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InternalError("etcd txn: answer is not JSON");
  EtcdCreateResult out;
  out.created = j.value("succeeded", false);
  if (auto h = j.find("header"); h != j.end() && h->is_object()) out.revision = IntOf(*h, "revision");
  if (!out.created) {
    auto responses = j.find("responses");
    if (responses != j.end() && responses->is_array() && !responses->empty()) {
      const json& first = responses->front();
      if (auto rr = first.find("response_range"); rr != first.end()) {
        json range = *rr;
        if (!range.contains("header")) range["header"] = j.value("header", json::object());
        auto decoded = DecodeRange(net::JsonText(range));
        if (!decoded.ok()) return decoded.status();
        if (!decoded->kvs.empty()) out.holder = std::move(decoded->kvs.front());
      }
    }
  }
  return out;
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(int64_t ttl_seconds) {
  auto body = Post("/v3/lease/grant", net::JsonText(json({{"TTL", std::to_string(ttl_seconds)}})));
  if (!body.ok()) return body.status();
  json j = json::parse(*body, nullptr, false);
  const int64_t id = j.is_object() ? IntOf(j, "ID") : 0;
  if (id == 0) return absl::InternalError(fmt::format("etcd {}: lease grant without an ID", endpoint_));
  return id;
}

absl::StatusOr<int64_t> EtcdClient::KeepAlive(int64_t lease) {
  auto body = Post("/v3/lease/keepalive", net::JsonText(json({{"ID", std::to_string(lease)}})));
  if (!body.ok()) return body.status();
  json j = json::parse(*body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InternalError("etcd keepalive: answer is not JSON");
  // The gateway streams keepalive answers as {"result": {...}}; an unknown or expired lease is
  // answered with a result without a TTL (TTL 0 is omitted).
  const json& res = j.contains("result") ? j["result"] : j;
  const int64_t ttl = IntOf(res, "TTL");
  if (ttl <= 0) return absl::NotFoundError(fmt::format("etcd lease {:x}: expired or unknown", lease));
  return ttl;
}

absl::Status EtcdClient::Revoke(int64_t lease) {
  auto r = Post("/v3/lease/revoke", net::JsonText(json({{"ID", std::to_string(lease)}})));
  if (!r.ok() && r.status().code() != absl::StatusCode::kNotFound) return r.status();
  return absl::OkStatus();
}

}  // namespace myriad::net
