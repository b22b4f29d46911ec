#include "gateway/config.h"


#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/config_file.h"
#include "absl/strings/escaping.h"
#include "core/strings.h"
#include "policy/tenant_fill.h"
#include "core/yaml_reader.h"
#include "gateway/rollout_state.h"
#include "net/http.h"
#include "net/http_server.h"
#include "net/kv_event_publisher.h"
#include "net/otlp_exporter.h"
#include "policy/rollout.h"

namespace myriad::gateway {

std::string_view RoleName(BackendRole role) {
  switch (role) {
    case BackendRole::kColocated: return "colocated";
    case BackendRole::kPrefill: return "prefill";
    case BackendRole::kDecode: return "decode";
  }
  return "?";
}

absl::Status ValidateBackend(const BackendConfig& b, std::string_view where) {
  if (b.name.empty()) return absl::InvalidArgumentError(fmt::format("{}: name: required", where));
  // The name goes into logs, JSON answers and Prometheus labels; from an etcd key it can be
  // any bytes.
  if (!IsValidUtf8(b.name) || std::any_of(b.name.begin(), b.name.end(), [](char c) {
        return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
      })) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: name: '{}' is not printable UTF-8", where, absl::CHexEscape(b.name)));
  }
  if (!IsValidUtf8(b.model)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: model: '{}' is not valid UTF-8", where, absl::CHexEscape(b.model)));
  }
  if (!net::ParseHttpUrl(b.url).ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: url: '{}' is not an http://host:port URL", where, b.url));
  }
  if (b.model.empty()) return absl::InvalidArgumentError(fmt::format("{}: model: required", where));
  for (auto [field, value] : {std::pair{"kv_events", &b.kv_events}, {"kv_replay", &b.kv_replay}}) {
    if (value->empty()) continue;
    if (absl::Status st = net::ValidateZmqConnectEndpoint(*value); !st.ok()) {
      return absl::InvalidArgumentError(fmt::format("{}: {}: {}", where, field, std::string(st.message())));
    }
  }
  // Each rank is a routing candidate, an index holder and (with kv_events) a subscription.
  if (b.dp_ranks < 1 || b.dp_ranks > kMaxDpRanks) {
    return absl::InvalidArgumentError(fmt::format("{}: dp_ranks: {} is not in [1, {}]", where, b.dp_ranks, kMaxDpRanks));
  }
  if (b.cache_slots < 0 || b.cache_slots > policy::kMaxEngineSlots) {
    return absl::InvalidArgumentError(
        fmt::format("{}: cache_slots: {} is not in [0, {}]", where, b.cache_slots, policy::kMaxEngineSlots));
  }
  if (b.cache_tokens < 0 || b.cache_tokens > policy::kMaxEngineCacheTokens) {
    return absl::InvalidArgumentError(
        fmt::format("{}: cache_tokens: {} is not in [0, {}]", where, b.cache_tokens, policy::kMaxEngineCacheTokens));
  }
  if (!b.version.empty()) {
    if (absl::Status st = policy::ValidateVersionName(b.version); !st.ok()) {
      return absl::InvalidArgumentError(fmt::format("{}: version: {}", where, std::string(st.message())));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateRollout(const RolloutConfig& ro, std::string_view where) {
  if (ro.model.empty()) return absl::InvalidArgumentError(fmt::format("{}: model: required", where));
  for (auto [field, v] : {std::pair{"stable", &ro.stable}, {"canary", &ro.canary}}) {
    if (absl::Status st = policy::ValidateVersionName(*v); !st.ok()) {
      return absl::InvalidArgumentError(fmt::format("{}: {}: {}", where, field, std::string(st.message())));
    }
  }
  if (ro.stable == ro.canary) {
    return absl::InvalidArgumentError(fmt::format("{}: canary: '{}' is the stable version too", where, ro.canary));
  }
  if (!std::isfinite(ro.share) || ro.share < 0 || ro.share > 1) {
    return absl::InvalidArgumentError(fmt::format("{}: share: {} is not in [0, 1]", where, ro.share));
  }
  return absl::OkStatus();
}

namespace {

absl::Status ParseRole(const YamlReader& r, const YAML::Node& n, const std::string& path,
                       BackendRole* out) {
  const YAML::Node v = n["role"];
  if (!v) return absl::OkStatus();
  const std::string s = v.as<std::string>("");
  if (s == "colocated") *out = BackendRole::kColocated;
  else if (s == "prefill") *out = BackendRole::kPrefill;
  else if (s == "decode") *out = BackendRole::kDecode;
  else return r.Error(v, path + ".role", fmt::format("'{}' is not prefill, decode or colocated", s));
  return absl::OkStatus();
}

absl::Status ParseTracing(const YamlReader& r, const YAML::Node& root, TracingConfig* t) {
  const YAML::Node n = root["tracing"];
  if (!n) return absl::OkStatus();
  const std::string p = "tracing";
  MYRIAD_RETURN_IF_ERROR(r.Map(n, p, {"endpoint", "service_name", "sample_ratio", "slow_threshold",
                                      "keep_rejected", "max_queue", "max_batch", "flush_interval",
                                      "export_timeout", "max_retries", "max_backoff",
                                      "max_spans_per_request"}));
  MYRIAD_RETURN_IF_ERROR(r.Get(n, "endpoint", p, &t->endpoint));
  if (!t->endpoint.empty() && !net::ParseHttpUrl(t->endpoint).ok()) {
    return r.Error(n["endpoint"], "tracing.endpoint", fmt::format("'{}' is not an http://host:port URL", t->endpoint));
  }
  MYRIAD_RETURN_IF_ERROR(r.Get(n, "service_name", p, &t->service_name));
  MYRIAD_RETURN_IF_ERROR(r.Check(n, "service_name", p, !t->service_name.empty() && t->service_name.size() <= 256 &&
                                                           IsValidUtf8(t->service_name),
                                 "must be 1 to 256 bytes of UTF-8", t->service_name));
  MYRIAD_RETURN_IF_ERROR(r.Get(n, "sample_ratio", p, &t->sample_ratio));
  MYRIAD_RETURN_IF_ERROR(r.Check(n, "sample_ratio", p,
                                 std::isfinite(t->sample_ratio) && t->sample_ratio >= 0 && t->sample_ratio <= 1,
                                 "must be in [0, 1]", t->sample_ratio));
  MYRIAD_RETURN_IF_ERROR(r.Duration(n, "slow_threshold", p, &t->slow_threshold));
  MYRIAD_RETURN_IF_ERROR(r.Check(n, "slow_threshold", p, t->slow_threshold >= 0 && t->slow_threshold <= kMaxSlowThreshold,
                                 "must be in [0s, 1h] (0: off)", FormatDuration(t->slow_threshold)));
  MYRIAD_RETURN_IF_ERROR(r.Get(n, "keep_rejected", p, &t->keep_rejected));
  MYRIAD_RETURN_IF_ERROR(r.Get(n, "max_queue", p, &t->max_queue));
  MYRIAD_RETURN_IF_ERROR(r.Check(n, "max_queue", p, t->max_queue >= 1 && t->max_queue <= net::kMaxOtlpQueueSpans,
                                 fmt::format("must be in [1, {}]", net::kMaxOtlpQueueSpans), t->max_queue));
  MYRIAD_RETURN_IF_ERROR(r.Get(n, "max_batch", p, &t->max_batch));
  MYRIAD_RETURN_IF_ERROR(r.Check(n, "max_batch", p, t->max_batch >= 1 && t->max_batch <= net::kMaxOtlpBatchSpans,
                                 fmt::format("must be in [1, {}]", net::kMaxOtlpBatchSpans), t->max_batch));
  for (auto [key, v] : {std::pair{"flush_interval", &t->flush_interval}, {"export_timeout", &t->export_timeout}}) {
    MYRIAD_RETURN_IF_ERROR(r.Duration(n, key, p, v));
    MYRIAD_RETURN_IF_ERROR(r.Check(n, key, p, *v >= kMillisecond && *v <= net::kMaxOtlpInterval,
                                   "must be in [1ms, 60s]", FormatDuration(*v)));
  }
  MYRIAD_RETURN_IF_ERROR(r.Duration(n, "max_backoff", p, &t->max_backoff));
  MYRIAD_RETURN_IF_ERROR(r.Check(n, "max_backoff", p, t->max_backoff >= 0 && t->max_backoff <= net::kMaxOtlpInterval,
                                 "must be in [0s, 60s]", FormatDuration(t->max_backoff)));
  MYRIAD_RETURN_IF_ERROR(r.Get(n, "max_retries", p, &t->max_retries));
  MYRIAD_RETURN_IF_ERROR(r.Check(n, "max_retries", p, t->max_retries >= 0 && t->max_retries <= net::kMaxOtlpRetries,
                                 fmt::format("must be in [0, {}]", net::kMaxOtlpRetries), t->max_retries));
  MYRIAD_RETURN_IF_ERROR(r.Get(n, "max_spans_per_request", p, &t->max_spans_per_request));
  MYRIAD_RETURN_IF_ERROR(r.Check(n, "max_spans_per_request", p,
                                 t->max_spans_per_request >= 2 && t->max_spans_per_request <= kMaxSpansPerRequest,
                                 fmt::format("must be in [2, {}]", kMaxSpansPerRequest), t->max_spans_per_request));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GatewayConfig> ParseGatewayConfig(std::string_view yaml, std::string_view source) {
  YamlReader r{std::string(source)};
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        fmt::format("{}:{}: {}", std::string(source), e.mark.line + 1, e.msg));
  }
  GatewayConfig c;
  if (!root || root.IsNull()) return c;
  MYRIAD_RETURN_IF_ERROR(r.UniqueKeys(root));
  MYRIAD_RETURN_IF_ERROR(r.Map(root, "", {"listen", "threads", "upstream_threads", "max_body_bytes",
                                          "admin_token", "backends", "routing", "tenants",
                                          "upstream", "health", "access_log", "etcd",
                                          "allow_anonymous", "fairness", "max_client_backlog_bytes",
                                          "client_write_timeout", "tracing", "rollouts",
                                          "rollout_state"}));
  MYRIAD_RETURN_IF_ERROR(r.Get(root, "max_client_backlog_bytes", "", &c.max_client_backlog_bytes));
  MYRIAD_RETURN_IF_ERROR(r.Duration(root, "client_write_timeout", "", &c.client_write_timeout));
  MYRIAD_RETURN_IF_ERROR(r.Get(root, "allow_anonymous", "", &c.allow_anonymous));
  MYRIAD_RETURN_IF_ERROR(r.Get(root, "fairness", "", &c.fairness));
  MYRIAD_RETURN_IF_ERROR(r.Get(root, "listen", "", &c.listen));
  MYRIAD_RETURN_IF_ERROR(r.Get(root, "threads", "", &c.threads));
  MYRIAD_RETURN_IF_ERROR(r.Check(root, "threads", "", c.threads >= 1 && c.threads <= net::kMaxHttpThreads,
                                 fmt::format("must be in [1, {}]", net::kMaxHttpThreads), c.threads));
  MYRIAD_RETURN_IF_ERROR(r.Get(root, "upstream_threads", "", &c.upstream_threads));
  MYRIAD_RETURN_IF_ERROR(r.Check(root, "upstream_threads", "",
                                 c.upstream_threads >= 0 && c.upstream_threads <= net::kMaxHttpThreads,
                                 fmt::format("must be in [0, {}]", net::kMaxHttpThreads), c.upstream_threads));
  MYRIAD_RETURN_IF_ERROR(r.Get(root, "max_body_bytes", "", &c.max_body_bytes));
  MYRIAD_RETURN_IF_ERROR(r.Check(root, "max_body_bytes", "", c.max_body_bytes >= 1024 && c.max_body_bytes <= kMaxBodyBytes,
                                 fmt::format("must be in [1024, {}]", kMaxBodyBytes), c.max_body_bytes));
  MYRIAD_RETURN_IF_ERROR(r.Check(root, "max_client_backlog_bytes", "",
                                 c.max_client_backlog_bytes >= 1 && c.max_client_backlog_bytes <= kMaxBodyBytes,
                                 fmt::format("must be in [1, {}]", kMaxBodyBytes), c.max_client_backlog_bytes));
  MYRIAD_RETURN_IF_ERROR(r.Get(root, "admin_token", "", &c.admin_token));
  MYRIAD_RETURN_IF_ERROR(r.Get(root, "access_log", "", &c.access_log));
  if (!net::ParseHostPort(c.listen).ok()) {
    return r.Error(root["listen"], "listen", fmt::format("'{}' is not HOST:PORT", c.listen));
  }

  std::set<std::string> names;
  if (const YAML::Node bs = root["backends"]) {
    if (!bs.IsSequence()) return r.Error(bs, "backends", "expected a list");
    for (size_t i = 0; i < bs.size(); ++i) {
      const std::string path = fmt::format("backends[{}]", i);
      const YAML::Node b = bs[i];
      MYRIAD_RETURN_IF_ERROR(r.Map(b, path, {"name", "url", "role", "model", "dp_ranks",
                                             "kv_events", "kv_replay", "cost_class", "cache_slots",
                                             "cache_tokens", "version"}));
      BackendConfig bc;
      MYRIAD_RETURN_IF_ERROR(r.Get(b, "name", path, &bc.name));
      MYRIAD_RETURN_IF_ERROR(r.Get(b, "url", path, &bc.url));
      MYRIAD_RETURN_IF_ERROR(r.Get(b, "model", path, &bc.model));
      MYRIAD_RETURN_IF_ERROR(r.Get(b, "dp_ranks", path, &bc.dp_ranks));
      MYRIAD_RETURN_IF_ERROR(r.Get(b, "kv_events", path, &bc.kv_events));
      MYRIAD_RETURN_IF_ERROR(r.Get(b, "kv_replay", path, &bc.kv_replay));
      MYRIAD_RETURN_IF_ERROR(r.Get(b, "cost_class", path, &bc.cost_class));
      MYRIAD_RETURN_IF_ERROR(r.Get(b, "cache_slots", path, &bc.cache_slots));
      MYRIAD_RETURN_IF_ERROR(r.Get(b, "cache_tokens", path, &bc.cache_tokens));
      MYRIAD_RETURN_IF_ERROR(r.Get(b, "version", path, &bc.version));
      MYRIAD_RETURN_IF_ERROR(ParseRole(r, b, path, &bc.role));
      if (absl::Status st = ValidateBackend(bc, path); !st.ok()) {
        return r.Error(b, path, std::string(st.message()).substr(path.size() + 2));
      }
      if (!names.insert(bc.name).second) {
        return r.Error(b["name"], path + ".name", fmt::format("duplicate backend name '{}'", bc.name));
      }
      c.backends.push_back(std::move(bc));
    }
  }

  MYRIAD_RETURN_IF_ERROR(r.Get(root, "rollout_state", "", &c.rollout_state));
  if (const YAML::Node ros = root["rollouts"]) {
    if (!ros.IsSequence()) return r.Error(ros, "rollouts", "expected a list");
    if (ros.size() > kMaxRollouts) {
      return r.Error(ros, "rollouts", fmt::format("{} rollouts; at most {}", ros.size(), kMaxRollouts));
    }
    std::set<std::string> models;
    for (size_t i = 0; i < ros.size(); ++i) {
      const std::string path = fmt::format("rollouts[{}]", i);
      const YAML::Node n = ros[i];
      MYRIAD_RETURN_IF_ERROR(r.Map(n, path, {"model", "stable", "canary", "share"}));
      RolloutConfig ro;
      MYRIAD_RETURN_IF_ERROR(r.Get(n, "model", path, &ro.model));
      MYRIAD_RETURN_IF_ERROR(r.Get(n, "stable", path, &ro.stable));
      MYRIAD_RETURN_IF_ERROR(r.Get(n, "canary", path, &ro.canary));
      MYRIAD_RETURN_IF_ERROR(r.Get(n, "share", path, &ro.share));
      if (absl::Status st = ValidateRollout(ro, path); !st.ok()) {
        // Point at the field the message names.
        const std::string msg(st.message());
        const std::string field = msg.substr(path.size() + 2, msg.find(':', path.size() + 2) - path.size() - 2);
        return r.Error(n[field] ? n[field] : n, path + "." + field, msg.substr(msg.find(':', path.size() + 2) + 2));
      }
      if (!models.insert(ro.model).second) {
        return r.Error(n["model"], path + ".model", fmt::format("a second rollout of model '{}'", ro.model));
      }
      c.rollouts.push_back(std::move(ro));
    }
  }

  if (const YAML::Node rt = root["routing"]) {
    MYRIAD_RETURN_IF_ERROR(r.Map(rt, "routing", {"policy", "ttft_slo", "tpot_slo", "reject_factor", "perf_model",
                                                 "perf_gpu", "perf_tp", "disagg_min_uncached",
                                                 "approx_chunk_bytes", "approx_ttl",
                                                 "index_max_entries", "kv_block_size", "seed",
                                                 "tokenizer", "tokenizer_config", "recompute_limit",
                                                 "learn_cost", "store_load_gbps", "store_load_latency"}));
    MYRIAD_RETURN_IF_ERROR(r.Get(rt, "tokenizer", "routing", &c.tokenizer));
    MYRIAD_RETURN_IF_ERROR(r.Get(rt, "learn_cost", "routing", &c.learn_cost));
    MYRIAD_RETURN_IF_ERROR(r.Get(rt, "tokenizer_config", "routing", &c.tokenizer_config));
    MYRIAD_RETURN_IF_ERROR(r.Get(rt, "kv_block_size", "routing", &c.kv_block_size));
    MYRIAD_RETURN_IF_ERROR(r.Check(rt, "kv_block_size", "routing", c.kv_block_size >= 1 && c.kv_block_size <= 4096,
                                   "must be in [1, 4096]", c.kv_block_size));
    MYRIAD_RETURN_IF_ERROR(r.Get(rt, "policy", "routing", &c.policy));
    if (auto p = policy::ParsePolicyName(c.policy); !p.ok()) {
      return r.Error(rt["policy"], "routing.policy", std::string(p.status().message()));
    }
    MYRIAD_RETURN_IF_ERROR(r.Duration(rt, "ttft_slo", "routing", &c.ttft_slo));
    MYRIAD_RETURN_IF_ERROR(r.Get(rt, "reject_factor", "routing", &c.reject_factor));
    MYRIAD_RETURN_IF_ERROR(r.Get(rt, "perf_model", "routing", &c.perf_model));
    MYRIAD_RETURN_IF_ERROR(r.Get(rt, "perf_gpu", "routing", &c.perf_gpu));
    MYRIAD_RETURN_IF_ERROR(r.Get(rt, "perf_tp", "routing", &c.perf_tp));
    MYRIAD_RETURN_IF_ERROR(r.Get(rt, "disagg_min_uncached", "routing", &c.disagg_min_uncached));
    MYRIAD_RETURN_IF_ERROR(r.Get(rt, "recompute_limit", "routing", &c.recompute_limit));
    MYRIAD_RETURN_IF_ERROR(r.Check(rt, "recompute_limit", "routing",
                                   std::isfinite(c.recompute_limit) && c.recompute_limit >= 0 &&
                                       c.recompute_limit <= kMaxRecomputeLimit,
                                   "must be in [0, 100] (x the backends' nominal prefill throughput)",
                                   c.recompute_limit));
    MYRIAD_RETURN_IF_ERROR(r.Get(rt, "store_load_gbps", "routing", &c.store_load_gbps));
    MYRIAD_RETURN_IF_ERROR(r.Check(rt, "store_load_gbps", "routing",
                                   std::isfinite(c.store_load_gbps) && c.store_load_gbps >= 0 &&
                                       c.store_load_gbps <= kMaxStoreLoadGbps,
                                   "must be in [0, 10000]", c.store_load_gbps));
    MYRIAD_RETURN_IF_ERROR(r.Duration(rt, "store_load_latency", "routing", &c.store_load_latency));
    MYRIAD_RETURN_IF_ERROR(r.Check(rt, "store_load_latency", "routing",
                                   c.store_load_latency >= 0 && c.store_load_latency <= kMaxStoreLoadLatency,
                                   "must be in [0s, 10s]", FormatDuration(c.store_load_latency)));
    MYRIAD_RETURN_IF_ERROR(r.Get(rt, "approx_chunk_bytes", "routing", &c.approx_chunk_bytes));
    MYRIAD_RETURN_IF_ERROR(r.Check(rt, "approx_chunk_bytes", "routing",
                                   c.approx_chunk_bytes >= 8 && c.approx_chunk_bytes <= (1 << 20),
                                   "must be in [8, 1048576]", c.approx_chunk_bytes));
    MYRIAD_RETURN_IF_ERROR(r.Duration(rt, "approx_ttl", "routing", &c.approx_ttl));
    MYRIAD_RETURN_IF_ERROR(r.Get(rt, "index_max_entries", "routing", &c.index_max_entries));
    MYRIAD_RETURN_IF_ERROR(r.Check(rt, "index_max_entries", "routing",
                                   c.index_max_entries >= 1 && c.index_max_entries <= kMaxIndexEntries,
                                   fmt::format("must be in [1, {}]", kMaxIndexEntries), c.index_max_entries));
    MYRIAD_RETURN_IF_ERROR(r.Check(rt, "ttft_slo", "routing", c.ttft_slo > 0, "must be > 0",
                                   FormatDuration(c.ttft_slo)));
    MYRIAD_RETURN_IF_ERROR(r.Duration(rt, "tpot_slo", "routing", &c.tpot_slo));
    MYRIAD_RETURN_IF_ERROR(r.Check(rt, "tpot_slo", "routing", c.tpot_slo >= kMillisecond && c.tpot_slo <= kMinute,
                                   "must be in [1ms, 1m]", FormatDuration(c.tpot_slo)));
    MYRIAD_RETURN_IF_ERROR(r.Check(rt, "reject_factor", "routing",
                                   std::isfinite(c.reject_factor) && c.reject_factor >= 0,
                                   "must be a finite number >= 0", c.reject_factor));
    MYRIAD_RETURN_IF_ERROR(r.Check(rt, "perf_tp", "routing", c.perf_tp >= 1 && c.perf_tp <= 64,
                                   "must be in [1, 64]", c.perf_tp));
    MYRIAD_RETURN_IF_ERROR(r.Get(rt, "seed", "routing", &c.seed));
  }

  if (const YAML::Node ts = root["tenants"]) {
    if (!ts.IsSequence()) return r.Error(ts, "tenants", "expected a list");
    std::set<std::string> keys;
    for (size_t i = 0; i < ts.size(); ++i) {
      const std::string path = fmt::format("tenants[{}]", i);
      const YAML::Node t = ts[i];
      MYRIAD_RETURN_IF_ERROR(r.Map(t, path, {"name", "api_keys", "weight", "priority",
                                             "quota_tokens_per_s", "burst_tokens", "fill"}));
      TenantEntry e;
      MYRIAD_RETURN_IF_ERROR(r.Get(t, "name", path, &e.config.name));
      if (e.config.name.empty()) return r.Error(t, path + ".name", "required");
      MYRIAD_RETURN_IF_ERROR(r.Get(t, "weight", path, &e.config.weight));
      MYRIAD_RETURN_IF_ERROR(r.Check(t, "weight", path, std::isfinite(e.config.weight) && e.config.weight > 0,
                                     "must be a finite number > 0", e.config.weight));
      MYRIAD_RETURN_IF_ERROR(r.Get(t, "priority", path, &e.config.priority));
      MYRIAD_RETURN_IF_ERROR(r.Get(t, "quota_tokens_per_s", path, &e.config.quota_tokens_per_s));
      MYRIAD_RETURN_IF_ERROR(r.Get(t, "burst_tokens", path, &e.config.burst_tokens));
      MYRIAD_RETURN_IF_ERROR(r.Check(t, "priority", path,
                                     e.config.priority >= policy::kMinTenantPriority &&
                                         e.config.priority <= policy::kMaxTenantPriority,
                                     fmt::format("must be in [{}, {}]", policy::kMinTenantPriority,
                                                 policy::kMaxTenantPriority),
                                     e.config.priority));
      bool fill = false;
      MYRIAD_RETURN_IF_ERROR(r.Get(t, "fill", path, &fill));
      if (fill) {
        // Fill is a class of its own, below every priority: one or the other.
        if (t["priority"]) return r.Error(t["priority"], path + ".priority", "a fill tenant has no priority");
        e.config.priority = policy::kFillPriority;
      }
      const YAML::Node ks = t["api_keys"];
      if (!ks || !ks.IsSequence() || ks.size() == 0) {
        return r.Error(ks ? ks : t, path + ".api_keys", "expected a non-empty list of keys");
      }
      for (const auto& k : ks) {
        const std::string key = k.as<std::string>("");
        if (key.empty()) return r.Error(k, path + ".api_keys", "empty key");
        if (!keys.insert(key).second) return r.Error(k, path + ".api_keys", "key used twice");
        e.api_keys.push_back(key);
      }
      c.tenants.push_back(std::move(e));
    }
  }

  if (const YAML::Node u = root["upstream"]) {
    MYRIAD_RETURN_IF_ERROR(r.Map(u, "upstream", {"connect_timeout", "first_byte_timeout",
                                                 "idle_timeout", "max_attempts", "retry_budget"}));
    MYRIAD_RETURN_IF_ERROR(r.Duration(u, "connect_timeout", "upstream", &c.connect_timeout));
    MYRIAD_RETURN_IF_ERROR(r.Duration(u, "first_byte_timeout", "upstream", &c.first_byte_timeout));
    // It also bounds how long a client's answer is held for its first token: zero would fail
    // every stream, and a day is longer than any generation.
    MYRIAD_RETURN_IF_ERROR(r.Check(u, "first_byte_timeout", "upstream",
                                   c.first_byte_timeout >= kMillisecond && c.first_byte_timeout <= 24 * 3600 * kSecond,
                                   "must be in [1ms, 24h]", FormatDuration(c.first_byte_timeout)));
    MYRIAD_RETURN_IF_ERROR(r.Duration(u, "idle_timeout", "upstream", &c.idle_timeout));
    MYRIAD_RETURN_IF_ERROR(r.Get(u, "max_attempts", "upstream", &c.max_attempts));
    MYRIAD_RETURN_IF_ERROR(r.Check(u, "max_attempts", "upstream", c.max_attempts >= 1 && c.max_attempts <= 16,
                                   "must be in [1, 16]", c.max_attempts));
    MYRIAD_RETURN_IF_ERROR(r.Get(u, "retry_budget", "upstream", &c.retry_budget));
    MYRIAD_RETURN_IF_ERROR(r.Check(u, "retry_budget", "upstream", c.retry_budget >= 0 && c.retry_budget <= 1,
                                   "must be in [0, 1]", c.retry_budget));
  }

  if (const YAML::Node h = root["health"]) {
    MYRIAD_RETURN_IF_ERROR(r.Map(h, "health", {"interval", "timeout", "eject_after_errors",
                                               "readmit_after_successes", "scrape_interval", "slots_interval"}));
    MYRIAD_RETURN_IF_ERROR(r.Duration(h, "interval", "health", &c.health_interval));
    MYRIAD_RETURN_IF_ERROR(r.Duration(h, "timeout", "health", &c.health_timeout));
    policy::BackendHealthOptions& bh = c.backend_health;
    MYRIAD_RETURN_IF_ERROR(r.Get(h, "eject_after_errors", "health", &bh.eject_after_errors));
    MYRIAD_RETURN_IF_ERROR(r.Get(h, "readmit_after_successes", "health", &bh.readmit_after_passing_checks));
    MYRIAD_RETURN_IF_ERROR(r.Duration(h, "scrape_interval", "health", &c.scrape_interval));
    MYRIAD_RETURN_IF_ERROR(r.Duration(h, "slots_interval", "health", &c.slots_interval));
    MYRIAD_RETURN_IF_ERROR(r.Check(h, "slots_interval", "health",
                                   c.slots_interval == 0 ||
                                       (c.slots_interval >= 100 * kMillisecond && c.slots_interval <= 3600 * kSecond),
                                   "must be 0 (off) or in [100ms, 1h]", FormatDuration(c.slots_interval)));
    MYRIAD_RETURN_IF_ERROR(r.Check(h, "interval", "health", c.health_interval > 0, "must be > 0",
                                   FormatDuration(c.health_interval)));
    MYRIAD_RETURN_IF_ERROR(r.Check(h, "eject_after_errors", "health",
                                   bh.eject_after_errors >= 1 && bh.eject_after_errors <= policy::kMaxHealthCount,
                                   "must be in [1, 1000]", bh.eject_after_errors));
    MYRIAD_RETURN_IF_ERROR(r.Check(h, "readmit_after_successes", "health",
                                   bh.readmit_after_passing_checks >= 1 &&
                                       bh.readmit_after_passing_checks <= policy::kMaxHealthCount,
                                   "must be in [1, 1000]", bh.readmit_after_passing_checks));
  }

  if (const YAML::Node e = root["etcd"]) {
    MYRIAD_RETURN_IF_ERROR(r.Map(e, "etcd", {"endpoint", "prefix"}));
    MYRIAD_RETURN_IF_ERROR(r.Get(e, "endpoint", "etcd", &c.etcd_endpoint));
    MYRIAD_RETURN_IF_ERROR(r.Get(e, "prefix", "etcd", &c.etcd_prefix));
    if (!c.etcd_endpoint.empty() && !net::ParseHttpUrl(c.etcd_endpoint).ok()) {
      return r.Error(e["endpoint"], "etcd.endpoint", "expected http://host:port");
    }
  }
  MYRIAD_RETURN_IF_ERROR(ParseTracing(r, root, &c.tracing));
  return c;
}

absl::StatusOr<GatewayConfig> LoadGatewayConfig(const std::string& path) {
  auto text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  auto config = ParseGatewayConfig(*text, path);
  if (!config.ok() || config->rollout_state.empty()) return config;
  MYRIAD_RETURN_IF_ERROR(ApplyRolloutState(config->rollout_state, &config->rollouts));
  return config;
}

}  // namespace myriad::gateway
