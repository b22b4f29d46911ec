#pragma once
// The global router: picks the prefill (or colocated) unit and the decode unit for a request.
// Load-only policies (random, round-robin, least-loaded) ignore the prefix index; prefix-only
// takes the longest cached prefix; kv-aware estimates TTFT per candidate as Mooncake's
// Conductor does (queue time + prefill time of the uncached part + time to fetch a prefix held
// elsewhere) and takes the minimum; candidates that tie (identical units at the same load, e.g.
// an idle cluster) are chosen among by the prompt's blocks, so that distinct prompts spread
// over them instead of all going to the first. Hot-prefix spreading lets a request leave a saturated
// holder for another unit that copies the prefix's KV. Pure: the caller passes the state.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/block_hash.h"
#include "core/rng.h"
#include "core/time.h"
#include "policy/backend_cost_model.h"
#include "policy/load_balancer.h"
#include "policy/prefill_cost.h"
#include "policy/prefix_index.h"
#include "policy/tier_pricing.h"

namespace myriad::policy {

enum class RoutingPolicy { kRandom, kRoundRobin, kLeastLoaded, kPrefixOnly, kKvAware };

struct RouterOptions {
  RoutingPolicy policy = RoutingPolicy::kKvAware;
  bool spread_hot_prefixes = false;
  Nanos ttft_slo = 2 * kSecond;
  // Reject (HTTP 429) when the best estimate exceeds reject_factor x ttft_slo; 0 never rejects.
  double reject_factor = 0;
  // Prefill on the decode unit itself when the uncached part is at most this many tokens.
  int64_t disagg_min_uncached = 0;
  // A holder whose queue wait exceeds this is saturated: its prefix is worth copying elsewhere.
  double hot_queue_seconds = 0.5;
  // Bandwidth of a KV copy between units (one GPU's NIC, achieved).
  double fetch_bytes_per_s = 40e9;
  Nanos fetch_latency = 50 * kMicrosecond;
  int block_tokens = 512;
  // kv-aware: the path candidates load store-tier blocks over (tier_pricing.h); a candidate
  // without a store holder, or bytes_per_s 0, is priced on HBM and recompute alone.
  StorePath store{};
  // kv-aware: estimates within tie_tolerance x the best (or tie_tolerance_abs, whichever is
  // larger) count as equal, and among them the longest cached prefix wins, then the prompt's
  // key. A replica of a prefix is made only for a clear gain, and a decision does not flip on
  // a few milliseconds of timing noise (the live gateway and the simulator then agree).
  double tie_tolerance = 0.05;
  Nanos tie_tolerance_abs = 5 * kMillisecond;
  // kv-aware with an engine cache model (Router::UseEngineCaches): a request placed on a slot
  // engine displaces the prompt in the slot it takes, and that prompt's conversation, if it
  // comes back, recomputes what it had cached. The router ranks candidates by estimated TTFT +
  // this probability x that recompute (priced by the candidate's cost), so a miss goes where it
  // displaces least: an empty slot, or a short prompt. One constant, not a per-conversation
  // guess: the engine's slots are what the model knows. In [0, 1]; 0: ignore displacement.
  // 0.15, not the 0.5 first tried: on bench/approx_routing.sh 0.5 sent new conversations to the
  // engines holding the shortest prompts, a few of them, and the engines' hit rate fell from
  // 25% to 14-21% (docs/PERFORMANCE.md, issue 25). The probability used is learned from the
  // displacements the model sees come back or not (EngineCacheModel::ReturnProbability), with
  // this one as its prior.
  double evict_return_probability = 0.15;
};

// Parses "least-loaded", "kv-aware", "kv-aware+spread", "prefix-only+spread"...; the "+fair"
// suffix is accepted and reported through `fair` (tenant fairness lives in TenantPolicy).
struct PolicyName {
  RouterOptions options;
  bool fair = false;
};
absl::StatusOr<PolicyName> ParsePolicyName(std::string_view name, RouterOptions base = {});
std::string FormatPolicyName(const RouterOptions& o, bool fair);

class EngineCacheModel;

// A candidate without a store tier in the index.
inline constexpr HolderId kNoStoreHolder = ~HolderId{0};

struct Candidate {
  HolderId holder = 0;              // the unit's GPU-tier holder in the prefix index
  // The holder of every block the unit has without computing it: in its HBM or in its store
  // tier (KvPublisherHolders::reach). kv-aware prices loading what it holds past `holder`'s.
  HolderId store_holder = kNoStoreHolder;
  UnitLoad load;
  const PrefillCost* cost = nullptr;  // required for entry candidates under kv-aware
  // kv-aware: the path this unit loads store-tier blocks over; null: RouterOptions::store.
  const StorePath* store_path = nullptr;
  // Sequences the unit runs at once, a request beyond them waiting until one finishes
  // (llama-server's slots, --parallel); 0: not limited (a batching engine), or not known.
  int slots = 0;
};

// Requests in flight on `c` that must finish before one more gets a slot: 0 while a slot is
// free (a prompt beside running ones shares the compute, which QueueSeconds prices), else the
// sequences beyond its slots plus one. kv-aware prices each with the unit's learned
// PrefillCost::SlotWaitSeconds; a holder whose slots are all taken is then weighed against
// recomputing the prefix on an idle unit.
inline int64_t SlotWaits(const Candidate& c) {
  if (c.slots <= 0) return 0;
  const int64_t busy = int64_t{c.load.running} + c.load.waiting;
  return std::max<int64_t>(0, busy - c.slots + 1);
}

struct RouteRequest {
  std::span<const BlockKey> blocks;  // the prompt's full blocks
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  Nanos now = 0;
};

struct RouteDecision {
  int entry = -1;        // index into the entry candidates, -1 when rejected
  int decode = -1;       // index into decode candidates; -1: decode where it prefills
  bool rejected = false;
  std::string_view reason;       // why rejected
  int64_t expected_cached_tokens = 0;
  // Of those, the tokens loaded from the unit's store tier (the rest: its HBM, or a fetch).
  int64_t expected_store_tokens = 0;
  int fetch_from = -1;           // entry index whose KV is copied to `entry` first
  int64_t fetch_blocks = 0;      // leading blocks copied
  bool hot_spot = false;         // the longest-prefix holder was passed over for load
  double estimated_ttft_s = 0;
};

// What a dispatch on `chosen` (the candidate `d` sent the request to) teaches its learned cost
// model once the first token comes: the router's own token counts and the load it read. One
// definition for the gateway and the simulator.
CostSample DispatchSample(const RouteDecision& d, const Candidate& chosen, int64_t input_tokens);

class Router {
 public:
  // `index` may be null for the load-only policies.
  Router(RouterOptions options, PrefixIndex* index);

  RouteDecision Route(const RouteRequest& req, std::span<const Candidate> entry,
                      std::span<const Candidate> decode, Rng& rng);

  // The decode unit for a request whose prefill is done: least loaded (or the load-only
  // policy's own choice).
  int PickDecode(std::span<const Candidate> decode, Rng& rng);

  const RouterOptions& options() const { return options_; }

  // The entry candidate that Route would choose now without looking at the request (the
  // least-loaded one, from the entry ranking), or -1 when the choice depends on the request
  // or is random. For warming what the chosen unit will read while other work runs.
  int LikelyEntry() const;

  // Rankings of the entry and decode candidates' loads that the caller keeps current
  // (load_ranking.h); least-loaded choices then read them instead of scanning. Either may be
  // null (the default): scan.
  void UseLoadRankings(const LoadRanking* entry, const LoadRanking* decode) {
    entry_ranking_ = entry;
    decode_ranking_ = decode;
  }
  // kv-aware: a store every candidate can load from, priced past each candidate's own prefix
  // (tier_pricing.h). Null (the default): only the candidates' own store holders.
  void UseSharedStore(const SharedStoreView* store) { shared_store_ = store; }
  // kv-aware: the model of what engines without KV events hold (engine_cache_model.h), asked
  // what a placement would displace (RouterOptions::evict_return_probability). Null (the
  // default): displacement is free.
  void UseEngineCaches(const EngineCacheModel* caches) { engine_caches_ = caches; }

 private:
  void MatchAll(const RouteRequest& req, std::span<const Candidate> entry);
  // Extends each candidate's reach by the shared store's run past its own prefix.
  void ReachIntoSharedStore(const RouteRequest& req, std::span<const Candidate> entry);
  // Among the kv-aware scores within rounding of `best_score`, the one for this request:
  // by its last block key, or in turn when it has no full block.
  int PickAmongTies(const RouteRequest& req, double best_score);
  // kv-aware: the expected recompute that placing the request on candidate `c` causes others.
  double DisplacementSeconds(const RouteRequest& req, const Candidate& c) const;
  // The wait before `c` starts the request's prefill: prompt tokens queued ahead and, on a
  // slot engine with every slot taken, the requests it waits for (SlotWaits).
  static double WaitSeconds(const Candidate& c);

  struct Estimate {
    double ttft = std::numeric_limits<double>::infinity();  // infinity: not a candidate
    double score = std::numeric_limits<double>::infinity();  // ttft + displacement: ranks
    int fetch_from = -1;
    int64_t fetch_blocks = 0;
    int64_t cached = 0;
    int64_t store = 0;  // of `cached`, loaded from the store tier
  };

  RouterOptions options_;
  PrefixIndex* index_;
  std::unique_ptr<LoadBalancer> balancer_;          // load-only policies and the decode side
  std::unique_ptr<LoadBalancer> decode_balancer_;
  const LoadRanking* entry_ranking_ = nullptr;
  const LoadRanking* decode_ranking_ = nullptr;
  const SharedStoreView* shared_store_ = nullptr;
  const EngineCacheModel* engine_caches_ = nullptr;
  std::vector<PrefixMatch> matches_;                 // scratch
  std::vector<std::pair<uint32_t, uint32_t>> store_runs_;  // (own prefix, store's run past it), scratch
  std::vector<uint32_t> matched_;                    // per entry candidate, scratch
  std::vector<uint32_t> reach_;                      // per entry candidate: HBM or store, scratch
  std::vector<Estimate> estimates_;                  // per entry candidate, scratch
  std::vector<int> tied_;                            // scratch
  uint64_t tie_counter_ = 0;                         // ties of requests without a full block
};

}  // namespace myriad::policy
