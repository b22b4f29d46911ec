#include "policy/admission.h"

#include <algorithm>

namespace myriad::policy {

std::string Admission::ReasonText() const {
  return retry ? "retry_" + std::string(reason) : std::string(reason);
}

AdmissionPipeline::AdmissionPipeline(Router* router, TenantPolicy* tenants, PrefixIndex* index,
                                     RecomputeLimiter* limiter)
    : router_(router), tenants_(tenants), index_(index), limiter_(limiter) {
  for (size_t t = 0; t < tenants_->size(); ++t) {
    max_priority_ = std::max(max_priority_, tenants_->config(static_cast<uint32_t>(t)).priority);
  }
}

Admission AdmissionPipeline::Admit(const AdmissionRequest& req, std::span<const Candidate> entry,
                                   std::span<const Candidate> decode, Rng& rng, AdmissionTargets* targets) {
  Admission a;
  a.retry = req.retry;
  a.route = router_->Route(
      RouteRequest{.blocks = req.blocks, .input_tokens = req.input_tokens, .output_tokens = req.output_tokens, .now = req.now},
      entry, decode, rng);
  const RouteDecision& d = a.route;
  if (d.rejected) {
    a.reason = d.reason;
    return a;
  }
  if (targets) {
    if (std::string_view why = targets->Refuses(req, d); !why.empty()) {
      a.reason = why;
      return a;
    }
  }
  if (!req.retry) {
    // The per-request signal: a tenant is judged by the load this very request meets.
    const double slo_s = NanosToSeconds(router_->options().ttft_slo);
    const double load = slo_s > 0 ? d.estimated_ttft_s / slo_s : 0;
    if (std::string_view why = tenants_->Admit(req.tenant, req.tenant_tokens, load, req.now, req.decode_load); !why.empty()) {
      a.reason = why;
      return a;
    }
  }
  if (limiter_ && limiter_->enabled()) {
    const int64_t known = targets ? targets->CachedTokens(req, d) : 0;
    const int64_t cached = std::max(d.expected_cached_tokens, known);
    const double tokens = static_cast<double>(std::max<int64_t>(req.input_tokens - cached, 1));
    if (req.retry) {
      limiter_->Charge(req.now, tokens);
    } else if (!limiter_->Admit(req.now, tokens, max_priority_ - tenants_->config(req.tenant).priority)) {
      a.reason = kRecomputeLimited;
      return a;
    }
  }
  // The unit that computes the prompt will hold its KV before its engine says so. When the
  // decode unit prefills itself (entry -1), or on the decode side of a P/D pair, none: the
  // router matches prefixes on entry candidates only, and the decode side's engine reports
  // what it keeps of a transferred prompt through its own KV events.
  if (index_ && d.entry >= 0 && !req.blocks.empty()) {
    index_->AddProvisional(entry[static_cast<size_t>(d.entry)].holder, 0, req.blocks, req.now);
  }
  return a;
}

}  // namespace myriad::policy
