#pragma once
// `myriad gateway`: the OpenAI-compatible, KV-aware front door. Each request is authenticated
// (API key -> tenant), checked, admitted by the tenant policy, routed by policy::Router over the
// prefix index (the same objects the simulator runs), and proxied to an engine with its SSE
// stream passed through as it arrives; P/D requests run prefill then decode following vLLM's
// kv_transfer_params protocol. Failures before the first byte are retried elsewhere within a
// budget; backends that keep failing are ejected until their health checks pass again.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "core/clock.h"
#include "core/log_throttle.h"
#include "core/rng.h"
#include "gateway/backends.h"
#include "gateway/config.h"
#include "gateway/etcd_discovery.h"
#include "gateway/exchange_services.h"
#include "gateway/request_metrics.h"
#include "gateway/rollouts.h"
#include "policy/tenant_fill.h"
#include "gateway/tracing.h"
#include "net/kv_event_subscriber.h"
#include "net/async_http_client.h"
#include "net/http_server.h"
#include "net/prometheus.h"
#include "policy/admission.h"
#include "policy/engine_cache_model.h"
#include "policy/kv_event_indexer.h"
#include "policy/prefill_cost.h"
#include "policy/prefix_index.h"
#include "policy/recompute_limiter.h"
#include "policy/router.h"
#include "policy/tenants.h"
#include "tokenizer/prompt_encoder.h"

namespace myriad::gateway {

// At most one log line per KV-event publisher per this interval for batches that fail to decode
// or apply; the next line says how many were held back.
inline constexpr Nanos kKvEventLogInterval = 10 * kSecond;

struct GatewayStats {
  uint64_t requests = 0;
  uint64_t retries = 0;
  uint64_t rejected = 0;       // 429: tenant policy or the router's SLO check
  uint64_t upstream_failures = 0;
  uint64_t client_cancels = 0;
  uint64_t ejections = 0;
  uint64_t pd_requests = 0;
  uint64_t slow_clients = 0;  // dropped for a backlog over max_client_backlog_bytes
  // Routed requests by where their prefix comes from: [0] none (all recomputed), [1] the
  // engine's HBM only, [2] its store tier (and HBM); and the prompt tokens expected from each
  // tier ([1] HBM, [2] store; [0] unused).
  uint64_t route_tiers[3] = {0, 0, 0};
  int64_t route_tier_tokens[3] = {0, 0, 0};
};

// It serves each request's exchange (gateway/exchange.h) through ExchangeServices, privately:
// only the exchanges it starts use them.
class Gateway : private ExchangeServices {
 public:
  // `clock` (core/clock.h; null: the real one) is what the decisions read: the health loop's
  // schedule, the provisional entries' TTL and the index's timestamps. Upstream and client
  // socket timeouts stay on real time.
  static absl::StatusOr<std::unique_ptr<Gateway>> Create(GatewayConfig config,
                                                         std::shared_ptr<Clock> clock = nullptr);
  ~Gateway() override;

  absl::Status Start();
  void Stop();
  uint16_t port() const { return http_ ? http_->port() : 0; }

  // Backends can come and go at run time (etcd, admin API).
  absl::Status AddBackend(BackendConfig config, bool from_etcd = false);
  // Removes the named backend; with `only_from_etcd`, only one that etcd registered (a static
  // backend of the same name stays).
  bool RemoveBackend(const std::string& name, bool only_from_etcd = false);
  std::vector<std::string> BackendNames() const;

  // Each access-log line (one JSON object per request) goes here; the default writes to the
  // configured file or stderr.
  void set_access_log(std::function<void(const std::string& line)> sink);
  GatewayStats stats() const;
  // Runs one round of health checks and metric scrapes now (tests; the loop does it on its
  // interval).
  void CheckHealthNow();
  // What the KV-event indexer has applied (zeros without event sources).
  policy::KvEventIndexerStats kv_event_stats() const;

 private:
  Gateway(GatewayConfig config, std::shared_ptr<Clock> clock);

  void Handle(net::HttpRequest req, std::shared_ptr<net::HttpResponder> r);
  void HandleGenerate(net::HttpRequest req, bool chat, std::shared_ptr<net::HttpResponder> r);
  net::HttpResponse HandleAdmin(const net::HttpRequest& req);
  net::HttpResponse Models() const;
  net::HttpResponse Metrics() const;
  bool Ready() const;
  void HealthLoop();
  int64_t NowNanos() const;

  // ExchangeServices.
  const GatewayConfig& config() const override { return config_; }
  bool shutting_down() const override { return shutting_down_; }
  // Admission (policy::AdmissionPipeline, under mu_).
  Route Pick(const Exchange& ex) override;
  Target PickDecodeAfterPrefill(const Exchange& ex) override;
  void HandOff(const Target& decode, int64_t kv_tokens) override;
  void FirstToken(const Target& b, int64_t queued_tokens, const policy::CostSample* sample) override;
  void Finished(const Target& b, bool ok, int64_t queued_tokens, int64_t decode_kv_tokens) override;
  bool SpendRetry() override;
  std::shared_ptr<net::Call> StartUpstream(net::CallRequest request, net::CallCallbacks callbacks) override;
  void CountRejected() override;
  void CountSlowClient() override;
  void Record(bool chat, int status, const RequestOutcome& outcome) override;
  bool LogEnabled() override;
  void Log(const std::string& line) override;

  struct Candidates {
    std::vector<Target> entries, decodes;
    std::vector<policy::Candidate> entry_c, decode_c;
  };
  // The model version that serves the exchange (its rollout's split; "" without one), under mu_.
  void PickVersionLocked(Exchange& ex);
  // The backends (or steered DP ranks) that may serve the exchange now, under mu_.
  Candidates CandidatesFor(const Exchange& ex) const;
  absl::Status AddBackendLocked(BackendConfig config, bool from_etcd);
  bool RemoveBackendLocked(const std::string& name, bool only_from_etcd);
  // The recompute limiter's rate for the backends there are now (routing.recompute_limit).
  void UpdateRecomputeRateLocked();
  // Models the backend's prefix cache with `capacity` (its GPU-tier holders), under mu_.
  void SetCacheCapacityLocked(Backend& b, policy::EngineCacheCapacity capacity);
  // Starts a subscriber for these backends' KV events (null when none publishes).
  absl::StatusOr<std::unique_ptr<net::KvEventSubscriber>> SubscribeEvents(
      const std::vector<std::shared_ptr<Backend>>& backends);
  void SubscribeLater(const std::string& name);
  void Unsubscribe(const std::string& name);

  GatewayConfig config_;
  std::shared_ptr<Clock> clock_;
  std::unique_ptr<net::HttpServer> http_;
  std::unique_ptr<net::AsyncHttpClient> upstream_;
  policy::PrefillCost cost_;
  std::unique_ptr<tokenizer::PromptEncoder> encoder_;  // null: approximate keys for text

  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Backend>> backends_;
  policy::HolderId next_holder_ = 0;
  policy::PrefixIndex index_;
  // What engines without KV events keep of the prompts sent to them (approximate routing).
  policy::EngineCacheModel cache_model_{&index_};
  std::unique_ptr<policy::Router> router_;         // text-chunk keys (approximate)
  std::unique_ptr<policy::Router> token_router_;   // token-block keys (exact, with events)
  std::unique_ptr<policy::RecomputeLimiter> limiter_;  // null: routing.recompute_limit 0
  // The simulator's admission pipeline, one per router; they share the tenants and limiter.
  std::unique_ptr<policy::AdmissionPipeline> admission_, token_admission_;
  std::unique_ptr<policy::KvEventIndexer> indexer_;
  std::unique_ptr<net::KvEventSubscriber> subscriber_;  // backends configured at Start
  std::mutex sub_mu_;  // guards late_subscribers_; never held with mu_ while stopping one
  std::map<std::string, std::unique_ptr<net::KvEventSubscriber>> late_subscribers_;  // added later
  policy::PublisherId next_publisher_ = 0;  // under mu_
  // KV-event failures logged per publisher (under mu_); the bound is in docs/gateway.md.
  LogThrottle kv_event_log_throttle_{kKvEventLogInterval};
  std::atomic<bool> events_started_{false};
  std::unique_ptr<EtcdDiscovery> discovery_;
  RolloutTable rollouts_;  // under mu_
  // Fill admission's decode signal: the TPOT of the streams relayed lately (under mu_).
  policy::DecodePressure decode_pressure_;
  policy::TenantPolicy tenants_;
  std::unordered_map<std::string, uint32_t> tenant_by_key_;
  Rng rng_;
  // Trace ids must differ between processes (the routing seed may not): mixed from the clock
  // and the OS at start.
  uint64_t trace_salt_ = 0;
  double retry_tokens_ = 10;
  GatewayStats stats_;
  std::map<std::pair<bool, int>, uint64_t> responses_;  // (chat route, status) -> count
  RequestMetrics request_metrics_;  // its own lock: recorded without mu_
  std::unique_ptr<Tracer> tracer_;  // null: tracing is off (no tracing.endpoint)

  std::function<void(const std::string&)> log_;
  std::mutex log_mu_;
  std::FILE* log_file_ = nullptr;

  std::thread health_;
  std::mutex health_round_mu_;  // serializes CheckHealthNow (the loop's and callers')
  std::unique_ptr<Sleeper> health_sleeper_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> started_{false};
  std::atomic<bool> shutting_down_{false};
};

}  // namespace myriad::gateway
