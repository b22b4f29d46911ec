#include "gateway/gateway.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <nlohmann/json.hpp>

#include "core/block_hash.h"
#include "gateway/exchange.h"
#include "net/http_client.h"
#include "net/kv_event_publisher.h"
#include "net/openai_request.h"
#include "perf/step_model.h"
#include "net/json_text.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace myriad::gateway {

using json = nlohmann::json;

absl::StatusOr<std::unique_ptr<Gateway>> Gateway::Create(GatewayConfig config,
                                                          std::shared_ptr<Clock> clock) {
  auto name = policy::ParsePolicyName(config.policy);
  if (!name.ok()) return name.status();
  auto gpu = perf::FindGpu(config.perf_gpu);
  if (!gpu.ok()) return gpu.status();
  auto model = perf::FindModel(config.perf_model);
  if (!model.ok()) return model.status();
  perf::UnitLayout layout;
  layout.tp = config.perf_tp;
  auto step = perf::StepModel::Create(*gpu, *model, layout, {});
  if (!step.ok()) return step.status();
  auto hp = net::ParseHostPort(config.listen);
  if (!hp.ok()) return hp.status();
  std::unique_ptr<Gateway> g(new Gateway(config, OrDefaultClock(std::move(clock))));
  g->cost_ = policy::PrefillCost(*step, 8192);
  if (!config.tokenizer.empty()) {
    auto enc = tokenizer::PromptEncoder::Load(config.tokenizer, config.tokenizer_config);
    if (!enc.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("routing.tokenizer: {}", std::string(enc.status().message())));
    }
    g->encoder_ = *std::move(enc);
  }
  if (config.recompute_limit > 0) {
    // Its rate follows the backends (UpdateRecomputeRateLocked), from none at first.
    g->limiter_ = std::make_unique<policy::RecomputeLimiter>(policy::RecomputeLimiterOptions{});
  }
  g->admission_ = std::make_unique<policy::AdmissionPipeline>(g->router_.get(), &g->tenants_, &g->index_, g->limiter_.get());
  g->token_admission_ =
      std::make_unique<policy::AdmissionPipeline>(g->token_router_.get(), &g->tenants_, &g->index_, g->limiter_.get());
  for (const auto& b : config.backends) {
    if (absl::Status st = g->AddBackend(b); !st.ok()) return st;
  }
  auto tracer = Tracer::Create(config.tracing);
  if (!tracer.ok()) return tracer.status();
  g->tracer_ = *std::move(tracer);
  return g;
}

Gateway::Gateway(GatewayConfig config, std::shared_ptr<Clock> clock)
    : config_(std::move(config)),
      clock_(std::move(clock)),
      index_(policy::PrefixIndexOptions{config_.index_max_entries, 1, config_.approx_ttl}),
      rollouts_(config_.rollouts),
      decode_pressure_(config_.tpot_slo),
      tenants_({}, policy::TenantOptions{config_.fairness}),
      rng_(config_.seed) {
  policy::RouterOptions base;
  base.ttft_slo = config_.ttft_slo;
  base.reject_factor = config_.reject_factor;
  base.disagg_min_uncached = config_.disagg_min_uncached;
  base.block_tokens = std::max(1, config_.approx_chunk_bytes / 4);
  auto name = policy::ParsePolicyName(config_.policy, base);
  router_ = std::make_unique<policy::Router>(name.ok() ? name->options : base, &index_);
  policy::RouterOptions exact = name.ok() ? name->options : base;
  exact.block_tokens = config_.kv_block_size;
  // Only exact keys have a store tier: the engines' events index it.
  exact.store = policy::StorePath{.bytes_per_s = config_.store_load_gbps * 1e9 / 8, .latency = config_.store_load_latency};
  token_router_ = std::make_unique<policy::Router>(exact, &index_);
  // A placement on a slot engine is priced with what it displaces there (router.h).
  router_->UseEngineCaches(&cache_model_);
  token_router_->UseEngineCaches(&cache_model_);
  indexer_ = std::make_unique<policy::KvEventIndexer>(
      &index_, policy::KvEventIndexerOptions{.block_size = static_cast<uint32_t>(config_.kv_block_size)});
  std::vector<policy::TenantConfig> tenant_configs;
  for (size_t i = 0; i < config_.tenants.size(); ++i) {
    tenant_configs.push_back(config_.tenants[i].config);
    for (const auto& k : config_.tenants[i].api_keys) tenant_by_key_[k] = static_cast<uint32_t>(i + 1);
  }
  // Tenant 0 is the anonymous tenant.
  tenant_configs.insert(tenant_configs.begin(), policy::TenantConfig{"anonymous", 1.0, 0, 0, 0});
  tenants_ = policy::TenantPolicy(std::move(tenant_configs),
                                  policy::TenantOptions{config_.fairness});
  trace_salt_ = (static_cast<uint64_t>(std::random_device{}()) << 32) ^
                static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  health_sleeper_ = clock_->NewSleeper();
  if (config_.access_log == "-") {
    log_file_ = stderr;
  } else if (!config_.access_log.empty()) {
    log_file_ = std::fopen(config_.access_log.c_str(), "a");
  }
}

Gateway::~Gateway() {
  Stop();
  if (log_file_ && log_file_ != stderr) std::fclose(log_file_);
}

absl::Status Gateway::Start() {
  auto hp = net::ParseHostPort(config_.listen);
  net::HttpServerOptions o;
  o.address = hp->host;
  o.port = hp->port;
  o.threads = config_.threads;
  o.max_body_bytes = config_.max_body_bytes;
  o.server_name = "myriad-gateway";
  o.stop_grace = 2 * kSecond;
  o.write_timeout = config_.client_write_timeout;
  o.context_per_thread = config_.upstream_threads == 0;
  http_ = std::make_unique<net::HttpServer>(
      o, [this](net::HttpRequest req, std::shared_ptr<net::HttpResponder> r) {
        Handle(std::move(req), std::move(r));
      });
  // Everything that can fail comes before the upstream client: with upstream_threads 0 it
  // shares the HTTP server's contexts, and its destructor waits for them to run its shutdown,
  // which they never do if the server never starts (a gateway that could not start hung with
  // SIGTERM blocked instead of exiting).
  if (absl::Status st = http_->Listen(); !st.ok()) return st;
  // KV events: one subscriber thread for the backends configured now; backends added later
  // (etcd, admin) get one each.
  std::vector<std::shared_ptr<Backend>> initial;
  {
    std::lock_guard l(mu_);
    initial = backends_;
  }
  auto sub = SubscribeEvents(initial);
  if (!sub.ok()) return sub.status();
  subscriber_ = *std::move(sub);
  events_started_ = true;  // from now on each added backend gets its own subscriber
  if (!config_.etcd_endpoint.empty()) {
    // Registrations come and go while serving; an unreachable etcd is retried, and the static
    // backends serve meanwhile.
    discovery_ = std::make_unique<EtcdDiscovery>();
    absl::Status st = discovery_->Start(
        EtcdDiscoveryOptions{.endpoint = config_.etcd_endpoint, .prefix = config_.etcd_prefix},
        EtcdDiscoveryCallbacks{
            .on_put =
                [this](BackendConfig b) {
                  const std::string name = b.name;
                  if (absl::Status s = AddBackend(std::move(b), /*from_etcd=*/true); !s.ok()) {
                    Log(net::JsonText(json({{"event", "etcd_registration_refused"}, {"backend", name},
                              {"error", std::string(s.message())}})));
                  }
                },
            .on_delete = [this](const std::string& name) { RemoveBackend(name, /*only_from_etcd=*/true); },
            .on_error =
                [this](absl::Status s) {
                  Log(net::JsonText(json({{"event", "etcd_error"}, {"error", std::string(s.message())}})));
                }});
    if (!st.ok()) return st;
  }
  net::AsyncHttpClientOptions uo{.threads = std::max(1, config_.upstream_threads)};
  // upstream_threads 0: each upstream call runs on the HTTP thread of its client's connection
  // (one io_context per thread), so a chunk goes from the engine's socket to the client's
  // without changing threads.
  if (config_.upstream_threads == 0) {
    for (int i = 0; i < http_->io_contexts(); ++i) uo.shared_io_contexts.push_back(&http_->io_context(i));
  }
  upstream_ = std::make_unique<net::AsyncHttpClient>(uo);
  if (absl::Status st = http_->Start(); !st.ok()) {
    // Listen succeeded, so this cannot fail today; if it ever does, the shared contexts never
    // run and the client must not wait for them.
    (void)upstream_.release();  // leaked on purpose, see above
    return st;
  }
  started_ = true;
  health_ = std::thread([this] { HealthLoop(); });
  return absl::OkStatus();
}

void Gateway::Stop() {
  if (!started_.exchange(false)) return;
  // Requests whose upstream call ends from here on (cancelled below) are answered 503, not
  // retried on a client that is going away.
  shutting_down_ = true;
  stopping_ = true;
  health_sleeper_->Wake();
  if (health_.joinable()) health_.join();
  // Discovery first: a registration arriving later would start a subscriber after the others
  // were stopped.
  if (discovery_) discovery_->Stop();
  if (subscriber_) subscriber_->Stop();
  {
    std::map<std::string, std::unique_ptr<net::KvEventSubscriber>> late;
    {
      std::lock_guard l(sub_mu_);
      late.swap(late_subscribers_);
    }
    for (auto& [name, sub] : late) {
      if (sub) sub->Stop();
    }
  }
  upstream_.reset();  // every call in flight ends (cancelled) and answers its client
  http_->Stop();
  if (tracer_) tracer_->Stop();  // after the last request has ended: its spans go too
}

absl::StatusOr<std::unique_ptr<net::KvEventSubscriber>> Gateway::SubscribeEvents(
    const std::vector<std::shared_ptr<Backend>>& backends) {
  net::KvEventSubscriberOptions so;
  policy::PublisherId first = 0;
  {
    std::lock_guard l(mu_);
    first = next_publisher_;
    for (const auto& b : backends) {
      if (b->config.kv_events.empty()) continue;
      // vLLM's DP ranks publish on consecutive ports from the configured one, each rank's
      // blocks under that rank's holder (the gateway steers requests to a rank by header).
      for (int rank = 0; rank < b->config.dp_ranks; ++rank) {
        auto events = net::OffsetEndpointPort(b->config.kv_events, rank);
        auto replay = b->config.kv_replay.empty() ? std::string()
                                                  : net::OffsetEndpointPort(b->config.kv_replay, rank).value_or("");
        if (!events) {
          return absl::InvalidArgumentError(fmt::format(
              "backend '{}': kv_events '{}' needs a numeric port for dp_ranks > 1", b->config.name,
              b->config.kv_events));
        }
        const policy::PublisherId publisher = first + static_cast<policy::PublisherId>(so.sources.size());
        so.sources.push_back(net::KvEventSource{fmt::format("{}/dp{}", b->config.name, rank),
                                                *events, replay, ""});
        // Blocks of medium CPU (the engine's store tier) count through the rank's reach only.
        if (absl::Status st = indexer_->AddPublisher(
                publisher, policy::KvPublisherHolders{.media = {{"GPU", b->HolderOf(rank)}, {"CPU", policy::kUnindexedHolder}},
                                                      .reach = b->StoreHolderOf(rank)});
            !st.ok()) {
          return st;
        }
      }
    }
    next_publisher_ += static_cast<policy::PublisherId>(so.sources.size());
  }
  if (so.sources.empty()) return std::unique_ptr<net::KvEventSubscriber>();
  return net::KvEventSubscriber::Start(so, [this, first](const net::KvEventDelivery& d) {
    const policy::PublisherId publisher = first + static_cast<policy::PublisherId>(d.source);
    std::string line;
    {
      std::lock_guard l(mu_);
      const Nanos now = NowNanos();
      // Counted by reason in the indexer's stats; logged at most once per interval per publisher,
      // as an engine sending garbage would otherwise write a line per batch.
      const absl::Status st = indexer_->Apply(publisher, d.seq, d.batch, now);
      uint64_t suppressed = 0;
      if (!st.ok() && kv_event_log_throttle_.Admit(publisher, now, &suppressed)) {
        line = net::JsonText(json({{"event", "kv_event_error"},
                                   {"source", std::string(d.source_id)},
                                   {"seq", d.seq},
                                   {"reason", d.batch.ok() ? "invalid_event" : "decode"},
                                   {"error", std::string(st.message())},
                                   {"suppressed", suppressed}}));
      }
    }
    if (!line.empty()) Log(line);  // outside mu_: the sink may be slow
  });
}

void Gateway::SubscribeLater(const std::string& name) {
  if (!events_started_) return;  // Start subscribes to every backend there is then
  std::vector<std::shared_ptr<Backend>> one;
  {
    std::lock_guard l(mu_);
    for (const auto& b : backends_) {
      if (b->config.name == name && !b->config.kv_events.empty()) one.push_back(b);
    }
  }
  if (one.empty()) return;
  auto sub = SubscribeEvents(one);
  if (!sub.ok()) {
    Log(net::JsonText(json({{"event", "kv_events_subscribe_failed"}, {"backend", name},
              {"error", std::string(sub.status().message())}})));
    return;
  }
  std::unique_ptr<net::KvEventSubscriber> old;
  {
    std::lock_guard l(sub_mu_);
    old = std::exchange(late_subscribers_[name], *std::move(sub));
  }
  if (old) old->Stop();  // outside the locks: its callback takes mu_
}

void Gateway::Unsubscribe(const std::string& name) {
  std::unique_ptr<net::KvEventSubscriber> old;
  {
    std::lock_guard l(sub_mu_);
    auto it = late_subscribers_.find(name);
    if (it == late_subscribers_.end()) return;
    old = std::move(it->second);
    late_subscribers_.erase(it);
  }
  if (old) old->Stop();
}

absl::Status Gateway::AddBackend(BackendConfig config, bool from_etcd) {
  const std::string name = config.name;
  absl::Status st = AddBackendLocked(std::move(config), from_etcd);
  if (st.ok()) SubscribeLater(name);
  return st;
}

absl::Status Gateway::AddBackendLocked(BackendConfig config, bool from_etcd) {
  if (absl::Status st = ValidateBackend(config, fmt::format("backend '{}'", config.name)); !st.ok()) {
    return st;
  }
  auto hp = net::ParseHttpUrl(config.url);
  std::lock_guard l(mu_);
  for (auto& b : backends_) {
    if (b->config.name == config.name && !b->removed) {
      if (from_etcd && b->from_etcd) {  // an update of a registration
        b->config = config;
        b->address = *hp;
        return absl::OkStatus();
      }
      return absl::AlreadyExistsError(fmt::format("backend '{}' already exists", config.name));
    }
  }
  auto b = std::make_shared<Backend>();
  b->config = std::move(config);
  b->address = *hp;
  b->holder = next_holder_++;
  b->store_holder = next_holder_++;
  b->health = policy::BackendHealth(config_.backend_health);
  // DP ranks steered by header: each its own cache, so its own holders in the index.
  if (b->config.dp_ranks > 1) {
    b->ranks.resize(static_cast<size_t>(b->config.dp_ranks));
    for (RankState& r : b->ranks) {
      r.holder = next_holder_++;
      r.store_holder = next_holder_++;
    }
  }
  b->from_etcd = from_etcd;
  if (config_.learn_cost) {
    for (const auto& other : backends_) {
      if (!b->config.cost_class.empty() && other->config.cost_class == b->config.cost_class &&
          other->config.model == b->config.model && other->config.role == b->config.role && other->cost_model) {
        b->cost_model = other->cost_model;
        break;
      }
    }
    if (!b->cost_model) b->cost_model = std::make_shared<policy::BackendCostModel>(cost_);
  }
  // Configured capacity first; an engine's own report (the health checker's probe) replaces it.
  // With KV events the engine says what it holds and evicts: nothing to model.
  if (b->config.kv_events.empty() && (b->config.cache_slots > 0 || b->config.cache_tokens > 0)) {
    SetCacheCapacityLocked(
        *b, policy::EngineCacheCapacity{
                .kind = b->config.cache_slots > 0 ? policy::EngineCacheKind::kSlots : policy::EngineCacheKind::kPaged,
                .slots = b->config.cache_slots,
                .tokens = b->config.cache_tokens,
                .source = policy::CapacitySource::kConfig});
  }
  backends_.push_back(std::move(b));
  UpdateRecomputeRateLocked();
  return absl::OkStatus();
}

void Gateway::SetCacheCapacityLocked(Backend& b, policy::EngineCacheCapacity capacity) {
  b.cache_capacity = capacity;
  if (b.ranks.empty()) {
    cache_model_.SetCapacity(b.holder, capacity);
  } else {
    for (const RankState& r : b.ranks) cache_model_.SetCapacity(r.holder, capacity);
  }
}

void Gateway::UpdateRecomputeRateLocked() {
  if (!limiter_) return;
  // Each steered DP rank is a unit of the performance model's layout. Decode engines are not
  // counted: the simulator's rate is its entry (prefill and colocated) pools'.
  std::vector<const policy::PrefillCost*> units;
  for (const auto& b : backends_) {
    if (b->config.role == BackendRole::kDecode) continue;
    units.insert(units.end(), std::max<size_t>(1, b->ranks.size()), &cost_);
  }
  limiter_->SetRate(NowNanos(), policy::RecomputeTokensPerSecond(config_.recompute_limit, units));
}

bool Gateway::RemoveBackend(const std::string& name, bool only_from_etcd) {
  const bool removed = RemoveBackendLocked(name, only_from_etcd);
  if (removed) Unsubscribe(name);
  return removed;
}

bool Gateway::RemoveBackendLocked(const std::string& name, bool only_from_etcd) {
  std::lock_guard l(mu_);
  for (auto it = backends_.begin(); it != backends_.end(); ++it) {
    if ((*it)->config.name == name && !(*it)->removed && (!only_from_etcd || (*it)->from_etcd)) {
      (*it)->removed = true;  // requests in flight keep their shared_ptr
      for (policy::HolderId h : (*it)->Holders()) {
        index_.Cleared(h);
        cache_model_.Forget(h);
      }
      backends_.erase(it);
      UpdateRecomputeRateLocked();
      return true;
    }
  }
  return false;
}

std::vector<std::string> Gateway::BackendNames() const {
  std::lock_guard l(mu_);
  std::vector<std::string> out;
  for (const auto& b : backends_) out.push_back(b->config.name);
  return out;
}

void Gateway::set_access_log(std::function<void(const std::string&)> sink) {
  std::lock_guard l(log_mu_);
  log_ = std::move(sink);
}

bool Gateway::LogEnabled() {
  std::lock_guard l(log_mu_);
  return log_ || log_file_;
}

void Gateway::Log(const std::string& line) {
  std::lock_guard l(log_mu_);
  if (log_) return log_(line);
  if (log_file_) {
    std::fputs(line.c_str(), log_file_);
    std::fputc('\n', log_file_);
    std::fflush(log_file_);
  }
}

policy::KvEventIndexerStats Gateway::kv_event_stats() const {
  std::lock_guard l(mu_);
  return indexer_->stats();
}

GatewayStats Gateway::stats() const {
  std::lock_guard l(mu_);
  return stats_;
}

int64_t Gateway::NowNanos() const { return clock_->Now(); }

bool Gateway::SpendRetry() {
  std::lock_guard l(mu_);
  if (retry_tokens_ < 1) return false;
  retry_tokens_ -= 1;
  stats_.retries++;
  return true;
}

std::shared_ptr<net::Call> Gateway::StartUpstream(net::CallRequest request, net::CallCallbacks callbacks) {
  return upstream_->Start(std::move(request), std::move(callbacks));
}

void Gateway::CountRejected() {
  std::lock_guard l(mu_);
  stats_.rejected++;
}

void Gateway::CountSlowClient() {
  std::lock_guard l(mu_);
  stats_.slow_clients++;
}

void Gateway::Record(bool chat, int status, const RequestOutcome& outcome) {
  {
    std::lock_guard l(mu_);
    responses_[{chat, status}]++;
    if (status == 499) stats_.client_cancels++;
    if (outcome.ok) decode_pressure_.Observe(NowNanos(), OutcomeTpot(outcome));
    if (!outcome.version.empty()) {
      const bool error = status >= 500;
      rollouts_.Record(outcome.model, outcome.version,
                       !error && outcome.ok && WithinSlo(outcome, {.ttft = config_.ttft_slo, .tpot = config_.tpot_slo}),
                       error);
    }
  }
  request_metrics_.Record(outcome);  // its own lock
}


void Gateway::Finished(const Target& target, bool ok, int64_t queued_tokens, int64_t decode_kv_tokens) {
  const auto& [b, rank] = target;
  if (!b) return;
  std::lock_guard l(mu_);
  b->Charge(rank, -1, -queued_tokens);
  if (decode_kv_tokens > 0) b->ChargeDecode(rank, -1, decode_kv_tokens);
  if (RecordOutcome(*b, ok)) stats_.ejections++;
  if (!ok) stats_.upstream_failures++;
}

void Gateway::FirstToken(const Target& target, int64_t queued_tokens, const policy::CostSample* sample) {
  const auto& [b, rank] = target;
  if (!b || (queued_tokens == 0 && (!sample || !b->cost_model))) return;
  std::lock_guard l(mu_);
  if (queued_tokens != 0) b->Charge(rank, 0, -queued_tokens);
  if (sample && b->cost_model) b->cost_model->Observe(*sample, NowNanos());
}

void Gateway::PickVersionLocked(Exchange& ex) {
  const RolloutConfig* ro = rollouts_.Find(ex.req.model);
  if (!ro) return;
  const bool canary_available = std::any_of(backends_.begin(), backends_.end(), [&](const auto& b) {
    return b->config.model == ex.req.model && b->config.version == ro->canary && b->available();
  });
  // The client's user key keeps a conversation on one version; else each request splits alone.
  const std::string key = ex.req.user.empty() ? ex.trace.trace_id : "user:" + ex.req.user;
  ex.version = rollouts_.Pick(ex.req.model, key, canary_available, &ex.version_fallback);
}

Gateway::Candidates Gateway::CandidatesFor(const Exchange& ex) const {
  // A candidate is a backend, or one DP rank of it when the gateway steers its ranks.
  Candidates c;
  auto tried = [&](const Backend& b) {
    return std::find(ex.tried.begin(), ex.tried.end(), b.config.name) != ex.tried.end();
  };
  for (const auto& b : backends_) {
    if (b->config.model != ex.req.model || !b->available() || tried(*b)) continue;
    if (!ex.version.empty() && b->config.version != ex.version) continue;
    const bool decode = b->config.role == BackendRole::kDecode;
    auto add = [&](int rank, policy::UnitLoad load) {
      (decode ? c.decodes : c.entries).emplace_back(b, rank);
      const policy::PrefillCost* cost = b->cost_model ? &b->cost_model->cost() : &cost_;
      (decode ? c.decode_c : c.entry_c)
          .push_back(policy::Candidate{.holder = b->HolderOf(rank),
                                       .store_holder = b->StoreHolderOf(rank),
                                       .load = load,
                                       .cost = cost,
                                       .slots = b->cache_capacity.kind == policy::EngineCacheKind::kSlots
                                                    ? b->cache_capacity.slots
                                                    : 0});
    };
    if (b->ranks.empty()) {
      add(-1, b->Load());
    } else {
      for (size_t r = 0; r < b->ranks.size(); ++r) add(static_cast<int>(r), b->RankLoad(r));
    }
  }
  return c;
}

ExchangeServices::Target Gateway::PickDecodeAfterPrefill(const Exchange& ex) {
  std::lock_guard l(mu_);
  Candidates c = CandidatesFor(ex);
  policy::AdmissionPipeline& admission = ex.token_keys ? *token_admission_ : *admission_;
  const int pick = admission.router().PickDecode(c.decode_c, rng_);
  if (pick < 0) return {nullptr, -1};
  return c.decodes[static_cast<size_t>(pick)];
}

void Gateway::HandOff(const Target& decode, int64_t kv_tokens) {
  std::lock_guard l(mu_);
  decode.first->Charge(decode.second, 1, 0);
  decode.first->ChargeDecode(decode.second, +1, kv_tokens);
  stats_.pd_requests++;
}

Route Gateway::Pick(const Exchange& ex) {
  std::lock_guard l(mu_);
  const Nanos now = NowNanos();
  // A backend left unchosen since its last sample is re-priced toward its prior, so that it is
  // tried again (policy/backend_cost_model.h).
  for (const auto& b : backends_) {
    if (b->cost_model) b->cost_model->Age(now);
  }
  Candidates c = CandidatesFor(ex);
  std::vector<Target>& entries = c.entries;
  std::vector<Target>& decodes = c.decodes;
  std::vector<policy::Candidate>& entry_c = c.entry_c;
  std::vector<policy::Candidate>& decode_c = c.decode_c;
  // Without a prefill or colocated engine left, a decode engine serves the whole request.
  const bool decode_only = entries.empty();
  if (decode_only) {
    entries = decodes;
    entry_c = decode_c;
    decodes.clear();
    decode_c.clear();
  }
  Route out;
  // An attempt after the first is a retry: its tenant was charged once, the limiter takes it.
  policy::AdmissionPipeline& admission = ex.token_keys ? *token_admission_ : *admission_;
  const policy::Admission a = admission.Admit(
      policy::AdmissionRequest{.blocks = ex.keys,
                               .input_tokens = ex.input_tokens,
                               .output_tokens = ex.req.max_tokens,
                               .tenant = ex.tenant,
                               .tenant_tokens = ex.input_tokens + ex.req.n * ex.req.max_tokens,
                               .decode_load = decode_pressure_.Load(now),
                               .now = now,
                               .retry = ex.attempts > 0},
      entry_c, decode_c, rng_);
  const policy::RouteDecision& d = a.route;
  out.estimated_ttft_s = d.estimated_ttft_s;
  if (tracer_) {
    out.policy = policy::FormatPolicyName(admission.router().options(), config_.fairness);
    out.candidates = static_cast<int>(entry_c.size() + decode_c.size());
    out.store_tokens = d.expected_store_tokens;
  }
  if (!a.admitted()) {
    out.rejected = true;
    out.no_backend = a.reason == "no_available_unit";
    out.reason = a.ReasonText();
    return out;
  }
  if (d.entry >= 0) {
    std::tie(out.entry, out.entry_rank) = entries[static_cast<size_t>(d.entry)];
    // Without a decode pick (the router skipped disaggregation) a prefill engine serves it whole.
    if (d.decode >= 0 && out.entry->config.role == BackendRole::kPrefill) {
      std::tie(out.decode, out.decode_rank) = decodes[static_cast<size_t>(d.decode)];
    }
  } else {
    // Too little to prefill for a hand-off (disagg_min_uncached): the decode engine does it all.
    std::tie(out.entry, out.entry_rank) = decodes[static_cast<size_t>(d.decode)];
  }
  out.cached_tokens = d.expected_cached_tokens;
  if (d.entry >= 0 && out.entry->config.kv_events.empty()) {
    // The engine keeps this prompt in place of what its cache has no room for; the index, which
    // the admission just told it holds the prompt, forgets what it dropped.
    cache_model_.Served(out.entry->HolderOf(out.entry_rank), ex.keys,
                        ex.token_keys ? config_.kv_block_size : admission_->router().options().block_tokens, now);
  }
  // Where the prefix comes from: HBM and the store tier; the rest is recomputed.
  const int64_t hbm_tokens = d.expected_cached_tokens - d.expected_store_tokens;
  ++stats_.route_tiers[d.expected_store_tokens > 0 ? 2 : hbm_tokens > 0 ? 1 : 0];
  stats_.route_tier_tokens[1] += hbm_tokens;
  stats_.route_tier_tokens[2] += d.expected_store_tokens;
  const policy::Candidate& chosen =
      d.entry >= 0 ? entry_c[static_cast<size_t>(d.entry)] : decode_c[static_cast<size_t>(d.decode)];
  out.queued_tokens = chosen.load.queued_prefill_tokens;
  out.cost_sample = policy::DispatchSample(d, chosen, ex.input_tokens);
  if (LogEnabled()) {  // the reason is for the access log only: not formatted when it is off
    out.reason = fmt::format("{}: {}{} (cached ~{} of {} tokens, hit=hbm:{},store:{}, est. ttft {:.3f} s{}{}{})",
                             policy::FormatPolicyName(admission.router().options(), config_.fairness),
                             out.entry->config.name,
                             out.entry_rank >= 0 ? fmt::format("/dp{}", out.entry_rank) : std::string(),
                             d.expected_cached_tokens, ex.input_tokens, hbm_tokens, d.expected_store_tokens,
                             d.estimated_ttft_s,
                             out.cost_sample.slot_waits > 0
                                 ? fmt::format(", waits for {} of {} in flight to end", out.cost_sample.slot_waits,
                                               chosen.load.running)
                                 : std::string(),
                             out.decode ? ", decode on " + out.decode->config.name : "",
                             d.hot_spot ? ", hot prefix spread" : "");
  }
  out.entry->Charge(out.entry_rank, 1, std::max<int64_t>(0, ex.input_tokens - out.cached_tokens));
  // Each routed request earns a fraction of a retry; the bucket is bounded.
  retry_tokens_ = std::min(retry_tokens_ + config_.retry_budget, 10.0 + 100 * config_.retry_budget);
  return out;
}

void Gateway::Handle(net::HttpRequest req, std::shared_ptr<net::HttpResponder> r) {
  const std::string_view path = req.path();
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (req.method != "POST") {
      return r->Respond(net::JsonError(405, "invalid_request_error", "use POST"));
    }
    return HandleGenerate(std::move(req), path == "/v1/chat/completions", std::move(r));
  }
  if (path == "/health") return r->Respond(net::HttpResponse{200, "text/plain", "ok\n", {}});
  if (path == "/ready") {
    return r->Respond(Ready() ? net::HttpResponse{200, "text/plain", "ready\n", {}}
                              : net::HttpResponse{503, "text/plain", "no backend available\n", {}});
  }
  if (path == "/v1/models") return r->Respond(Models());
  if (path == "/metrics") return r->Respond(Metrics());
  if (path.starts_with("/admin/")) return r->Respond(HandleAdmin(req));
  r->Respond(net::JsonError(404, "NotFoundError", fmt::format("no route for {}", std::string(path))));
}

void Gateway::HandleGenerate(net::HttpRequest req, bool chat, std::shared_ptr<net::HttpResponder> r) {
  auto ex = std::make_shared<Exchange>();
  ex->gw = this;
  ex->r = r;
  ex->client = std::move(req.peer);
  ex->req.chat = chat;  // for the route label of a request refused before it is parsed
  uint64_t entropy;
  {
    std::lock_guard l(mu_);
    stats_.requests++;
    entropy = rng_.Next() ^ trace_salt_;
  }
  ex->trace = TraceContext::FromHeader(net::FindHeader(req.headers, "traceparent"), entropy);
  if (tracer_) {
    const bool head = tracer_->HeadSample(ex->trace);
    // The engines are told the head decision (a trace kept later for its error or slowness
    // has the gateway's spans only).
    ex->trace.flags = head ? "01" : "00";
    ex->spans = std::make_unique<RequestTrace>(tracer_.get(), ex->trace, head, ex->arrived_unix_ns, ex->start,
                                               Mix64(entropy ^ 0x7ace));
  }
  // Tenant.
  const std::string key = net::BearerToken(req.headers);
  if (!key.empty()) {
    auto it = tenant_by_key_.find(key);
    if (it == tenant_by_key_.end()) {
      return ex->Refuse(net::JsonError(401, "invalid_api_key", "the API key is not known"), "invalid_api_key");
    }
    ex->tenant = it->second;
    ex->tenant_name = config_.tenants[it->second - 1].config.name;
  } else if (!config_.allow_anonymous) {
    return ex->Refuse(net::JsonError(401, "invalid_api_key", "an API key is required (Authorization: Bearer KEY)"),
                      "missing_api_key");
  } else {
    ex->tenant_name = "anonymous";
  }
  net::RequestError error;
  if (!net::ParseGenerateRequest(req.body, chat, &ex->req, &error)) return ex->Refuse(error.Response(), "invalid_request");
  ex->raw_body = std::move(req.body);  // forwarded as sent, not re-serialized
  {
    std::lock_guard l(mu_);
    ex->model_served = std::any_of(backends_.begin(), backends_.end(),
                                   [&](const auto& b) { return b->config.model == ex->req.model; });
    // Once per request: its retries stay on the version it was split to.
    if (ex->model_served) PickVersionLocked(*ex);
  }
  if (!ex->model_served) {
    return ex->Refuse(
        net::JsonError(404, "NotFoundError", fmt::format("The model `{}` does not exist.", ex->req.model), "model"),
        "unknown_model");
  }
  // Prefix keys: token blocks when the client sent ids, else chunks of the text (the
  // approximate index learns from the gateway's own decisions).
  if (encoder_ && ex->req.token_ids.empty()) {
    // The engine's own token ids: exact keys for text and chat prompts too.
    if (chat) {
      auto ids = encoder_->Chat(ex->raw_body);
      if (!ids.ok()) {
        return ex->Refuse(net::JsonError(400, "invalid_request_error",
                                         fmt::format("chat template: {}", std::string(ids.status().message())),
                                         "messages"),
                          "invalid_request");
      }
      ex->req.token_ids = *std::move(ids);
    } else {
      ex->req.token_ids = encoder_->Completion(ex->req.text);
    }
  }
  if (!ex->req.token_ids.empty()) {
    ex->token_keys = true;
    ex->input_tokens = static_cast<int64_t>(ex->req.token_ids.size());
    // A salted request's first block carries the salt in its extra keys, as the engine's
    // KV events report it (the indexer seeds that block with the same digest).
    ex->keys = HashTokenBlocks(ex->req.token_ids, static_cast<size_t>(config_.kv_block_size), 0,
                               CacheSaltDigest(ex->req.cache_salt));
  } else {
    const std::string& t = ex->req.text;
    ex->input_tokens = std::max<int64_t>(1, static_cast<int64_t>(t.size() / 4));
    const size_t chunk = static_cast<size_t>(config_.approx_chunk_bytes);
    // The salt seeds the chain: differently salted prompts never share an approximate prefix.
    BlockKey parent = ex->req.cache_salt.empty() ? kRootBlockKey : ExtraKeyOf(ex->req.cache_salt);
    for (size_t i = 0; i + chunk <= t.size(); i += chunk) {
      parent = HashContentBlock(parent, XXH3_64bits(t.data() + i, chunk));
      ex->keys.push_back(parent);
    }
  }
  // Quotas and fair share are decided with the route, in Pick (the admission pipeline).
  std::weak_ptr<Exchange> weak = ex;
  r->OnClientGone([weak] {
    if (auto e = weak.lock()) {
      std::lock_guard l(e->mu);
      e->cancelled = true;
      if (e->call) e->call->Cancel();
    }
  });
  ex->Dispatch();
}

}  // namespace myriad::gateway
