#pragma once
// The admission pipeline: every request, in the simulator and in the gateway, goes through the
// same steps in the same order. Route (Router) -> what the driver knows of the chosen target
// (a full queue, too little memory) -> tenant admission (TenantPolicy, load = this request's
// estimated TTFT / SLO) -> recompute limiter (optional) -> a provisional prefix-index entry on
// the unit that will compute the prompt. A step that rejects leaves the later ones untouched:
// a request the router refuses never charges its tenant, a tenant's refusal leaves no
// provisional entry. Retries (the unit or upstream failed before the first byte) skip the
// tenant, whose request was admitted once, and are charged to the limiter, never shed: their
// clients are mid-request. The driver applies the decision (dispatch, load accounting).
// Pure: time comes in as `now`, randomness as the router's generator.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/block_hash.h"
#include "core/rng.h"
#include "core/time.h"
#include "policy/prefix_index.h"
#include "policy/recompute_limiter.h"
#include "policy/router.h"
#include "policy/tenants.h"

namespace myriad::policy {

struct AdmissionRequest {
  std::span<const BlockKey> blocks;  // the prompt's full blocks
  int64_t input_tokens = 0;   // to prefill: the prompt, plus output already streamed on a retry
  int64_t output_tokens = 0;  // still to generate
  uint32_t tenant = 0;
  int64_t tenant_tokens = 0;  // what the tenant is charged: prompt + expected output
  // The decode side's load (policy::DecodePressure: recent TPOT over the SLO), which fill
  // admission reads beside the request's TTFT estimate; 0: none known.
  double decode_load = 0;
  Nanos now = 0;
  bool retry = false;
};

// What only the driver knows about the target the router chose. Optional.
class AdmissionTargets {
 public:
  virtual ~AdmissionTargets() = default;
  // Why the chosen target cannot take the request, or "" (a static string).
  virtual std::string_view Refuses(const AdmissionRequest& req, const RouteDecision& d) = 0;
  // Prompt tokens the chosen target really holds, when that may beat the index's guess (the
  // limiter charges what is left to compute); 0: trust the index.
  virtual int64_t CachedTokens(const AdmissionRequest& req, const RouteDecision& d) = 0;
};

struct Admission {
  // The router's choice: entry (-1: the decode unit prefills itself), decode, expected cached
  // tokens, the KV fetch source, hot_spot, the TTFT estimate. Meaningful when admitted.
  RouteDecision route;
  std::string_view reason;  // why rejected (a static string); empty: admitted
  bool retry = false;

  bool admitted() const { return reason.empty(); }
  // The reason as reports, metrics and 429 bodies give it: retries apart ("retry_" + reason).
  std::string ReasonText() const;
};

// Reasons of the pipeline's own steps (the router's and the tenant policy's are theirs).
inline constexpr std::string_view kRecomputeLimited = "recompute_limited";

class AdmissionPipeline {
 public:
  // `router` and `tenants` are required; `index` (provisional entries) and `limiter` may be
  // null. All must outlive the pipeline; several pipelines may share a tenant policy and a
  // limiter (the gateway has one per kind of prefix key).
  AdmissionPipeline(Router* router, TenantPolicy* tenants, PrefixIndex* index, RecomputeLimiter* limiter);

  // Decides on `req` over the candidates (as Router::Route takes them).
  Admission Admit(const AdmissionRequest& req, std::span<const Candidate> entry, std::span<const Candidate> decode,
                  Rng& rng, AdmissionTargets* targets = nullptr);

  Router& router() { return *router_; }
  const RecomputeLimiter* limiter() const { return limiter_; }

 private:
  Router* router_;
  TenantPolicy* tenants_;
  PrefixIndex* index_;
  RecomputeLimiter* limiter_;
  int max_priority_ = 0;  // of the configured tenants: the limiter's top class
};

}  // namespace myriad::policy
