#include "gateway/request_metrics.h"

#include <vector>

namespace myriad::gateway {

namespace {

// From 5 ms (a cached prompt on an idle engine) to 5 min (a long prompt in a deep queue).
std::vector<double> LatencyBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

}  // namespace

RequestMetrics::RequestMetrics() = default;

void RequestMetrics::Record(const RequestOutcome& o) {
  std::lock_guard l(mu_);
  const std::string_view model = o.model.empty() ? net::BoundedLabel::kOther : models_.Get(o.model);
  const std::string_view tenant = o.tenant.empty() ? kUnauthenticated : tenants_.Get(o.tenant);
  if (!o.reject_reason.empty()) rejections_[{model, tenant, reasons_.Get(o.reject_reason)}]++;
  auto [it, added] = series_.try_emplace(Key{model, tenant});
  Series& s = it->second;
  if (added) {
    s.ttft.bounds = LatencyBuckets();
    s.duration.bounds = LatencyBuckets();
    s.itl.bounds.assign(StreamMeter::kGapBounds.begin(), StreamMeter::kGapBounds.end());
    s.itl.counts.assign(StreamMeter::kGapBounds.size() + 1, 0);
  }
  if (o.prompt_tokens > 0) s.prompt_tokens += static_cast<uint64_t>(o.prompt_tokens);
  if (o.output_tokens > 0) s.generation_tokens += static_cast<uint64_t>(o.output_tokens);
  if (o.meter) {
    for (size_t i = 0; i < o.meter->gaps().size(); ++i) s.itl.counts[i] += o.meter->gaps()[i];
    s.itl.sum += o.meter->gap_sum_s();
  }
  if (!o.ok) return;
  if (o.ttft_s >= 0) s.ttft.Observe(o.ttft_s);
  s.duration.Observe(o.duration_s);
}

void RequestMetrics::Write(net::PrometheusWriter& w) const {
  using net::MetricType;
  std::lock_guard l(mu_);
  w.Family("myriad_gateway_rejections_total",
           "Requests the gateway refused itself (no engine answered them), by model, tenant and reason.",
           MetricType::kCounter);
  for (const auto& [k, n] : rejections_) {
    const auto& [model, tenant, reason] = k;
    w.Sample("myriad_gateway_rejections_total", {{"model", model}, {"tenant", tenant}, {"reason", reason}}, n);
  }
  w.Family("myriad_gateway_prompt_tokens_total",
           "Prompt tokens of answered requests: the engine's usage count, else the gateway's own.",
           MetricType::kCounter);
  for (const auto& [k, s] : series_) {
    w.Sample("myriad_gateway_prompt_tokens_total", {{"model", k.first}, {"tenant", k.second}}, s.prompt_tokens);
  }
  w.Family("myriad_gateway_generation_tokens_total",
           "Generated tokens sent to clients: the engine's usage count, else the streamed token events.",
           MetricType::kCounter);
  for (const auto& [k, s] : series_) {
    w.Sample("myriad_gateway_generation_tokens_total", {{"model", k.first}, {"tenant", k.second}},
             s.generation_tokens);
  }
  auto histogram = [&](std::string_view name, std::string_view help, net::HistogramCounts Series::*h) {
    bool first = true;
    for (const auto& [k, s] : series_) {
      w.Histogram(name, help, {{"model", k.first}, {"tenant", k.second}}, s.*h, first);
      first = false;
    }
    if (first) w.Family(name, help, MetricType::kHistogram);
  };
  histogram("myriad_gateway_ttft_seconds",
            "Time from the request's arrival to the first generated token sent to the client (streams only).",
            &Series::ttft);
  histogram("myriad_gateway_inter_token_latency_seconds",
            "Gaps between consecutive streamed token events sent to the client.", &Series::itl);
  histogram("myriad_gateway_request_seconds", "Duration of answered requests (status below 400).",
            &Series::duration);
}

}  // namespace myriad::gateway
