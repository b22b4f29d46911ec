// The gateway's own endpoints besides generation: readiness, the models it serves, the admin
// API (backends, drain, undrain) behind the admin token, Prometheus metrics, and the health
// checker that probes and scrapes every backend.
#include <fmt/format.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "gateway/engine_cache_probe.h"
#include "gateway/gateway.h"
#include "gateway/rollout_state.h"
#include "net/http_client.h"
#include "net/json_text.h"
#include "net/openai_request.h"
#include "net/url_path.h"

namespace myriad::gateway {

using json = nlohmann::json;

namespace {

json CoefficientsJson(const policy::CostCoefficients& c) {
  return {{"fixed_s", c.fixed_s}, {"per_uncached_token_s", c.per_uncached_s},
          {"per_cached_token_s", c.per_cached_s}, {"per_queued_token_s", c.per_queued_s},
          {"per_slot_wait_s", c.per_slot_wait_s}};
}

// Rounds between probes of an engine that answered (a restart may change its cache), and the
// longest wait after failures.
constexpr int kCacheReprobeRounds = 60;
constexpr int kMaxCacheProbeBackoff = 64;

// Over the backend's DP ranks when it has them.
policy::EngineCacheOccupancy OccupancyOf(const policy::EngineCacheModel& model, const Backend& b) {
  if (b.ranks.empty()) return model.Occupancy(b.holder);
  policy::EngineCacheOccupancy sum;
  for (const RankState& r : b.ranks) {
    const policy::EngineCacheOccupancy o = model.Occupancy(r.holder);
    sum.capacity = o.capacity;
    sum.tokens += o.tokens;
    sum.used_slots += o.used_slots;
    sum.evictions += o.evictions;
  }
  return sum;
}

}  // namespace

bool Gateway::Ready() const {
  std::lock_guard l(mu_);
  return std::any_of(backends_.begin(), backends_.end(), [](const auto& b) { return b->available(); });
}

net::HttpResponse Gateway::Models() const {
  std::lock_guard l(mu_);
  std::vector<std::string> models;
  for (const auto& b : backends_) {
    if (std::find(models.begin(), models.end(), b->config.model) == models.end()) {
      models.push_back(b->config.model);
    }
  }
  json data = json::array();
  for (const auto& m : models) {
    data.push_back({{"id", m}, {"object", "model"}, {"owned_by", "myriad"}});
  }
  return net::HttpResponse{200, "application/json", net::JsonText(json({{"object", "list"}, {"data", data}})), {}};
}

net::HttpResponse Gateway::HandleAdmin(const net::HttpRequest& req) {
  if (config_.admin_token.empty()) {
    return net::JsonError(403, "forbidden", "admin endpoints are disabled (no admin_token set)");
  }
  if (net::BearerToken(req.headers) != config_.admin_token) {
    return net::JsonError(401, "unauthorized", "admin endpoints need Authorization: Bearer <admin_token>");
  }
  const std::string_view path = req.path();
  if (path == "/admin/backends" && req.method == "GET") {
    std::lock_guard l(mu_);
    json list = json::array();
    for (const auto& b : backends_) {
      list.push_back({{"name", b->config.name}, {"url", b->config.url},
                      {"role", RoleName(b->config.role)}, {"model", b->config.model},
                      {"version", b->config.version},
                      {"healthy", b->health.healthy()}, {"ejected", b->health.ejected()}, {"draining", b->draining},
                      {"available", b->available()}, {"inflight", b->inflight},
                      {"queued_prefill_tokens", b->queued_prefill_tokens},
                      {"engine_running", b->running}, {"engine_waiting", b->waiting},
                      {"kv_usage", b->kv_usage}, {"requests", b->requests},
                      {"failures", b->failures}, {"from_etcd", b->from_etcd}});
      if (!b->ranks.empty()) {
        json ranks = json::array();
        for (size_t r = 0; r < b->ranks.size(); ++r) {
          const RankState& s = b->ranks[r];
          ranks.push_back({{"rank", r}, {"inflight", s.inflight}, {"queued_prefill_tokens", s.queued_prefill_tokens},
                           {"engine_running", s.running}, {"engine_waiting", s.waiting}, {"kv_usage", s.kv_usage}});
        }
        list.back()["dp_ranks"] = std::move(ranks);
      }
      const policy::EngineCacheOccupancy occ = OccupancyOf(cache_model_, *b);
      list.back()["cache"] = {{"kind", policy::EngineCacheKindName(b->cache_capacity.kind)},
                              {"slots", b->cache_capacity.slots},
                              {"capacity_tokens", b->cache_capacity.tokens},
                              {"source", policy::CapacitySourceName(b->cache_capacity.source)},
                              {"used_tokens", occ.tokens},
                              {"used_slots", occ.used_slots},
                              {"evicted_blocks", occ.evictions},
                              {"probe_failures", b->cache_probe_failures},
                              {"slots_corrected", b->slots_corrected}};
      if (const policy::BackendCostModel* m = b->cost_model.get()) {
        json cm = CoefficientsJson(m->coefficients());
        cm["samples"] = m->samples();
        cm["clipped"] = m->clipped();
        cm["relative_scale"] = m->relative_scale();
        // Its age: how long since the last first token taught it, and how much the fit still
        // counts in the price (1 until routing.learn_cost's stale_after; then toward the prior).
        const Nanos now = NowNanos();
        cm["last_sample_age_s"] = m->samples() > 0 ? json(NanosToSeconds(now - m->last_sample_at())) : json();
        cm["freshness"] = m->Freshness(now);
        cm["prior"] = CoefficientsJson(m->prior());
        list.back()["cost_model"] = std::move(cm);
      }
    }
    return net::HttpResponse{200, "application/json", net::JsonText(json({{"backends", list}})), {}};
  }
  if (path == "/admin/rollouts" && req.method == "GET") {
    std::lock_guard l(mu_);
    return net::HttpResponse{200, "application/json", net::JsonText(json({{"rollouts", rollouts_.Json()}})), {}};
  }
  // /admin/rollouts/MODEL: {"share": x} | {"action": "promote" | "rollback"}
  constexpr std::string_view kRollouts = "/admin/rollouts/";
  if (req.method == "POST" && path.starts_with(kRollouts)) {
    // The controller sends the model as one encoded segment; a raw "org/model" from curl
    // decodes to itself.
    const std::optional<std::string> model = net::PercentDecode(path.substr(kRollouts.size()));
    if (!model) return net::JsonError(400, "invalid_request_error", "path: bad percent-escape in the model name");
    const json change = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (change.is_discarded()) return net::JsonError(400, "invalid_request_error", "body: not valid JSON");
    std::lock_guard l(mu_);
    if (absl::Status st = rollouts_.Apply(*model, change); !st.ok()) {
      return absl::IsNotFound(st) ? net::JsonError(404, "NotFoundError", std::string(st.message()))
                                  : net::JsonError(400, "invalid_request_error", std::string(st.message()));
    }
    if (!config_.rollout_state.empty()) {
      // Applied in memory either way; a 500 tells the caller (the controller retries) that a
      // restart would lose it.
      if (absl::Status st = SaveRolloutState(config_.rollout_state, rollouts_.Configs()); !st.ok()) {
        return net::JsonError(500, "InternalServerError",
                              fmt::format("rollout changed but not saved: {}", std::string(st.message())));
      }
    }
    for (const json& ro : rollouts_.Json()) {
      if (ro["model"] == *model) return net::HttpResponse{200, "application/json", net::JsonText(ro), {}};
    }
  }
  // /admin/backends/NAME/drain | undrain
  constexpr std::string_view kPrefix = "/admin/backends/";
  if (req.method == "POST" && path.starts_with(kPrefix)) {
    std::string_view rest = path.substr(kPrefix.size());
    const size_t slash = rest.find('/');
    if (slash != std::string_view::npos) {
      const std::optional<std::string> decoded = net::PercentDecode(rest.substr(0, slash));
      if (!decoded) return net::JsonError(400, "invalid_request_error", "path: bad percent-escape in the backend name");
      const std::string& name = *decoded;
      const std::string_view action = rest.substr(slash + 1);
      if (action == "drain" || action == "undrain") {
        std::lock_guard l(mu_);
        for (auto& b : backends_) {
          if (b->config.name == name) {
            b->draining = action == "drain";
            return net::HttpResponse{200, "application/json",
                                     net::JsonText(json({{"name", name}, {"draining", b->draining}})), {}};
          }
        }
        return net::JsonError(404, "NotFoundError", fmt::format("no backend named '{}'", name));
      }
    }
  }
  return net::JsonError(404, "NotFoundError", fmt::format("no admin route for {} {}", req.method,
                                                          std::string(path)));
}

net::HttpResponse Gateway::Metrics() const {
  net::PrometheusWriter w;
  std::lock_guard l(mu_);
  w.Family("myriad_gateway_responses_total", "Responses by route and HTTP status.", net::MetricType::kCounter);
  for (const auto& [k, v] : responses_) {
    const std::string code = std::to_string(k.second);
    w.Sample("myriad_gateway_responses_total",
             {{"route", net::RouteName(k.first)}, {"code", code}}, v);
  }
  w.Counter("myriad_gateway_retries_total", "Upstream attempts after the first.", stats_.retries);
  w.Counter("myriad_gateway_upstream_failures_total", "Upstream calls that failed.", stats_.upstream_failures);
  w.Counter("myriad_gateway_client_cancels_total", "Clients that left before the answer ended.",
            stats_.client_cancels);
  w.Counter("myriad_gateway_ejections_total", "Backends ejected after consecutive errors.", stats_.ejections);
  w.Counter("myriad_gateway_pd_requests_total", "Requests served prefill-then-decode.", stats_.pd_requests);
  w.Family("myriad_gateway_route_decisions_total",
           "Routed requests by where the chosen engine gets their prefix: none (recomputed), hbm, store (its store "
           "tier, after any HBM part).",
           net::MetricType::kCounter);
  constexpr const char* kTiers[3] = {"none", "hbm", "store"};
  for (int t = 0; t < 3; ++t) w.Sample("myriad_gateway_route_decisions_total", {{"tier", kTiers[t]}}, stats_.route_tiers[t]);
  w.Family("myriad_gateway_route_prefix_tokens_total",
           "Prompt tokens the router expected the chosen engine to have in HBM or to load from its store tier.",
           net::MetricType::kCounter);
  for (int t = 1; t < 3; ++t) {
    w.Sample("myriad_gateway_route_prefix_tokens_total", {{"tier", kTiers[t]}}, stats_.route_tier_tokens[t]);
  }
  rollouts_.WriteMetrics(w);
  w.Family("myriad_gateway_backend_available", "1 when the backend takes new requests.", net::MetricType::kGauge);
  for (const auto& b : backends_) {
    w.Sample("myriad_gateway_backend_available", {{"backend", b->config.name}},
             static_cast<int64_t>(b->available() ? 1 : 0));
  }
  w.Family("myriad_gateway_backend_inflight", "Requests in flight per backend.", net::MetricType::kGauge);
  for (const auto& b : backends_) {
    w.Sample("myriad_gateway_backend_inflight", {{"backend", b->config.name}}, b->inflight);
  }
  // The learned cost model (routing.learn_cost): one series per backend and term.
  w.Family("myriad_gateway_backend_cost_seconds", "Learned prefill cost per backend: term fixed (seconds), "
           "per_uncached_token, per_cached_token, per_queued_token (seconds per token), per_slot_wait (seconds per "
           "request waited for to free a slot).", net::MetricType::kGauge);
  for (const auto& b : backends_) {
    if (!b->cost_model) continue;
    const policy::CostCoefficients& c = b->cost_model->coefficients();
    for (const auto& [term, v] : {std::pair<const char*, double>{"fixed", c.fixed_s}, {"per_uncached_token", c.per_uncached_s},
                                  {"per_cached_token", c.per_cached_s}, {"per_queued_token", c.per_queued_s},
                                  {"per_slot_wait", c.per_slot_wait_s}}) {
      w.Sample("myriad_gateway_backend_cost_seconds", {{"backend", b->config.name}, {"term", term}}, v);
    }
  }
  w.Family("myriad_gateway_backend_cost_freshness",
           "How much each backend's learned cost still counts in its price: 1 until stale_after without a sample, "
           "then halving every stale_half_life toward the configured model.", net::MetricType::kGauge);
  const Nanos cost_now = NowNanos();
  for (const auto& b : backends_) {
    if (!b->cost_model) continue;
    w.Sample("myriad_gateway_backend_cost_freshness", {{"backend", b->config.name}}, b->cost_model->Freshness(cost_now));
  }
  w.Family("myriad_gateway_backend_cost_last_sample_age_seconds",
           "Seconds since each backend's learned cost model last saw a first token (backends with a sample).",
           net::MetricType::kGauge);
  for (const auto& b : backends_) {
    if (!b->cost_model || b->cost_model->samples() == 0) continue;
    w.Sample("myriad_gateway_backend_cost_last_sample_age_seconds", {{"backend", b->config.name}},
             NanosToSeconds(cost_now - b->cost_model->last_sample_at()));
  }
  w.Family("myriad_gateway_backend_cost_samples_total", "First-token times the learned cost model has seen per backend.",
           net::MetricType::kCounter);
  for (const auto& b : backends_) {
    if (b->cost_model) {
      w.Sample("myriad_gateway_backend_cost_samples_total", {{"backend", b->config.name}}, b->cost_model->samples());
    }
  }
  // The modelled prefix caches (approximate routing): one series per backend, kind and source
  // three values each.
  w.Family("myriad_gateway_backend_cache_capacity_tokens",
           "Prefix-cache capacity the approximate index models per backend (slots: per slot; 0: unknown or unbounded), "
           "by kind (slots, paged, unknown) and source (engine, config, default).",
           net::MetricType::kGauge);
  for (const auto& b : backends_) {
    w.Sample("myriad_gateway_backend_cache_capacity_tokens",
             {{"backend", b->config.name},
              {"kind", policy::EngineCacheKindName(b->cache_capacity.kind)},
              {"source", policy::CapacitySourceName(b->cache_capacity.source)}},
             b->cache_capacity.tokens);
  }
  w.Family("myriad_gateway_backend_cache_used_tokens", "Prompt tokens the model of each backend's prefix cache holds.",
           net::MetricType::kGauge);
  for (const auto& b : backends_) {
    w.Sample("myriad_gateway_backend_cache_used_tokens", {{"backend", b->config.name}},
             OccupancyOf(cache_model_, *b).tokens);
  }
  w.Family("myriad_gateway_backend_cache_evicted_blocks_total",
           "Blocks the index forgot because the model of the backend's cache evicted them.", net::MetricType::kCounter);
  for (const auto& b : backends_) {
    w.Sample("myriad_gateway_backend_cache_evicted_blocks_total", {{"backend", b->config.name}},
             OccupancyOf(cache_model_, *b).evictions);
  }
  w.Family("myriad_gateway_backend_cache_probe_failures_total",
           "Probes of a backend's cache capacity (/metrics, /props, /get_server_info) that none answered.",
           net::MetricType::kCounter);
  for (const auto& b : backends_) {
    w.Sample("myriad_gateway_backend_cache_probe_failures_total", {{"backend", b->config.name}},
             b->cache_probe_failures);
  }
  w.Family("myriad_gateway_backend_cache_slots_corrected_total",
           "Slots whose modelled prompt the engine's GET /slots showed gone (used behind the gateway's back, "
           "or emptied).",
           net::MetricType::kCounter);
  for (const auto& b : backends_) {
    w.Sample("myriad_gateway_backend_cache_slots_corrected_total", {{"backend", b->config.name}}, b->slots_corrected);
  }
  w.Gauge("myriad_gateway_prefix_index_entries", "Entries in the prefix index.",
          static_cast<double>(index_.entries()));
  const policy::KvEventIndexerStats& ks = indexer_->stats();
  w.Counter("myriad_gateway_kv_event_batches_total", "KV-event batches applied to the index.", ks.batches);
  w.Family("myriad_gateway_kv_event_errors_total",
           "KV-event batches lost to decoding (decode), events refused (invalid_event: block size or "
           "token count) and events of an unknown tag (unknown_event).",
           net::MetricType::kCounter);
  for (const auto& [reason, n] : {std::pair<const char*, uint64_t>{"decode", ks.decode_errors},
                                  {"invalid_event", ks.invalid_events},
                                  {"unknown_event", ks.unknown_event_tags}}) {
    w.Sample("myriad_gateway_kv_event_errors_total", {{"reason", reason}}, n);
  }
  // Events that decoded but left the index as it was: an orphan's blocks are missing from it,
  // which skews routing where no error does (a store tier's blocks published before their
  // parent's).
  w.Family("myriad_gateway_kv_event_dropped_total",
           "KV events decoded but not applied: orphan (a BlockStored whose parent hash the index does "
           "not know), unknown_medium (a medium the backend has no holder for), other_group (another "
           "KV-cache group's blocks). Always these three.",
           net::MetricType::kCounter);
  for (const auto& [reason, n] : {std::pair<const char*, uint64_t>{"orphan", ks.orphans},
                                  {"unknown_medium", ks.unknown_medium},
                                  {"other_group", ks.other_group}}) {
    w.Sample("myriad_gateway_kv_event_dropped_total", {{"reason", reason}}, n);
  }
  w.Counter("myriad_gateway_kv_event_unknown_removed_blocks_total",
            "Blocks a BlockRemoved named that the index never saw stored (or forgot).", ks.unknown_removed);
  w.Counter("myriad_gateway_kv_event_recalled_parents_total",
            "BlockStored events chained to a parent removed shortly before (a store tier's write landing after "
            "HBM evicted the parent).",
            ks.recalled_parents);
  w.Counter("myriad_gateway_kv_event_gaps_total", "Event gaps left after replay.", ks.gaps);
  w.Counter("myriad_gateway_kv_event_restarts_total", "Engine restarts seen in the events.", ks.restarts);
  if (tracer_) WriteTracerMetrics(tracer_->stats(), w);
  request_metrics_.Write(w);
  return net::HttpResponse{200, std::string(net::kPrometheusContentType), w.Take(), {}};
}

void Gateway::CheckHealthNow() {
  // One round at a time: the rounds share each backend's kept-alive health connection.
  std::lock_guard round(health_round_mu_);
  std::vector<std::shared_ptr<Backend>> list;
  std::vector<bool> probe_cache;  // no KV events and no configured capacity: ask the engine
  std::vector<bool> poll_slots;   // modelled as a slot cache and due: ask for its slots
  const Nanos now = NowNanos();
  {
    std::lock_guard l(mu_);
    list = backends_;
    for (const auto& b : list) {
      probe_cache.push_back(b->config.kv_events.empty() && b->config.cache_slots == 0 && b->config.cache_tokens == 0);
      poll_slots.push_back(config_.slots_interval > 0 && b->config.kv_events.empty() && b->ranks.empty() &&
                           b->cache_capacity.kind == policy::EngineCacheKind::kSlots && now >= b->slots_due);
    }
  }
  for (size_t i = 0; i < list.size(); ++i) {
    auto& b = list[i];
    if (!b->health_client) {
      b->health_client = std::make_unique<net::HttpClient>(
          b->address, net::HttpClientOptions{.timeout = config_.health_timeout});
    }
    net::HttpClient& client = *b->health_client;
    auto health = client.Get("/health");
    const bool ok = health.ok() && health->status == 200;
    ScrapedLoad load;
    std::string metrics;
    if (ok && config_.scrape_interval > 0) {
      auto m = client.Get("/metrics");
      if (m.ok() && m->status == 200) {
        load = ParseEngineMetrics(m->body);
        metrics = std::move(m->body);
      }
    }
    std::optional<policy::EngineCacheCapacity> capacity;
    bool probe_failed = false;
    if (ok && probe_cache[i] && --b->cache_probe_wait <= 0) {
      capacity = ProbeEngineCache(client, std::move(metrics));
      probe_failed = !capacity;
      b->cache_probe_wait = capacity ? kCacheReprobeRounds : b->cache_probe_backoff;
      b->cache_probe_backoff = capacity ? 1 : std::min(2 * b->cache_probe_backoff, kMaxCacheProbeBackoff);
    }
    std::optional<std::vector<policy::SlotObservation>> slots;
    if (ok && poll_slots[i]) {
      // A refusal (501 under --no-slots, 404 where there is no such endpoint) or a body that does
      // not parse backs off, doubling up to 64 intervals; an answer resets the wait.
      auto res = client.Get("/slots");
      if (res.ok() && res->status == 200) slots = ParseLlamaCppSlots(res->body);
      b->slots_backoff = slots ? 0 : std::min(std::max(2 * b->slots_backoff, config_.slots_interval),
                                              64 * config_.slots_interval);
      b->slots_due = now + (slots ? config_.slots_interval : b->slots_backoff);
    }
    std::string_view change;
    {
      std::lock_guard l(mu_);
      if (capacity && !b->removed) SetCacheCapacityLocked(*b, *capacity);
      if (slots && !b->removed) b->slots_corrected += static_cast<uint64_t>(cache_model_.ObserveSlots(b->holder, *slots));
      if (probe_failed) b->cache_probe_failures++;
      change = RecordHealth(*b, ok);
      if (load.any) {
        b->running = load.running;
        b->waiting = load.waiting;
        b->kv_usage = load.kv_usage;
        for (size_t r = 0; r < b->ranks.size() && r < load.by_engine.size(); ++r) {
          b->ranks[r].running = load.by_engine[r].running;
          b->ranks[r].waiting = load.by_engine[r].waiting;
          b->ranks[r].kv_usage = load.by_engine[r].kv_usage;
        }
      }
      if (change == "unhealthy") {
        for (policy::HolderId h : b->Holders()) index_.MarkSuspect(h);
      }
    }
    if (!change.empty()) {
      Log(net::JsonText(json({{"event", "backend_" + std::string(change)}, {"backend", b->config.name},
                {"error", health.ok() ? fmt::format("status {}", health->status)
                                      : std::string(health.status().message())}})));
    }
  }
}

void Gateway::HealthLoop() {
  const Nanos every = config_.scrape_interval > 0 ? std::min(config_.health_interval, config_.scrape_interval)
                                                  : config_.health_interval;
  while (!stopping_.load()) {
    // Due `every` after this round began: a clock that jumps during a round (a test's
    // ManualClock) gets the next round at once.
    const Nanos began = clock_->Now();
    CheckHealthNow();
    if (!stopping_.load()) health_sleeper_->SleepUntil(began + every);
  }
}

}  // namespace myriad::gateway
