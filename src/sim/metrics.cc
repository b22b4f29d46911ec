#include "sim/metrics.h"

#include "policy/slo.h"

namespace myriad::sim {

void RequestMetrics::EnableTimeline(Nanos bucket, Nanos horizon) {
  timeline_bucket = std::max<Nanos>(bucket, 1);
  timeline.assign(static_cast<size_t>((horizon + timeline_bucket - 1) / timeline_bucket) + 1, Bucket{});
}

void RequestMetrics::OnArrival(Nanos now, const Request& r) {
  ++arrived;
  if (first_arrival < 0) first_arrival = now;
  if (sampler_) sampler_->OnArrival();
  if (timeline_bucket > 0) ++At(now).arrived;
  ++Tenant(r.tenant).arrived;
  arrived_input_tokens += r.input_tokens;
  arrived_output_tokens += r.output_tokens;
  in_system.Add(now, 1);
}

void RequestMetrics::OnReject(Nanos now, const Request& r, const std::string& reason) {
  if (sink_) {
    sink_(RequestOutcome{.id = r.id, .arrival = r.arrival, .end = now, .reason = reason,
                         .input_tokens = r.input_tokens, .output_tokens = r.output_tokens,
                         .tenant = r.tenant});
  }
  ++rejected[reason];
  if (sampler_) sampler_->OnReject();
  ++Tenant(r.tenant).rejected;
  rejected_input_tokens += r.input_tokens;
  rejected_output_tokens += r.output_tokens;
  in_system.Add(now, -1);
}

void RequestMetrics::OnComplete(Nanos now, const ReqState& s) {
  if (sink_) {
    sink_(RequestOutcome{.id = s.req.id, .arrival = s.req.arrival, .end = now, .reason = {},
                         .unit = s.prefill_unit, .decode_unit = s.decode_unit,
                         .first_token = s.first_token, .cached_tokens = s.cached_tokens,
                         .input_tokens = s.req.input_tokens, .output_tokens = s.req.output_tokens,
                         .tenant = s.req.tenant});
  }
  ++completed;
  last_completion = now;
  in_system.Add(now, -1);
  const Request& r = s.req;
  input_tokens += r.input_tokens;
  output_tokens += r.output_tokens;
  cached_tokens += std::max(s.cached_tokens, 0);
  if (s.preemptions > 0) ++preempted_requests;
  const Nanos ttft = s.first_token - r.arrival;
  ttft_s.Add(NanosToSeconds(ttft));
  TenantStats& t = Tenant(r.tenant);
  ++t.completed;
  if (per_tenant_latency_) t.ttft_s.Add(NanosToSeconds(ttft));
  e2e_s.Add(NanosToSeconds(now - r.arrival));
  if (s.corrupt) ++corrupted;
  const Nanos tpot = policy::TimePerOutputToken(now - s.first_token, r.output_tokens);
  if (tpot >= 0) tpot_s.Add(NanosToSeconds(tpot));
  // The verdict the gateway's rollout windows give too (policy/slo.h).
  const bool ok = !s.corrupt && policy::MeetsSlo({.ttft = slo_ttft_, .tpot = slo_tpot_}, ttft, tpot);
  if (sampler_) {
    sampler_->OnComplete(NanosToSeconds(ttft), tpot >= 0 ? NanosToSeconds(tpot) : -1.0, ok,
                         int64_t{r.input_tokens} + r.output_tokens);
  }
  if (ok) {
    if (timeline_bucket > 0) {
      ++At(r.arrival).good;
      At(now).good_tokens += int64_t{r.input_tokens} + r.output_tokens;
    }
    ++good;
    ++t.good;
    t.good_tokens += int64_t{r.input_tokens} + r.output_tokens;
    good_input_tokens += r.input_tokens;
    good_output_tokens += r.output_tokens;
  }
}

void RequestMetrics::OnUnfinished(Nanos now, const ReqState& s) {
  ++rejected["unfinished_at_end"];
  if (sampler_) sampler_->OnReject();
  ++Tenant(s.req.tenant).rejected;
  unfinished_output_tokens += s.generated;
  rejected_input_tokens += s.req.input_tokens;
  rejected_output_tokens += s.req.output_tokens;
  in_system.Add(now, -1);
}

}  // namespace myriad::sim

namespace myriad::sim {

nlohmann::ordered_json RequestMetrics::TenantReport(const std::vector<policy::TenantConfig>& configs) const {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < tenants.size(); ++i) {
    const TenantStats& t = tenants[i];
    const Summary ttft = per_tenant_latency_ ? t.ttft_s.Summarize() : ttft_s.Summarize();
    out.push_back({{"tenant", i < configs.size() ? configs[i].name : "tenant" + std::to_string(i)},
                   {"arrived", t.arrived},
                   {"completed", t.completed},
                   {"rejected", t.rejected},
                   {"within_slo", t.good},
                   {"slo_attainment", t.arrived ? static_cast<double>(t.good) / static_cast<double>(t.arrived) : 0.0},
                   {"goodput_tokens", t.good_tokens},
                   {"ttft_p50_s", ttft.p50},
                   {"ttft_p99_s", ttft.p99}});
  }
  return out;
}

}  // namespace myriad::sim
