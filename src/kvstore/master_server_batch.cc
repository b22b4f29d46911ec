// MasterServer's batched put: a client writing many objects (an engine offloading a batch of
// evicted blocks) places them all in one call and ends them all in another, instead of two
// round trips to the master per object. The body is columnar so it parses with the same field
// getters as the single calls (and names the field in error):
//   batch_start {"namespace", "keys": [every put's keys, concatenated], "blocks": [keys per put],
//                "sizes": [bytes per put], "checksums": [one per put, optional], "replicas",
//                "pinned", "avoid"} -> {"namespace_id", "results": [{"object", "replicas"} or
//                {"object", "error"}]}
//   batch_end   {"namespace", "objects": [...], "sizes": [optional, one per object]}
//                -> {"results": [{"object", "completed": true} or {"object", "error"}]}
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kvstore/api_json.h"
#include "kvstore/master_server.h"

namespace myriad::kvstore {

using api::ErrorType;
using api::FormatKey;
using nlohmann::json;

namespace {

std::string ErrorJson(const absl::Status& st) {
  const int http = api::HttpStatusOf(st.code());
  return json{{"message", std::string(st.message())},
              {"type", api::ErrorTypeName(api::ErrorTypeOfStatus(http))},
              {"status", http}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

net::HttpResponse BadField(const char* field, std::string message) {
  return api::Error(400, ErrorType::kInvalidRequest, message, field);
}

}  // namespace

net::HttpResponse MasterServer::PutBatchStart(const net::HttpRequest& request) {
  api::Fields f;
  std::string ns;
  std::vector<BlockKey> keys, checksums;
  std::vector<uint64_t> blocks, sizes, avoid_ids;
  uint64_t replicas = 1;
  bool pinned = false;
  if (!f.Parse(request.body) || !f.String("namespace", &ns) ||
      !f.Keys("keys", kMaxBatchKeys, &keys) ||
      !f.OptionalUints("blocks", kMaxBatchPuts, kMaxBatchKeys, &blocks) ||
      !f.OptionalUints("sizes", kMaxBatchPuts, kMaxObjectBytes, &sizes) ||
      !f.OptionalKeys("checksums", kMaxBatchPuts, &checksums) ||
      !f.OptionalUint("replicas", kMaxReplicas, &replicas) || !f.OptionalBool("pinned", &pinned) ||
      !f.OptionalUints("avoid", kMaxAvoidNodes, kNoNode - 1, &avoid_ids)) {
    return f.error();
  }
  if (blocks.empty()) {
    return BadField("blocks", fmt::format("field 'blocks' must list the keys of each put (1 to {} puts)",
                                          kMaxBatchPuts));
  }
  if (sizes.size() != blocks.size()) {
    return BadField("sizes", fmt::format("field 'sizes' has {} entries for {} puts; give one per put",
                                         sizes.size(), blocks.size()));
  }
  if (!checksums.empty() && checksums.size() != blocks.size()) {
    return BadField("checksums",
                    fmt::format("field 'checksums' has {} entries for {} puts; give one per put or none",
                                checksums.size(), blocks.size()));
  }
  uint64_t total = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i] == 0) {
      return BadField("blocks", fmt::format("blocks[{}] is 0; every put has at least one key", i));
    }
    total += blocks[i];
  }
  if (total != keys.size()) {
    return BadField("blocks", fmt::format("field 'blocks' adds up to {} keys but 'keys' has {}",
                                          total, keys.size()));
  }
  const std::vector<NodeId> avoid(avoid_ids.begin(), avoid_ids.end());
  std::vector<PutRequest> puts(blocks.size());
  for (size_t i = 0, at = 0; i < blocks.size(); at += blocks[i], ++i) {
    puts[i] = {keys.data() + at, static_cast<uint32_t>(blocks[i]), sizes[i],
               static_cast<int>(replicas), pinned, avoid, checksums.empty() ? 0 : checksums[i]};
  }
  const Nanos now = clock_->Now();
  std::vector<absl::StatusOr<ReplicaList>> placed;
  std::vector<std::string> replicas_json(puts.size());
  NamespaceId ns_id = 0;
  {
    std::lock_guard lock(mu_);
    absl::StatusOr<NamespaceId> id = master_.FindNamespace(ns);
    if (!id.ok()) return api::StatusError(id.status(), "namespace");
    ns_id = *id;
    if (absl::Status st = master_.BatchPutStart(*id, puts, now, &placed); !st.ok()) {
      return api::StatusError(st);
    }
    for (size_t i = 0; i < puts.size(); ++i) {
      if (placed[i].ok()) replicas_json[i] = ReplicasJson(*placed[i]);
    }
  }
  std::string body = fmt::format(R"({{"namespace_id":{},"results":[)", ns_id);
  for (size_t i = 0; i < puts.size(); ++i) {
    if (i > 0) body += ',';
    const BlockKey object = puts[i].keys[puts[i].blocks - 1];
    if (placed[i].ok()) {
      fmt::format_to(std::back_inserter(body), R"({{"object":"{}","replicas":{}}})",
                     FormatKey(object), replicas_json[i]);
    } else {
      fmt::format_to(std::back_inserter(body), R"({{"object":"{}","error":{}}})", FormatKey(object),
                     ErrorJson(placed[i].status()));
    }
  }
  body += "]}";
  net::HttpResponse r;
  r.body = std::move(body);
  return r;
}

net::HttpResponse MasterServer::PutBatchEnd(const net::HttpRequest& request) {
  api::Fields f;
  std::string ns;
  std::vector<BlockKey> objects;
  std::vector<uint64_t> sizes;
  if (!f.Parse(request.body) || !f.String("namespace", &ns) ||
      !f.Keys("objects", kMaxBatchPuts, &objects) ||
      !f.OptionalUints("sizes", kMaxBatchPuts, kMaxObjectBytes, &sizes)) {
    return f.error();
  }
  if (!sizes.empty() && sizes.size() != objects.size()) {
    return BadField("sizes", fmt::format("field 'sizes' has {} entries for {} objects; give one "
                                         "per object or none",
                                         sizes.size(), objects.size()));
  }
  std::vector<absl::Status> ended;
  {
    std::lock_guard lock(mu_);
    absl::StatusOr<NamespaceId> id = master_.FindNamespace(ns);
    if (!id.ok()) return api::StatusError(id.status(), "namespace");
    if (absl::Status st = master_.BatchPutEnd(*id, objects, &ended, sizes); !st.ok()) {
      return api::StatusError(st);
    }
  }
  std::string body = R"({"results":[)";
  for (size_t i = 0; i < objects.size(); ++i) {
    if (i > 0) body += ',';
    if (ended[i].ok()) {
      fmt::format_to(std::back_inserter(body), R"({{"object":"{}","completed":true}})",
                     FormatKey(objects[i]));
    } else {
      fmt::format_to(std::back_inserter(body), R"({{"object":"{}","error":{}}})",
                     FormatKey(objects[i]), ErrorJson(ended[i]));
    }
  }
  body += "]}";
  net::HttpResponse r;
  r.body = std::move(body);
  return r;
}

}  // namespace myriad::kvstore
