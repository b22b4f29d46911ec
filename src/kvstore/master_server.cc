// MasterServer: routing, the JSON handlers, housekeeping and metrics. Handlers hold mu_ only
// around the master calls; JSON is parsed before and written after, outside the lock, so the
// lock's hold time is the master's own work.
#include "kvstore/master_server.h"

#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "kvstore/api_json.h"
#include "kvstore/auth.h"
#include "net/prometheus.h"
#include "net/url_path.h"

namespace myriad::kvstore {

using api::ErrorType;
using api::Fields;
using api::FormatKey;
using nlohmann::json;

namespace {

std::string_view OpName(MasterOp op) {
  switch (op) {
    case MasterOp::kRegisterNode: return "register_node";
    case MasterOp::kHeartbeat: return "heartbeat";
    case MasterOp::kCreateNamespace: return "create_namespace";
    case MasterOp::kDropNamespace: return "drop_namespace";
    case MasterOp::kPutStart: return "put_start";
    case MasterOp::kPutEnd: return "put_end";
    case MasterOp::kPutRevoke: return "put_revoke";
    case MasterOp::kGet: return "get";
    case MasterOp::kExists: return "exists";
    case MasterOp::kRemove: return "remove";
    case MasterOp::kStats: return "stats";
    case MasterOp::kMetrics: return "metrics";
    case MasterOp::kHealth: return "health";
    case MasterOp::kRepairPlan: return "repair_plan";
    case MasterOp::kRepairReport: return "repair_report";
    case MasterOp::kReconcile: return "reconcile";
    case MasterOp::kListNodes: return "list_nodes";
    case MasterOp::kPutBatchStart: return "put_batch_start";
    case MasterOp::kPutBatchEnd: return "put_batch_end";
    case MasterOp::kUnknown:
    case MasterOp::kCount: break;
  }
  return "unknown";
}

net::HttpResponse MethodNotAllowed(std::string_view method, std::string_view path,
                                   std::string_view allow) {
  net::HttpResponse r = api::Error(405, ErrorType::kMethodNotAllowed,
                                   fmt::format("{} is not allowed on {}; use {}", method, path,
                                               allow));
  r.headers.emplace_back("Allow", std::string(allow));
  return r;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

MasterServer::MasterServer(MasterServerOptions options)
    : options_(std::move(options)),
      clock_(OrDefaultClock(options_.clock)),
      master_(options_.master),
      http_(options_.http, [this](const net::HttpRequest& r) { return Handle(r); }),
      tick_sleeper_(clock_->NewSleeper()) {}

MasterServer::~MasterServer() { Stop(); }

absl::Status MasterServer::Start() {
  if (absl::Status st = http_.Start(); !st.ok()) return st;
  ticker_ = std::thread([this, started = clock_->Now()] { TickLoop(started); });
  return absl::OkStatus();
}

void MasterServer::Stop() {
  tick_stop_ = true;
  tick_sleeper_->Wake();
  if (ticker_.joinable()) ticker_.join();
  http_.Stop();
}

void MasterServer::TickLoop(Nanos started) {
  // The next tick is due an interval after the last one began: time that jumps during a tick
  // (a ManualClock's Advance) brings the next one at once instead of an interval later.
  Nanos last = started;
  while (!tick_stop_.load()) {
    tick_sleeper_->SleepUntil(last + options_.tick_interval);
    if (tick_stop_.load()) break;
    last = clock_->Now();
    Tick();
    TakeLog();  // nobody replicates a server run alone: drop the records
  }
}

void MasterServer::Tick() {
  const Nanos now = clock_->Now();
  std::lock_guard lock(mu_);
  // Tick removes the nodes it declares dead; note which they are first, for /metrics.
  for (NodeId id : master_.nodes().Expired(now, options_.master.dead_after)) dead_.insert(id);
  const TickReport report = master_.Tick(now);
  nodes_declared_dead_ += static_cast<uint64_t>(report.nodes_declared_dead);
  puts_expired_ += report.puts_expired;
  namespaces_reclaimed_ += report.namespaces_reclaimed;
}

net::HttpResponse MasterServer::Handle(const net::HttpRequest& request) {
  MasterOp op = MasterOp::kUnknown;
  net::HttpResponse response = Route(request, &op);
  const int i = static_cast<int>(op);
  requests_[i].fetch_add(1, std::memory_order_relaxed);
  if (response.status >= 400) {
    const int type = static_cast<int>(api::ErrorTypeOfStatus(response.status));
    errors_[i][type].fetch_add(1, std::memory_order_relaxed);
  }
  return response;
}

net::HttpResponse MasterServer::Route(const net::HttpRequest& request, MasterOp* op) {
  const std::string_view path = request.path();
  const std::string_view method = request.method;
  const bool get = method == "GET", post = method == "POST";
  auto only = [&](bool ok, MasterOp o, std::string_view allow,
                  auto&& handle) -> net::HttpResponse {
    *op = o;
    if (!ok) return MethodNotAllowed(method, path, allow);
    return handle();
  };
  if (path == "/health") {
    return only(get, MasterOp::kHealth, "GET", [] { return api::Json(200, {{"status", "ok"}}); });
  }
  if (path == "/metrics") return only(get, MasterOp::kMetrics, "GET", [&] { return Metrics(); });
  if (!HttpAuthorized(request, options_.auth_token)) return Unauthorized();
  if (path == "/v1/stats") return only(get, MasterOp::kStats, "GET", [&] { return Stats(); });
  if (path == "/v1/nodes" && get) {
    return only(true, MasterOp::kListNodes, "GET, POST", [&] { return ListNodes(); });
  }
  if (path == "/v1/nodes") {
    return only(post, MasterOp::kRegisterNode, "GET, POST", [&] { return RegisterNode(request); });
  }
  if (StartsWith(path, "/v1/nodes/") && path.size() > 20 &&
      path.substr(path.size() - 10) == "/heartbeat") {
    const std::string_view id = path.substr(10, path.size() - 20);
    return only(post, MasterOp::kHeartbeat, "POST", [&] { return NodeHeartbeat(id); });
  }
  if (StartsWith(path, "/v1/nodes/") && path.size() > 20 &&
      path.substr(path.size() - 10) == "/reconcile") {
    const std::string_view id = path.substr(10, path.size() - 20);
    return only(post, MasterOp::kReconcile, "POST", [&] { return Reconcile(id, request); });
  }
  if (path == "/v1/namespaces") {
    return only(post, MasterOp::kCreateNamespace, "POST", [&] { return CreateNamespace(request); });
  }
  if (StartsWith(path, "/v1/namespaces/") && path.size() > 15) {
    return only(method == "DELETE", MasterOp::kDropNamespace, "DELETE",
                [&] { return DropNamespace(path.substr(15)); });
  }
  if (path == "/v1/put/start") {
    return only(post, MasterOp::kPutStart, "POST", [&] { return PutStart(request); });
  }
  if (path == "/v1/put/end") {
    return only(post, MasterOp::kPutEnd, "POST", [&] { return PutEndOrRevoke(request, true); });
  }
  if (path == "/v1/put/batch_start") {
    return only(post, MasterOp::kPutBatchStart, "POST", [&] { return PutBatchStart(request); });
  }
  if (path == "/v1/put/batch_end") {
    return only(post, MasterOp::kPutBatchEnd, "POST", [&] { return PutBatchEnd(request); });
  }
  if (path == "/v1/put/revoke") {
    return only(post, MasterOp::kPutRevoke, "POST",
                [&] { return PutEndOrRevoke(request, false); });
  }
  if (path == "/v1/get") return only(post, MasterOp::kGet, "POST", [&] { return Get(request); });
  if (path == "/v1/exists") {
    return only(post, MasterOp::kExists, "POST", [&] { return Exists(request); });
  }
  if (path == "/v1/remove") {
    return only(post, MasterOp::kRemove, "POST", [&] { return Remove(request); });
  }
  if (path == "/v1/repairs/plan") {
    return only(post, MasterOp::kRepairPlan, "POST", [&] { return RepairPlan(request); });
  }
  if (path == "/v1/repairs/done" || path == "/v1/repairs/failed") {
    return only(post, MasterOp::kRepairReport, "POST",
                [&] { return RepairReport(request, path == "/v1/repairs/done"); });
  }
  *op = MasterOp::kUnknown;
  return api::Error(404, ErrorType::kNotFound,
                    fmt::format("no route for {} {}", method, path));
}

// --- nodes and namespaces ---

net::HttpResponse MasterServer::RegisterNode(const net::HttpRequest& request) {
  Fields f;
  uint64_t id = 0, capacity = 0;
  std::string domain, address;
  if (!f.Parse(request.body) || !f.Uint("id", kNoNode - 1, &id) ||
      !f.String("fault_domain", &domain) || !f.Uint("capacity_bytes", kMaxNodeCapacityBytes, &capacity) ||
      !f.OptionalString("address", &address)) {
    return f.error();
  }
  if (capacity == 0) {
    return api::Error(400, ErrorType::kInvalidRequest, "field 'capacity_bytes' must be > 0",
                      "capacity_bytes");
  }
  const auto node = static_cast<NodeId>(id);
  const Nanos now = clock_->Now();
  std::lock_guard lock(mu_);
  if (absl::Status st = master_.AddNode(node, domain, capacity, now); !st.ok()) {
    return api::StatusError(st);
  }
  dead_.erase(node);
  if (address.empty()) {
    addresses_.erase(node);
  } else {
    addresses_[node] = address;
  }
  address_log_.emplace_back(node, address);  // replicated with the master's records
  return api::Json(201, {{"id", node}, {"fault_domain", domain}, {"capacity_bytes", capacity}});
}

net::HttpResponse MasterServer::NodeHeartbeat(std::string_view id_text) {
  std::optional<BlockKey> id = api::ParseKey(id_text);
  if (!id || *id >= kNoNode) {
    return api::Error(400, ErrorType::kInvalidRequest,
                      fmt::format("'{}' in the path is not a node id", id_text), "id");
  }
  const Nanos now = clock_->Now();
  std::lock_guard lock(mu_);
  if (absl::Status st = master_.Heartbeat(static_cast<NodeId>(*id), now); !st.ok()) {
    // A node declared dead is forgotten: it must register again (its replicas are gone).
    const bool dead = dead_.contains(static_cast<NodeId>(*id));
    return api::Error(404, ErrorType::kNotFound,
                      dead ? fmt::format("node {} was declared dead; register it again", *id)
                           : std::string(st.message()));
  }
  return api::Json(200, {{"id", *id}});
}

net::HttpResponse MasterServer::CreateNamespace(const net::HttpRequest& request) {
  Fields f;
  std::string name;
  if (!f.Parse(request.body) || !f.String("name", &name)) return f.error();
  std::lock_guard lock(mu_);
  absl::StatusOr<NamespaceId> id = master_.CreateNamespace(name);
  if (!id.ok()) return api::StatusError(id.status(), "name");
  ++namespaces_;
  return api::Json(201, {{"name", name}, {"id", *id}});
}

net::HttpResponse MasterServer::DropNamespace(std::string_view raw_name) {
  std::optional<std::string> name = net::PercentDecode(raw_name);
  if (!name) {
    return api::Error(400, ErrorType::kInvalidRequest,
                      fmt::format("bad percent-encoding in namespace name '{}'", raw_name),
                      "name");
  }
  std::lock_guard lock(mu_);
  absl::StatusOr<NamespaceId> id = master_.FindNamespace(*name);
  if (!id.ok()) return api::StatusError(id.status(), "name");
  if (absl::Status st = master_.DropNamespace(*id); !st.ok()) return api::StatusError(st);
  --namespaces_;
  return api::Json(200, {{"name", *name}, {"dropped", true}});
}

// --- objects ---

std::string MasterServer::ReplicasJson(const ReplicaList& replicas) const {
  json out = json::array();
  for (int i = 0; i < replicas.count; ++i) {
    const NodeId id = replicas.nodes[i];
    json r = {{"id", id}};
    if (master_.nodes().Find(id) != nullptr) {
      r["fault_domain"] = master_.nodes().DomainName(master_.nodes().DomainOf(id));
    }
    if (auto it = addresses_.find(id); it != addresses_.end()) r["address"] = it->second;
    out.push_back(std::move(r));
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

net::HttpResponse MasterServer::PutStart(const net::HttpRequest& request) {
  Fields f;
  std::string ns;
  std::vector<BlockKey> keys;
  uint64_t size = 0, replicas = 1;
  BlockKey checksum = 0;
  std::vector<uint64_t> avoid_ids;
  bool pinned = false;
  if (!f.Parse(request.body) || !f.String("namespace", &ns) ||
      !f.Keys("keys", kMaxBatchKeys, &keys) || !f.Uint("size", kMaxObjectBytes, &size) ||
      !f.OptionalUint("replicas", kMaxReplicas, &replicas) ||
      !f.OptionalBool("pinned", &pinned) ||
      !f.OptionalUints("avoid", kMaxAvoidNodes, kNoNode - 1, &avoid_ids) ||
      !f.OptionalKey("checksum", &checksum)) {
    return f.error();
  }
  const std::vector<NodeId> avoid(avoid_ids.begin(), avoid_ids.end());
  const PutRequest put{keys.data(), static_cast<uint32_t>(keys.size()), size,
                       static_cast<int>(replicas), pinned, avoid, checksum};
  const Nanos now = clock_->Now();
  std::string replicas_json;
  NamespaceId ns_id = 0;
  {
    std::lock_guard lock(mu_);
    absl::StatusOr<NamespaceId> id = master_.FindNamespace(ns);
    if (!id.ok()) return api::StatusError(id.status(), "namespace");
    ns_id = *id;
    absl::StatusOr<ReplicaList> placed = master_.PutStart(*id, put, now);
    if (!placed.ok()) return api::StatusError(placed.status());
    replicas_json = ReplicasJson(*placed);
  }
  // namespace_id: storage nodes name objects by (namespace id, object), ids never reused.
  net::HttpResponse r;
  r.body = fmt::format(R"({{"object":"{}","namespace_id":{},"replicas":{}}})",
                       FormatKey(keys.back()), ns_id, replicas_json);
  return r;
}

net::HttpResponse MasterServer::PutEndOrRevoke(const net::HttpRequest& request, bool end) {
  Fields f;
  std::string ns;
  BlockKey object = 0;
  uint64_t size = 0;  // put end: the writer's size, so a resent end of its own put succeeds
  if (!f.Parse(request.body) || !f.String("namespace", &ns) || !f.Key("object", &object) ||
      !f.OptionalUint("size", kMaxObjectBytes, &size)) {
    return f.error();
  }
  std::lock_guard lock(mu_);
  absl::StatusOr<NamespaceId> id = master_.FindNamespace(ns);
  if (!id.ok()) return api::StatusError(id.status(), "namespace");
  absl::Status st = end ? master_.PutEnd(*id, object, size) : master_.PutRevoke(*id, object);
  if (!st.ok()) return api::StatusError(st, "object");
  return api::Json(200, {{"object", FormatKey(object)}, {end ? "completed" : "revoked", true}});
}

namespace {

// A batch call's body, {"namespace": ..., "keys": [...]}: the 400 answer naming the bad field,
// or nothing when both parsed.
std::optional<net::HttpResponse> ParseBatch(const net::HttpRequest& request, std::string* ns,
                                            std::vector<BlockKey>* keys) {
  Fields f;
  if (!f.Parse(request.body) || !f.String("namespace", ns) || !f.Keys("keys", kMaxBatchKeys, keys)) {
    return f.error();
  }
  return std::nullopt;
}

}  // namespace

void MasterServer::CountKeys(MasterOp op, size_t keys, uint64_t hits) {
  keys_[static_cast<int>(op)].fetch_add(keys, std::memory_order_relaxed);
  hits_[static_cast<int>(op)].fetch_add(hits, std::memory_order_relaxed);
}

net::HttpResponse MasterServer::Get(const net::HttpRequest& request) {
  std::string ns;
  std::vector<BlockKey> keys;
  if (auto bad = ParseBatch(request, &ns, &keys)) return *bad;
  const Nanos now = clock_->Now();
  std::vector<GetResult> results;
  std::vector<std::string> replicas;
  NamespaceId ns_id = 0;
  {
    std::lock_guard lock(mu_);
    absl::StatusOr<NamespaceId> id = master_.FindNamespace(ns);
    if (!id.ok()) return api::StatusError(id.status(), "namespace");
    ns_id = *id;
    if (absl::Status st = master_.BatchGet(*id, keys, now, &results); !st.ok()) {
      return api::StatusError(st);
    }
    replicas.reserve(results.size());
    for (const GetResult& g : results) {
      replicas.push_back(g.code == absl::StatusCode::kOk ? ReplicasJson(g.replicas) : "[]");
    }
  }
  uint64_t hits = 0;
  std::string body = fmt::format(R"({{"namespace_id":{},"results":[)", ns_id);
  for (size_t i = 0; i < keys.size(); ++i) {
    const GetResult& g = results[i];
    if (i > 0) body += ',';
    if (g.code == absl::StatusCode::kOk) {
      ++hits;
      fmt::format_to(std::back_inserter(body),
                     R"({{"key":"{}","found":true,"object":"{}","block":{},"blocks":{},)"
                     R"("size":{},"lease_until_ns":{},"lease_ms":{},"replicas":{}{}}})",
                     FormatKey(keys[i]), FormatKey(g.object), g.block, g.blocks, g.size,
                     g.lease_until, (g.lease_until - now) / kMillisecond, replicas[i],
                     g.checksum != 0
                         ? fmt::format(R"(,"checksum":"{}")", FormatKey(g.checksum))
                         : std::string());
    } else {
      fmt::format_to(std::back_inserter(body), R"({{"key":"{}","found":false{}}})",
                     FormatKey(keys[i]),
                     g.code == absl::StatusCode::kUnavailable ? R"(,"pending":true)" : "");
    }
  }
  body += "]}";
  CountKeys(MasterOp::kGet, keys.size(), hits);
  net::HttpResponse r;
  r.body = std::move(body);
  return r;
}

net::HttpResponse MasterServer::Exists(const net::HttpRequest& request) {
  std::string ns;
  std::vector<BlockKey> keys;
  if (auto bad = ParseBatch(request, &ns, &keys)) return *bad;
  std::vector<uint8_t> found;
  {
    std::lock_guard lock(mu_);
    absl::StatusOr<NamespaceId> id = master_.FindNamespace(ns);
    if (!id.ok()) return api::StatusError(id.status(), "namespace");
    if (absl::Status st = master_.BatchExists(*id, keys, &found); !st.ok()) {
      return api::StatusError(st);
    }
  }
  uint64_t hits = 0;
  std::string body = R"({"exists":[)";
  body.reserve(body.size() + 6 * found.size() + 2);
  for (size_t i = 0; i < found.size(); ++i) {
    if (i > 0) body += ',';
    body += found[i] ? "true" : "false";
    hits += found[i] ? 1 : 0;
  }
  body += "]}";
  CountKeys(MasterOp::kExists, keys.size(), hits);
  net::HttpResponse r;
  r.body = std::move(body);
  return r;
}

net::HttpResponse MasterServer::Remove(const net::HttpRequest& request) {
  std::string ns;
  std::vector<BlockKey> keys;
  if (auto bad = ParseBatch(request, &ns, &keys)) return *bad;
  const Nanos now = clock_->Now();
  std::vector<absl::Status> statuses;
  {
    std::lock_guard lock(mu_);
    absl::StatusOr<NamespaceId> id = master_.FindNamespace(ns);
    if (!id.ok()) return api::StatusError(id.status(), "namespace");
    if (absl::Status st = master_.BatchRemove(*id, keys, now, &statuses); !st.ok()) {
      return api::StatusError(st);
    }
  }
  uint64_t removed = 0;
  json results = json::array();
  for (size_t i = 0; i < keys.size(); ++i) {
    json item = {{"key", FormatKey(keys[i])}, {"removed", statuses[i].ok()}};
    if (statuses[i].ok()) {
      ++removed;
    } else {
      const int http = api::HttpStatusOf(statuses[i].code());
      item["error"] = {{"message", std::string(statuses[i].message())},
                       {"type", api::ErrorTypeName(api::ErrorTypeOfStatus(http))},
                       {"status", http}};
    }
    results.push_back(std::move(item));
  }
  CountKeys(MasterOp::kRemove, keys.size(), removed);
  return api::Json(200, {{"results", std::move(results)}});
}

// --- observability ---

net::HttpResponse MasterServer::ListNodes() {
  json nodes = json::array();
  {
    std::lock_guard lock(mu_);
    for (const NodeInfo& n : master_.nodes().nodes()) {
      auto it = addresses_.find(n.id);
      nodes.push_back({{"id", n.id}, {"address", it == addresses_.end() ? "" : it->second}});
    }
  }
  return api::Json(200, {{"nodes", std::move(nodes)}});
}

net::HttpResponse MasterServer::Stats() {
  const Nanos now = clock_->Now();
  json out;
  {
    std::lock_guard lock(mu_);
    const KvMasterStats s = master_.stats();
    json nodes = json::array();
    for (const NodeInfo& n : master_.nodes().nodes()) {
      nodes.push_back({{"id", n.id},
                       {"fault_domain", master_.nodes().DomainName(n.domain)},
                       {"capacity_bytes", n.capacity},
                       {"used_bytes", n.used},
                       {"heartbeat_age_ms", (now - n.last_heartbeat) / kMillisecond}});
    }
    out = {{"objects", s.objects},
           {"blocks", s.blocks},
           {"pending", s.pending},
           {"objects_lost", s.objects_lost},
           {"objects_evicted", s.objects_evicted},
           {"repair_queue", s.repair_queue},
           {"repairs_in_flight", s.repairs_in_flight},
           {"repair_bytes_issued", s.repair_bytes_issued},
           {"capacity_bytes", master_.nodes().total_capacity()},
           {"used_bytes", master_.nodes().total_used()},
           {"nodes_alive", master_.nodes().nodes().size()},
           {"nodes_dead", dead_.size()},
           {"namespaces", namespaces_},
           {"metadata_bytes", master_.memory_bytes()},
           {"nodes", std::move(nodes)}};
  }
  return api::Json(200, out);
}

net::HttpResponse MasterServer::Metrics() {
  KvMasterStats s;
  uint64_t capacity = 0, used = 0, alive = 0, dead = 0, declared_dead = 0, expired = 0;
  uint64_t memory = 0;
  int64_t namespaces = 0;
  {
    std::lock_guard lock(mu_);
    s = master_.stats();
    capacity = master_.nodes().total_capacity();
    used = master_.nodes().total_used();
    alive = master_.nodes().nodes().size();
    dead = dead_.size();
    declared_dead = nodes_declared_dead_;
    expired = puts_expired_;
    memory = master_.memory_bytes();
    namespaces = namespaces_;
  }
  using net::MetricType;
  net::PrometheusWriter w;
  w.Gauge("myriad_kvstore_objects", "Objects (runs of blocks), pending puts included",
          static_cast<double>(s.objects));
  w.Gauge("myriad_kvstore_blocks", "Blocks in the stored objects", static_cast<double>(s.blocks));
  w.Gauge("myriad_kvstore_pending_objects", "Objects whose put has started and not ended",
          static_cast<double>(s.pending));
  w.Gauge("myriad_kvstore_used_bytes", "Bytes placed on storage nodes, all replicas",
          static_cast<double>(used));
  w.Gauge("myriad_kvstore_capacity_bytes", "Capacity of the live storage nodes",
          static_cast<double>(capacity));
  w.Gauge("myriad_kvstore_namespaces", "Live namespaces", static_cast<double>(namespaces));
  w.Gauge("myriad_kvstore_metadata_bytes", "Heap bytes of the master's metadata",
          static_cast<double>(memory));
  w.Family("myriad_kvstore_nodes", "Storage nodes by state (dead: declared dead, not back)",
           MetricType::kGauge);
  w.Sample("myriad_kvstore_nodes", {{"state", "alive"}}, alive);
  w.Sample("myriad_kvstore_nodes", {{"state", "dead"}}, dead);
  w.Counter("myriad_kvstore_nodes_declared_dead_total", "Nodes declared dead by the heartbeat check",
            declared_dead);
  w.Counter("myriad_kvstore_evictions_total", "Objects evicted between the watermarks",
            s.objects_evicted);
  w.Counter("myriad_kvstore_objects_lost_total", "Objects removed because their last replica died",
            s.objects_lost);
  w.Counter("myriad_kvstore_puts_expired_total", "Pending puts revoked after the put timeout",
            expired);
  w.Gauge("myriad_kvstore_repair_queue", "Objects queued for re-replication",
          static_cast<double>(s.repair_queue));
  w.Gauge("myriad_kvstore_repairs_in_flight", "Repair copies handed out and not yet reported",
          static_cast<double>(s.repairs_in_flight));
  w.Counter("myriad_kvstore_repair_bytes_total", "Bytes of repair copies handed out",
            s.repair_bytes_issued);

  w.Family("myriad_kvstore_requests_total", "API requests by operation", MetricType::kCounter);
  for (int i = 0; i < kOps; ++i) {
    w.Sample("myriad_kvstore_requests_total", {{"op", OpName(static_cast<MasterOp>(i))}},
             requests_[i].load(std::memory_order_relaxed));
  }
  w.Family("myriad_kvstore_errors_total", "API error answers by operation and error type",
           MetricType::kCounter);
  for (int i = 0; i < kOps; ++i) {
    for (int t = 0; t < kErrorTypes; ++t) {
      const uint64_t n = errors_[i][t].load(std::memory_order_relaxed);
      if (n == 0) continue;  // bounded anyway; zeros would only pad the exposition
      w.Sample("myriad_kvstore_errors_total",
               {{"op", OpName(static_cast<MasterOp>(i))},
                {"type", api::ErrorTypeName(static_cast<ErrorType>(t))}},
               n);
    }
  }
  w.Family("myriad_kvstore_keys_total", "Keys in batched requests by operation",
           MetricType::kCounter);
  for (MasterOp op : {MasterOp::kGet, MasterOp::kExists, MasterOp::kRemove}) {
    const int i = static_cast<int>(op);
    w.Sample("myriad_kvstore_keys_total", {{"op", OpName(op)}},
             keys_[i].load(std::memory_order_relaxed));
  }
  w.Family("myriad_kvstore_key_hits_total",
           "Keys found (get, exists) or removed (remove) by operation", MetricType::kCounter);
  for (MasterOp op : {MasterOp::kGet, MasterOp::kExists, MasterOp::kRemove}) {
    const int i = static_cast<int>(op);
    w.Sample("myriad_kvstore_key_hits_total", {{"op", OpName(op)}},
             hits_[i].load(std::memory_order_relaxed));
  }

  const net::HttpServerStats h = http_.stats();
  w.Gauge("myriad_http_connections", "Open HTTP connections",
          static_cast<double>(http_.connections()));
  w.Counter("myriad_http_connections_accepted_total", "HTTP connections accepted",
            h.connections_accepted);
  w.Family("myriad_http_rejected_total",
           "Requests the HTTP layer answered or dropped itself, by reason", MetricType::kCounter);
  w.Sample("myriad_http_rejected_total", {{"reason", "too_many_connections"}},
           h.connections_refused);
  w.Sample("myriad_http_rejected_total", {{"reason", "malformed"}}, h.bad_requests);
  w.Sample("myriad_http_rejected_total", {{"reason", "body_too_large"}}, h.bodies_too_large);
  w.Sample("myriad_http_rejected_total", {{"reason", "header_too_large"}}, h.headers_too_large);
  w.Sample("myriad_http_rejected_total", {{"reason", "timeout"}}, h.timeouts);
  w.Sample("myriad_http_rejected_total", {{"reason", "handler_failed"}}, h.handler_failures);

  net::HttpResponse r;
  r.content_type = std::string(net::kPrometheusContentType);
  r.body = w.Take();
  return r;
}

}  // namespace myriad::kvstore

namespace myriad::kvstore {

// --- repair ---

net::HttpResponse MasterServer::RepairPlan(const net::HttpRequest& request) {
  Fields f;
  uint64_t max_tasks = 64;
  if (!f.Parse(request.body.empty() ? std::string_view("{}") : std::string_view(request.body)) ||
      !f.OptionalUint("max_tasks", 4096, &max_tasks)) {
    return f.error();
  }
  const Nanos now = clock_->Now();
  std::lock_guard lock(mu_);
  const std::vector<RepairTask> tasks = master_.PlanRepairs(now, static_cast<size_t>(max_tasks));
  nlohmann::json list = nlohmann::json::array();
  for (const RepairTask& t : tasks) {
    nlohmann::json task = {{"namespace_id", t.ns}, {"object", FormatKey(t.object)},
                           {"bytes", t.bytes}, {"source", t.source},
                           {"destination", t.destination}};
    if (t.checksum != 0) task["checksum"] = FormatKey(t.checksum);
    // Where the agent sends the copy order and where the bytes go (data path addresses).
    if (auto it = addresses_.find(t.source); it != addresses_.end()) {
      task["source_address"] = it->second;
    }
    if (auto it = addresses_.find(t.destination); it != addresses_.end()) {
      task["destination_address"] = it->second;
    }
    list.push_back(std::move(task));
  }
  return api::Json(200, {{"tasks", std::move(list)}});
}

net::HttpResponse MasterServer::RepairReport(const net::HttpRequest& request, bool done) {
  Fields f;
  uint64_t ns = 0, source = 0, destination = 0, bytes = 0;
  RepairTask t;
  if (!f.Parse(request.body) || !f.Uint("namespace_id", UINT32_MAX, &ns) || !f.Key("object", &t.object) ||
      !f.Uint("source", kNoNode - 1, &source) || !f.Uint("destination", kNoNode - 1, &destination) ||
      !f.OptionalUint("bytes", UINT64_MAX, &bytes)) {
    return f.error();
  }
  t.ns = static_cast<NamespaceId>(ns);
  t.source = static_cast<NodeId>(source);
  t.destination = static_cast<NodeId>(destination);
  t.bytes = bytes;
  std::lock_guard lock(mu_);
  const absl::Status st = done ? master_.RepairDone(t) : master_.RepairFailed(t);
  if (!st.ok()) return api::StatusError(st, "object");
  return api::Json(200, {{"object", FormatKey(t.object)}, {done ? "done" : "failed", true}});
}

}  // namespace myriad::kvstore
