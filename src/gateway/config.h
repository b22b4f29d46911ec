#pragma once
// The gateway's configuration (`myriad gateway --config gateway.yaml`): where it listens, its
// backends, routing, tenants, timeouts, retries and health checks. Every setting has a default
// an operator can start from; every error names the file, line and key.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "policy/backend_health.h"
#include "policy/engine_cache_model.h"
#include "policy/router.h"
#include "policy/tenants.h"

namespace myriad::gateway {

enum class BackendRole { kColocated, kPrefill, kDecode };
std::string_view RoleName(BackendRole role);

inline constexpr int kMaxDpRanks = 4096;

struct BackendConfig {
  std::string name;  // unique; a label in metrics, so keep the set bounded
  std::string url;   // http://host:port of the engine's OpenAI server
  BackendRole role = BackendRole::kColocated;
  std::string model;  // the served model name clients ask for
  int dp_ranks = 1;  // DP ranks behind the URL, each steered by X-data-parallel-rank (<= kMaxDpRanks)
  std::string kv_events;  // tcp://host:port of its KV-event publisher; empty: none
  std::string kv_replay;  // tcp://host:port of its replay socket; empty: none
  // Backends naming the same class (and serving the same model in the same role) share one
  // learned cost model: a pool of identical engines learns as one, as a simulated pool does,
  // and its members keep tying when idle. Empty: the backend learns its own.
  std::string cost_class;
  // Its prefix cache, for approximate routing (no kv_events): `cache_slots` > 0 is a
  // llama.cpp-like cache of that many slots, each keeping its last prompt, of `cache_tokens`
  // tokens each (0: unbounded); `cache_slots` 0 and `cache_tokens` > 0 is a paged pool of that
  // many tokens evicted least recently used (vLLM, SGLang). Both 0: what the engine reports
  // (/props, /get_server_info, vllm:cache_config_info), else the index's TTL alone. Bounds:
  // policy::kMaxEngineSlots and policy::kMaxEngineCacheTokens.
  int cache_slots = 0;
  int64_t cache_tokens = 0;
  // The model version it serves (policy::ValidateVersionName); empty: unversioned. A model
  // with a rollout sends each request to the backends of the version the split picks.
  std::string version;
};

// A model version rolling out beside the stable one (rollouts[]): `share` of the requests,
// picked by a stable hash of each request's key (policy/rollout.h), go to `canary`'s backends.
inline constexpr size_t kMaxRollouts = 64;
struct RolloutConfig {
  std::string model;
  std::string stable;
  std::string canary;
  double share = 0;  // in [0, 1]
};

struct TenantEntry {
  policy::TenantConfig config;
  std::vector<std::string> api_keys;
};

// Upper bounds of the config's sizes (docs/gateway.md lists every bound).
inline constexpr size_t kMaxBodyBytes = size_t{1} << 30;
inline constexpr size_t kMaxIndexEntries = size_t{1} << 30;
inline constexpr double kMaxRecomputeLimit = 100;
inline constexpr double kMaxStoreLoadGbps = 10'000;  // as the simulator's store.node_gbps
inline constexpr Nanos kMaxStoreLoadLatency = 10 * kSecond;
inline constexpr int kMaxSpansPerRequest = 1024;
inline constexpr Nanos kMaxSlowThreshold = 3600 * kSecond;

// tracing: each request's spans exported over OTLP/HTTP (gateway/tracing.h); off without an
// endpoint. The bounds are in docs/gateway.md.
struct TracingConfig {
  std::string endpoint;  // http://host:port of an OTLP/HTTP receiver (spans go to /v1/traces)
  std::string service_name = "myriad-gateway";
  double sample_ratio = 1.0;  // head sampling, unless the client's traceparent decided
  Nanos slow_threshold = 0;   // requests slower than this (TTFT or duration) are kept; 0: off
  bool keep_rejected = false;  // keep the traces of 429s too (errors >= 500 always are)
  size_t max_queue = 8192;     // spans waiting for the collector; more are dropped
  size_t max_batch = 512;      // spans per POST
  Nanos flush_interval = kSecond;
  Nanos export_timeout = 2 * kSecond;
  int max_retries = 3;
  Nanos max_backoff = 5 * kSecond;
  int max_spans_per_request = 64;  // a request's routing and attempt spans past this are dropped
};

struct GatewayConfig {
  std::string listen = "127.0.0.1:8000";
  int threads = 2;           // HTTP threads
  // Upstream client threads; 0 (the default) runs each upstream call on the HTTP thread of its
  // client's connection, which saves a thread hand-off per streamed chunk; n > 0 gives the
  // upstream side its own n threads.
  int upstream_threads = 0;
  size_t max_body_bytes = size_t{16} << 20;
  // A client that reads slower than its stream is produced: past this backlog (or when one
  // write to it stalls for client_write_timeout) it is dropped and its upstream call cancelled,
  // so one slow reader cannot hold an engine's batch slot or the gateway's memory.
  size_t max_client_backlog_bytes = size_t{4} << 20;
  Nanos client_write_timeout = 30 * kSecond;
  std::string admin_token;  // empty: admin endpoints are disabled
  std::vector<BackendConfig> backends;
  std::vector<RolloutConfig> rollouts;  // at most kMaxRollouts, one per model
  // A file the admin API's rollout changes are written to and read back over `rollouts` at
  // start (gateway/rollout_state.h), so a restart keeps a rollback or a promotion. Empty: the
  // changes live as long as the process. Relative to the working directory.
  std::string rollout_state;

  // Routing: a policy name as in the simulator ("kv-aware", "least-loaded", "round-robin"...),
  // and the performance model the TTFT estimate uses for every backend.
  std::string policy = "kv-aware";
  Nanos ttft_slo = 2 * kSecond;
  // The rollout windows' per-token target (policy/slo.h): a streamed answer of more than one
  // token is within the SLO only if its mean time per output token is at most this.
  Nanos tpot_slo = 100 * kMillisecond;
  double reject_factor = 0;  // reject when the best estimate exceeds this x SLO; 0: never
  std::string perf_model = "Llama-3.1-8B";
  std::string perf_gpu = "H100";
  int perf_tp = 1;
  int64_t disagg_min_uncached = 0;  // shorter uncached parts skip P/D
  // Each backend's prefill cost learned from its first-token times (policy/backend_cost_model.h),
  // starting from the performance model above; false: the performance model alone.
  bool learn_cost = true;
  // Prompt tokens to prefill admitted per second over all backends (policy/recompute_limiter.h),
  // as a fraction of the prefill and colocated backends' nominal prefill throughput under the
  // performance model above, the unit of the simulator's faults.recompute_limit: new requests
  // are shed (429 recompute_limited), lowest priority first, so that recompute after a backend
  // or store-node loss does not swamp the rest. 0: off; at most kMaxRecomputeLimit.
  double recompute_limit = 0;
  // The path an engine loads its store-tier blocks over (KV events of medium "CPU": vLLM's CPU
  // offload, an engine on Myriad's KV store), in gigabits per second, and its fixed latency:
  // the router prices a prefix held there as bytes over this path against recomputing it
  // (policy/tier_pricing.h). 0 Gb/s: store tiers are never priced.
  double store_load_gbps = 100;
  Nanos store_load_latency = kMillisecond;
  // Approximate routing (no events or no tokenizer): the gateway's own decisions, keyed on
  // chunks of the prompt text, remembered for `approx_ttl`.
  int approx_chunk_bytes = 128;
  Nanos approx_ttl = 120 * kSecond;
  size_t index_max_entries = size_t{16} << 20;
  // Exact routing: the engines' KV block size (vLLM's default 16 tokens); token-id prompts are
  // keyed in blocks of this size, as the KV events are.
  int kv_block_size = 16;
  // The model's tokenizer (a tokenizer.json, or a folder holding it and tokenizer_config.json
  // with the chat template): text and chat prompts then get exact block keys, as token-id
  // prompts do. Empty: text is routed approximately.
  std::string tokenizer;
  std::string tokenizer_config;
  uint64_t seed = 1;

  // Tenants: API keys map to tenants. With none configured every request is anonymous.
  std::vector<TenantEntry> tenants;
  bool allow_anonymous = true;
  bool fairness = false;

  // Upstream calls.
  Nanos connect_timeout = 2 * kSecond;
  Nanos first_byte_timeout = 120 * kSecond;
  Nanos idle_timeout = 60 * kSecond;
  int max_attempts = 3;         // per request, the first included
  double retry_budget = 0.2;    // retries at most this fraction of recent requests (+ a floor)

  // Health.
  Nanos health_interval = 5 * kSecond;
  Nanos health_timeout = 1 * kSecond;
  // Passive ejection and re-admission (health.eject_after_errors, .readmit_after_successes):
  // the same state machine and defaults as the simulator's units.
  policy::BackendHealthOptions backend_health;
  Nanos scrape_interval = 1 * kSecond;  // engine /metrics; 0: off
  // llama-server's GET /slots, asked at most this often (and once per health round) of each
  // backend the approximate index models as a slot cache, to correct the model with what the
  // engine really holds (policy::EngineCacheModel::ObserveSlots); 0: off. 100 ms-1 h.
  Nanos slots_interval = 1 * kSecond;

  std::string access_log = "-";  // "-": stderr; "": off; else a file path

  // etcd discovery: backends registered as JSON under this prefix (in addition to the static
  // list). Empty endpoint: off.
  std::string etcd_endpoint;
  std::string etcd_prefix = "/myriad/backends/";

  TracingConfig tracing;
};

absl::StatusOr<GatewayConfig> ParseGatewayConfig(std::string_view yaml, std::string_view source);
// Reads and parses the file, then applies `rollout_state` (the saved rollouts) over it.
absl::StatusOr<GatewayConfig> LoadGatewayConfig(const std::string& path);

// Checks one backend (also used for etcd registrations): name, URL, role.
absl::Status ValidateBackend(const BackendConfig& b, std::string_view where);
// Checks one rollout (config and admin API): model, distinct valid versions, share in [0, 1].
absl::Status ValidateRollout(const RolloutConfig& ro, std::string_view where);

}  // namespace myriad::gateway
