#include "kvstore/master_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <thread>

#include "kvstore/api_json.h"
#include "kvstore/auth.h"
#include "net/etcd_client.h"
#include "net/url_path.h"

namespace myriad::kvstore {

namespace {

using nlohmann::json;

json KeyList(std::span<const BlockKey> keys) {
  json a = json::array();
  for (BlockKey k : keys) a.push_back(api::FormatKey(k));
  return a;
}

absl::StatusOr<BlockKey> KeyOf(const json& j, const char* field) {
  if (!j.contains(field) || !j[field].is_string()) {
    return absl::InternalError(fmt::format("the master's answer has no key '{}'", field));
  }
  std::optional<BlockKey> k = api::ParseKey(j[field].get<std::string>());
  if (!k) return absl::InternalError(fmt::format("the master's answer has a bad key in '{}'", field));
  return *k;
}

// 0 when the field is absent (an object written without a checksum).
absl::StatusOr<uint64_t> OptionalKeyOf(const json& j, const char* field) {
  if (!j.contains(field)) return uint64_t{0};
  return KeyOf(j, field);
}

std::vector<ReplicaInfo> Replicas(const json& list) {
  std::vector<ReplicaInfo> out;
  if (!list.is_array()) return out;
  for (const json& r : list) {
    out.push_back({r.value("id", NodeId{0}), r.value("fault_domain", std::string()), r.value("address", std::string())});
  }
  return out;
}

}  // namespace

absl::Status StatusFromHttp(int http_status, std::string_view body) {
  const json j = json::parse(body, nullptr, false);
  std::string message = fmt::format("the master answered {}", http_status);
  if (!j.is_discarded() && j.contains("error") && j["error"].is_object()) {
    message = j["error"].value("message", message);
  }
  switch (http_status) {
    case 400: return absl::InvalidArgumentError(message);
    case 401: return absl::UnauthenticatedError(message);
    case 404: return absl::NotFoundError(message);
    case 409: return absl::FailedPreconditionError(message);
    case 413: return absl::ResourceExhaustedError(message);
    case 421: return absl::UnavailableError(message);  // not the leader
    case 503: return absl::UnavailableError(message);
    default: return absl::InternalError(message);
  }
}

absl::StatusOr<std::unique_ptr<MasterClient>> MasterClient::Connect(std::string_view url, Nanos timeout,
                                                                    std::string auth_token) {
  // Several masters of one group, comma-separated: the leader is followed (ConnectAny), with
  // time to find it after a failover; one master: each call bounded by the timeout alone.
  std::vector<std::string> urls;
  for (std::string_view rest = url; !rest.empty();) {
    const size_t comma = rest.find(',');
    std::string_view one = rest.substr(0, comma);
    while (!one.empty() && one.front() == ' ') one.remove_prefix(1);
    while (!one.empty() && one.back() == ' ') one.remove_suffix(1);
    if (!one.empty()) urls.emplace_back(one);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  const Nanos failover = urls.size() > 1 ? std::max(timeout, MasterClientOptions{}.failover_timeout) : timeout;
  return ConnectAny(std::move(urls), MasterClientOptions{.timeout = timeout,
                                                         .failover_timeout = failover,
                                                         .auth_token = std::move(auth_token)});
}

absl::StatusOr<std::unique_ptr<MasterClient>> MasterClient::ConnectAny(std::vector<std::string> urls,
                                                                      MasterClientOptions options) {
  if (urls.empty()) return absl::InvalidArgumentError("no master URL given");
  for (const std::string& u : urls) {
    if (auto hp = net::ParseHttpUrl(u); !hp.ok()) return hp.status();
  }
  std::unique_ptr<MasterClient> c(new MasterClient(std::move(urls), options));
  if (absl::Status st = c->Use(0); !st.ok()) return st;
  return c;
}

absl::StatusOr<std::unique_ptr<MasterClient>> MasterClient::ConnectViaEtcd(std::string_view etcd,
                                                                          std::string_view election_key,
                                                                          MasterClientOptions options) {
  auto client = net::EtcdClient::Connect(etcd, options.timeout);
  if (!client.ok()) return client.status();
  std::vector<std::string> urls;
  auto leader = (*client)->Get(election_key);
  if (!leader.ok()) return leader.status();
  if (leader->has_value()) urls.push_back((*leader)->value);
  auto members = (*client)->GetPrefix(std::string(election_key) + "/members/");
  if (!members.ok()) return members.status();
  for (const net::EtcdKv& kv : *members) {
    if (std::find(urls.begin(), urls.end(), kv.value) == urls.end()) urls.push_back(kv.value);
  }
  if (urls.empty()) {
    return absl::NotFoundError(fmt::format("etcd {}: no KV store master registered under {}", etcd,
                                           election_key));
  }
  return ConnectAny(std::move(urls), options);
}

absl::Status MasterClient::Use(size_t i) {
  auto http = net::HttpClient::FromUrl(urls_[i], {.timeout = options_.timeout});
  if (!http.ok()) return http.status();
  http_ = std::move(*http);
  current_ = i;
  return absl::OkStatus();
}

absl::StatusOr<json> MasterClient::Call(std::string_view method, std::string_view target, const json* body,
                                        bool idempotent) {
  const std::string payload = body ? body->dump() : std::string();
  const auto start = std::chrono::steady_clock::now();
  const auto give_up = start + std::chrono::nanoseconds(options_.failover_timeout);
  std::chrono::milliseconds backoff(20);
  bool moved = false;
  const net::Headers auth_headers = AuthHeaders(options_.auth_token);
  while (true) {
    absl::StatusOr<net::HttpResponse> r =
        http_->Request(method, target, payload, body ? "application/json" : "", auth_headers);
    absl::Status failure;
    if (r.ok() && r->status != 421) {
      if (moved) ++failovers_;
      if (r->status < 200 || r->status >= 300) return StatusFromHttp(r->status, r->body);
      json j = json::parse(r->body, nullptr, false);
      if (j.is_discarded()) return absl::InternalError(fmt::format("the master's answer to {} is not JSON", target));
      return j;
    }
    bool retry = false;
    bool named = false;
    if (r.ok()) {
      // 421: a standby, which did not execute the request; it names the leader when it knows it.
      failure = StatusFromHttp(r->status, r->body);
      retry = true;
      if (const std::string* leader = net::FindHeader(r->headers, "X-Myriad-Leader");
          leader != nullptr && !leader->empty() && *leader != urls_[current_]) {
        auto it = std::find(urls_.begin(), urls_.end(), *leader);
        if (it == urls_.end()) it = urls_.insert(urls_.end(), *leader);
        named = Use(static_cast<size_t>(it - urls_.begin())).ok();
      }
    } else {
      failure = r.status();
      retry = idempotent && urls_.size() > 1;
    }
    if (!named && urls_.size() > 1) (void)Use((current_ + 1) % urls_.size());
    moved = true;
    if (!retry || std::chrono::steady_clock::now() + backoff > give_up) return failure;
    if (!named) {
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
    }
  }
}

absl::Status MasterClient::RegisterNode(NodeId node, std::string_view fault_domain, uint64_t capacity_bytes,
                                        std::string_view address) {
  json body = {{"id", node}, {"fault_domain", fault_domain}, {"capacity_bytes", capacity_bytes}};
  if (!address.empty()) body["address"] = address;
  return Call("POST", "/v1/nodes", &body).status();
}

absl::Status MasterClient::Heartbeat(NodeId node) {
  return Call("POST", fmt::format("/v1/nodes/{}/heartbeat", node), nullptr).status();
}

absl::Status MasterClient::CreateNamespace(std::string_view name) {
  const json body = {{"name", name}};
  return Call("POST", "/v1/namespaces", &body, /*idempotent=*/false).status();
}

absl::Status MasterClient::DropNamespace(std::string_view name) {
  return Call("DELETE", "/v1/namespaces/" + net::PathSegment(name), nullptr, /*idempotent=*/false).status();
}

absl::StatusOr<std::vector<ReplicaInfo>> MasterClient::PutStart(std::string_view ns, std::span<const BlockKey> keys,
                                                                uint64_t size, int replicas, bool pinned) {
  const json body = {{"namespace", ns}, {"keys", KeyList(keys)}, {"size", size}, {"replicas", replicas},
                     {"pinned", pinned}};
  auto j = Call("POST", "/v1/put/start", &body, /*idempotent=*/false);
  if (!j.ok()) return j.status();
  return Replicas((*j)["replicas"]);
}

absl::StatusOr<Placement> MasterClient::PlacePut(std::string_view ns,
                                                 std::span<const BlockKey> keys, uint64_t size,
                                                 int replicas, bool pinned,
                                                 std::span<const NodeId> avoid,
                                                 uint64_t checksum) {
  json body = {{"namespace", ns}, {"keys", KeyList(keys)}, {"size", size}, {"replicas", replicas},
               {"pinned", pinned}};
  if (!avoid.empty()) body["avoid"] = std::vector<NodeId>(avoid.begin(), avoid.end());
  if (checksum != 0) body["checksum"] = api::FormatKey(checksum);
  auto j = Call("POST", "/v1/put/start", &body);
  if (!j.ok()) return j.status();
  auto object = KeyOf(*j, "object");
  if (!object.ok()) return object.status();
  if (!j->contains("namespace_id") || !(*j)["namespace_id"].is_number_unsigned()) {
    return absl::InternalError("the master's put/start answer has no 'namespace_id'");
  }
  return Placement{(*j)["namespace_id"].get<NamespaceId>(), *object, Replicas((*j)["replicas"])};
}

absl::Status MasterClient::PutEnd(std::string_view ns, BlockKey object, uint64_t size) {
  json body = {{"namespace", ns}, {"object", api::FormatKey(object)}};
  if (size != 0) body["size"] = size;
  return Call("POST", "/v1/put/end", &body).status();
}

absl::Status MasterClient::PutRevoke(std::string_view ns, BlockKey object) {
  const json body = {{"namespace", ns}, {"object", api::FormatKey(object)}};
  return Call("POST", "/v1/put/revoke", &body).status();
}

namespace {

// An item's error in a batch answer ({"error": {"status", "message"}}) as a status.
absl::Status ItemError(const json& item) {
  const json& e = item.contains("error") && item["error"].is_object() ? item["error"] : json::object();
  return StatusFromHttp(e.value("status", 500), json{{"error", e}}.dump());
}

}  // namespace

absl::StatusOr<std::vector<absl::StatusOr<Placement>>> MasterClient::PlacePutBatch(
    std::string_view ns, std::span<const BatchPutSpec> puts, int replicas, bool pinned,
    std::span<const NodeId> avoid) {
  json keys = json::array(), blocks = json::array(), sizes = json::array(),
       checksums = json::array();
  bool any_checksum = false;
  for (const BatchPutSpec& p : puts) {
    for (BlockKey k : p.keys) keys.push_back(api::FormatKey(k));
    blocks.push_back(p.keys.size());
    sizes.push_back(p.size);
    checksums.push_back(api::FormatKey(p.checksum));
    any_checksum = any_checksum || p.checksum != 0;
  }
  json body = {{"namespace", ns}, {"keys", std::move(keys)}, {"blocks", std::move(blocks)},
               {"sizes", std::move(sizes)}, {"replicas", replicas}, {"pinned", pinned}};
  if (any_checksum) body["checksums"] = std::move(checksums);
  if (!avoid.empty()) body["avoid"] = std::vector<NodeId>(avoid.begin(), avoid.end());
  auto j = Call("POST", "/v1/put/batch_start", &body, /*idempotent=*/false);
  if (!j.ok()) return j.status();
  const json& results = (*j)["results"];
  if (!results.is_array() || results.size() != puts.size() || !j->contains("namespace_id") ||
      !(*j)["namespace_id"].is_number_unsigned()) {
    return absl::InternalError(
        "the master's put/batch_start answer does not have a namespace_id and one result per put");
  }
  const auto ns_id = (*j)["namespace_id"].get<NamespaceId>();
  std::vector<absl::StatusOr<Placement>> out;
  out.reserve(puts.size());
  for (const json& r : results) {
    if (r.contains("error")) {
      out.push_back(ItemError(r));
      continue;
    }
    auto object = KeyOf(r, "object");
    if (!object.ok()) return object.status();
    out.push_back(Placement{ns_id, *object, Replicas(r.contains("replicas") ? r["replicas"] : json())});
  }
  return out;
}

absl::StatusOr<std::vector<absl::Status>> MasterClient::PutEndBatch(
    std::string_view ns, std::span<const BlockKey> objects, std::span<const uint64_t> sizes) {
  json body = {{"namespace", ns}, {"objects", KeyList(objects)}};
  if (!sizes.empty()) body["sizes"] = std::vector<uint64_t>(sizes.begin(), sizes.end());
  // Safe to send again with the sizes: an end that was applied finds its own work done.
  auto j = Call("POST", "/v1/put/batch_end", &body, /*idempotent=*/!sizes.empty());
  if (!j.ok()) return j.status();
  const json& results = (*j)["results"];
  if (!results.is_array() || results.size() != objects.size()) {
    return absl::InternalError("the master's put/batch_end answer does not have one result per object");
  }
  std::vector<absl::Status> out;
  out.reserve(objects.size());
  for (const json& r : results) {
    out.push_back(r.value("completed", false) ? absl::OkStatus() : ItemError(r));
  }
  return out;
}

absl::StatusOr<std::vector<Lookup>> MasterClient::Get(std::string_view ns, std::span<const BlockKey> keys) {
  const json body = {{"namespace", ns}, {"keys", KeyList(keys)}};
  auto j = Call("POST", "/v1/get", &body);
  if (!j.ok()) return j.status();
  const json& results = (*j)["results"];
  if (!results.is_array() || results.size() != keys.size()) {
    return absl::InternalError("the master's get answer does not have one result per key");
  }
  std::vector<Lookup> out;
  const auto ns_id = j->value("namespace_id", NamespaceId{0});
  for (size_t i = 0; i < keys.size(); ++i) {
    const json& r = results[i];
    Lookup l;
    l.namespace_id = ns_id;
    l.key = keys[i];
    l.found = r.value("found", false);
    l.pending = r.value("pending", false);
    if (l.found) {
      auto object = KeyOf(r, "object");
      if (!object.ok()) return object.status();
      l.object = *object;
      l.block = r.value("block", 0u);
      l.blocks = r.value("blocks", 0u);
      l.size = r.value("size", uint64_t{0});
      l.lease_until = r.value("lease_until_ns", Nanos{0});
      auto checksum = OptionalKeyOf(r, "checksum");
      if (!checksum.ok()) return checksum.status();
      l.checksum = *checksum;
      l.replicas = Replicas(r["replicas"]);
    }
    out.push_back(std::move(l));
  }
  return out;
}

absl::StatusOr<std::vector<bool>> MasterClient::Exists(std::string_view ns, std::span<const BlockKey> keys) {
  const json body = {{"namespace", ns}, {"keys", KeyList(keys)}};
  auto j = Call("POST", "/v1/exists", &body);
  if (!j.ok()) return j.status();
  const json& e = (*j)["exists"];
  if (!e.is_array() || e.size() != keys.size()) {
    return absl::InternalError("the master's exists answer does not have one result per key");
  }
  std::vector<bool> out;
  for (const json& b : e) out.push_back(b.is_boolean() && b.get<bool>());
  return out;
}

absl::StatusOr<std::vector<absl::Status>> MasterClient::Remove(std::string_view ns, std::span<const BlockKey> objects) {
  const json body = {{"namespace", ns}, {"keys", KeyList(objects)}};
  auto j = Call("POST", "/v1/remove", &body, /*idempotent=*/false);
  if (!j.ok()) return j.status();
  const json& results = (*j)["results"];
  if (!results.is_array() || results.size() != objects.size()) {
    return absl::InternalError("the master's remove answer does not have one result per key");
  }
  std::vector<absl::Status> out;
  for (const json& r : results) {
    if (r.value("removed", false)) {
      out.push_back(absl::OkStatus());
    } else {
      const json& e = r.contains("error") ? r["error"] : json::object();
      out.push_back(StatusFromHttp(e.value("status", 500), json{{"error", e}}.dump()));
    }
  }
  return out;
}

absl::StatusOr<std::vector<RepairTask>> MasterClient::PlanRepairs(size_t max_tasks) {
  const json body = {{"max_tasks", max_tasks}};
  auto j = Call("POST", "/v1/repairs/plan", &body, /*idempotent=*/false);
  if (!j.ok()) return j.status();
  std::vector<RepairTask> out;
  for (const json& t : (*j)["tasks"]) {
    RepairTask task;
    task.ns = t.value("namespace_id", NamespaceId{0});
    auto object = KeyOf(t, "object");
    if (!object.ok()) return object.status();
    task.object = *object;
    task.bytes = t.value("bytes", uint64_t{0});
    task.source = t.value("source", kNoNode);
    task.destination = t.value("destination", kNoNode);
    auto checksum = OptionalKeyOf(t, "checksum");
    if (!checksum.ok()) return checksum.status();
    task.checksum = *checksum;
    out.push_back(task);
  }
  return out;
}

absl::StatusOr<std::vector<RepairOrder>> MasterClient::PlanRepairOrders(size_t max_tasks) {
  const json body = {{"max_tasks", max_tasks}};
  auto j = Call("POST", "/v1/repairs/plan", &body);
  if (!j.ok()) return j.status();
  std::vector<RepairOrder> out;
  for (const json& t : (*j)["tasks"]) {
    RepairOrder order;
    order.task.ns = t.value("namespace_id", NamespaceId{0});
    auto object = KeyOf(t, "object");
    if (!object.ok()) return object.status();
    order.task.object = *object;
    order.task.bytes = t.value("bytes", uint64_t{0});
    order.task.source = t.value("source", kNoNode);
    order.task.destination = t.value("destination", kNoNode);
    auto checksum = OptionalKeyOf(t, "checksum");
    if (!checksum.ok()) return checksum.status();
    order.task.checksum = *checksum;
    order.source_address = t.value("source_address", std::string());
    order.destination_address = t.value("destination_address", std::string());
    out.push_back(std::move(order));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> MasterClient::NodeAddresses() {
  auto j = Call("GET", "/v1/nodes", nullptr);
  if (!j.ok()) return j.status();
  if (!j->contains("nodes") || !(*j)["nodes"].is_array()) {
    return absl::InternalError("the master's node list has no 'nodes' array");
  }
  std::vector<std::string> out;
  for (const json& n : (*j)["nodes"]) {
    if (!n.is_object()) continue;
    std::string address = n.value("address", std::string());
    if (!address.empty()) out.push_back(std::move(address));
  }
  return out;
}

absl::StatusOr<std::vector<uint32_t>> MasterClient::Reconcile(NodeId node,
                                                              std::span<const HeldObject> held) {
  json namespaces = json::array(), objects = json::array();
  for (const HeldObject& h : held) {
    namespaces.push_back(h.ns);
    objects.push_back(api::FormatKey(h.object));
  }
  const json body = {{"namespaces", std::move(namespaces)}, {"objects", std::move(objects)}};
  auto j = Call("POST", fmt::format("/v1/nodes/{}/reconcile", node), &body);
  if (!j.ok()) return j.status();
  std::vector<uint32_t> drop;
  if (!j->contains("drop") || !(*j)["drop"].is_array()) {
    return absl::InternalError("the master's reconcile answer has no 'drop' list");
  }
  for (const json& i : (*j)["drop"]) {
    if (!i.is_number_unsigned() || i.get<uint64_t>() >= held.size()) {
      return absl::InternalError("the master's reconcile answer has a bad index");
    }
    drop.push_back(i.get<uint32_t>());
  }
  return drop;
}

namespace {

json TaskJson(const RepairTask& t) {
  return {{"namespace_id", t.ns}, {"object", api::FormatKey(t.object)}, {"bytes", t.bytes},
          {"source", t.source}, {"destination", t.destination}};
}

}  // namespace

absl::Status MasterClient::RepairDone(const RepairTask& task) {
  const json body = TaskJson(task);
  return Call("POST", "/v1/repairs/done", &body).status();
}

absl::Status MasterClient::RepairFailed(const RepairTask& task) {
  const json body = TaskJson(task);
  return Call("POST", "/v1/repairs/failed", &body).status();
}

absl::StatusOr<nlohmann::json> MasterClient::Stats() { return Call("GET", "/v1/stats", nullptr); }

}  // namespace myriad::kvstore
