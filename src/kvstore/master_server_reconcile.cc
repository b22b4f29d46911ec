// MasterServer::Reconcile: a storage node lists objects it holds, the master answers which of
// them it no longer places there (evicted, removed, revoked, repair failed, namespace gone), so
// the node frees their bytes. See KvMaster::HeldBy and kvstore/storage_node.h.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "kvstore/api_json.h"
#include "kvstore/master_server.h"

namespace myriad::kvstore {

namespace {
// Per request; a node with more objects sweeps them over several requests.
constexpr size_t kMaxReconcileObjects = size_t{1} << 16;
}  // namespace

net::HttpResponse MasterServer::Reconcile(std::string_view id_text,
                                          const net::HttpRequest& request) {
  using api::ErrorType;
  std::optional<BlockKey> id = api::ParseKey(id_text);
  if (!id || *id >= kNoNode) {
    return api::Error(400, ErrorType::kInvalidRequest,
                      fmt::format("'{}' in the path is not a node id", id_text), "id");
  }
  const nlohmann::json body = nlohmann::json::parse(request.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return api::Error(400, ErrorType::kInvalidRequest, "the body is not a JSON object");
  }
  auto field = [&](const char* name) -> const nlohmann::json* {
    auto it = body.find(name);
    return it == body.end() || !it->is_array() ? nullptr : &*it;
  };
  const nlohmann::json* namespaces = field("namespaces");
  const nlohmann::json* objects = field("objects");
  if (namespaces == nullptr) {
    return api::Error(400, ErrorType::kInvalidRequest, "field 'namespaces' must be an array",
                      "namespaces");
  }
  if (objects == nullptr || objects->size() != namespaces->size()) {
    return api::Error(400, ErrorType::kInvalidRequest,
                      "field 'objects' must be an array as long as 'namespaces'", "objects");
  }
  if (objects->size() > kMaxReconcileObjects) {
    return api::Error(400, ErrorType::kInvalidRequest,
                      fmt::format("field 'objects' has {} entries; at most {} per request",
                                  objects->size(), kMaxReconcileObjects),
                      "objects");
  }
  std::vector<HeldObject> held(objects->size());
  for (size_t i = 0; i < held.size(); ++i) {
    const nlohmann::json& n = (*namespaces)[i];
    if (!n.is_number_unsigned() || n.get<uint64_t>() > UINT32_MAX) {
      return api::Error(400, ErrorType::kInvalidRequest,
                        fmt::format("namespaces[{}] is not a namespace id", i), "namespaces");
    }
    const nlohmann::json& o = (*objects)[i];
    std::optional<BlockKey> key =
        o.is_string() ? api::ParseKey(o.get<std::string>()) : std::nullopt;
    if (!key) {
      return api::Error(400, ErrorType::kInvalidRequest,
                        fmt::format("objects[{}] is not a block key", i), "objects");
    }
    held[i] = {static_cast<NamespaceId>(n.get<uint64_t>()), *key};
  }
  std::vector<uint8_t> keep;
  {
    std::lock_guard lock(mu_);
    const auto node = static_cast<NodeId>(*id);
    if (master_.nodes().Find(node) == nullptr) {
      // Unknown or declared dead: it must register first (then nothing it holds is placed).
      return api::Error(404, ErrorType::kNotFound,
                        fmt::format("node {} is not registered; register it again", node));
    }
    master_.HeldBy(node, held, &keep);
  }
  std::string out = R"({"drop":[)";
  bool first = true;
  for (size_t i = 0; i < keep.size(); ++i) {
    if (keep[i]) continue;
    fmt::format_to(std::back_inserter(out), "{}{}", first ? "" : ",", i);
    first = false;
  }
  out += "]}";
  net::HttpResponse r;
  r.body = std::move(out);
  return r;
}

}  // namespace myriad::kvstore
