#pragma once
// The gateway's view of its backends: configuration, health (active checks and passive
// ejection after consecutive errors), the load it has put on each (in-flight requests, prompt
// tokens not yet prefilled) and what each engine's /metrics says. Guarded by the owner's lock.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/config.h"
#include "net/http.h"
#include "net/http_client.h"
#include "policy/backend_cost_model.h"
#include "policy/backend_health.h"
#include "policy/decode_load.h"
#include "policy/engine_cache_model.h"
#include "policy/load_balancer.h"
#include "policy/prefix_index.h"

namespace myriad::gateway {

// One DP rank of a backend whose ranks the gateway steers itself (vLLM and SGLang honour an
// X-data-parallel-rank header): each rank has its own KV cache, so its own index holder, and
// its own load.
struct RankState {
  policy::HolderId holder = 0;
  policy::HolderId store_holder = 0;  // HBM and store tier together (KvPublisherHolders::reach)
  int64_t inflight = 0;
  int64_t queued_prefill_tokens = 0;
  double running = 0, waiting = 0, kv_usage = 0;  // the engine's metrics with engine="<rank>"
  policy::DecodeCharge decode_charge;
};

struct Backend {
  BackendConfig config;
  net::HostPort address;
  policy::HolderId holder = 0;  // its entries in the prefix index (ranks empty)
  // What it holds in HBM or in its store tier (ranks empty). Each engine's own: its CPU events
  // say what it can load, and the gateway cannot tell whether another engine reads the same store.
  policy::HolderId store_holder = 0;
  std::vector<RankState> ranks;  // dp_ranks > 1: one per DP rank, steered by header
  bool from_etcd = false;

  // Health: passive ejection and active checks (the policy's state machine), and what only
  // the gateway knows.
  policy::BackendHealth health;
  bool draining = false;  // by an operator: no new requests
  bool removed = false;   // deregistered; kept while requests are in flight

  // Load the gateway itself has placed.
  int64_t inflight = 0;
  int64_t queued_prefill_tokens = 0;
  // A decode engine: the P/D requests handed to it and not finished, and their KV; what its
  // load ranks by at hand-off (policy/decode_load.h), not its scraped metrics.
  policy::DecodeCharge decode_charge;

  // From the engine's /metrics (vllm:num_requests_running, _waiting, kv_cache_usage_perc).
  double running = 0, waiting = 0, kv_usage = 0;

  uint64_t requests = 0, failures = 0;

  // Its prefill cost learned from its first tokens (routing.learn_cost; null when off): what
  // the router prices it with, shared by its DP ranks.
  std::shared_ptr<policy::BackendCostModel> cost_model;  // shared within a cost_class

  // The health checker's kept-alive connection (its thread only: under the round's lock).
  std::unique_ptr<net::HttpClient> health_client;
  // Asking the engine for its prefix cache's capacity (approximate routing): rounds of health
  // checks until the next probe, the wait after the next failure (doubling to a bound) and the
  // probes no endpoint answered. The health checker's too.
  int cache_probe_wait = 0;
  int cache_probe_backoff = 1;
  uint64_t cache_probe_failures = 0;
  // Its slots as the engine reports them (llama-server's GET /slots; health.slots_interval):
  // when next to ask, the wait after a refusal (501 under --no-slots, 404 from an engine
  // without it; doubling to a bound), and the slots whose modelled content the reports dropped.
  // The health checker's too.
  Nanos slots_due = 0;
  Nanos slots_backoff = 0;
  uint64_t slots_corrected = 0;
  // The capacity it is modelled with, as last set (the model's own copy decides).
  policy::EngineCacheCapacity cache_capacity;

  bool available() const { return health.available() && !draining && !removed; }
  policy::UnitLoad Load() const;
  // The load of one DP rank (ranks not empty).
  policy::UnitLoad RankLoad(size_t rank) const;
  // The holder of a rank's entries (-1: the backend's own).
  policy::HolderId HolderOf(int rank) const {
    return rank >= 0 && static_cast<size_t>(rank) < ranks.size() ? ranks[static_cast<size_t>(rank)].holder : holder;
  }
  policy::HolderId StoreHolderOf(int rank) const {
    return rank >= 0 && static_cast<size_t>(rank) < ranks.size() ? ranks[static_cast<size_t>(rank)].store_holder
                                                                  : store_holder;
  }
  // Every holder the backend's entries are under.
  std::vector<policy::HolderId> Holders() const;
  // Load placed on (rank) or taken off (-) it by the gateway.
  void Charge(int rank, int64_t requests, int64_t prefill_tokens);
  // A P/D request of `tokens` prompt + output tokens handed to (rank of) this decode engine
  // (+1), or its decode call ended (-1).
  void ChargeDecode(int rank, int sign, int64_t tokens);
};

// The engine metrics a router needs, summed over label sets (DP ranks, engines). Unknown lines
// are skipped; the older name vllm:gpu_cache_usage_perc is read too.
struct ScrapedLoad {
  bool any = false;
  double running = 0, waiting = 0, kv_usage = 0;
  struct Engine {
    double running = 0, waiting = 0, kv_usage = 0;
  };
  // By the `engine` label's value when it is a number (vLLM's DP ranks); others are summed only.
  std::vector<Engine> by_engine;
};
ScrapedLoad ParseEngineMetrics(std::string_view exposition);

// Records a request outcome; returns true when this failure ejected the backend.
bool RecordOutcome(Backend& b, bool ok);
// Records a health check; returns the state change's name ("readmitted", "unhealthy",
// "healthy") or "".
std::string_view RecordHealth(Backend& b, bool ok);

}  // namespace myriad::gateway
