#include "gateway/tracing.h"

#include <fmt/format.h>

#include <charconv>
#include <optional>

#include "core/rng.h"
#include "gateway/exchange.h"
#include "gateway/exchange_services.h"

namespace myriad::gateway {

namespace otlp = net::otlp;

namespace {

void Set(otlp::Span& s, std::string key, otlp::AttributeValue v) {
  s.attributes.push_back(otlp::Attribute{std::move(key), std::move(v)});
}

void SetString(otlp::Span& s, std::string key, std::string_view v) {
  if (!v.empty()) Set(s, std::move(key), std::string(v));
}

}  // namespace

RequestTrace::RequestTrace(Tracer* tracer, const TraceContext& context, bool head_sampled, int64_t arrived_unix_ns,
                           SteadyTime arrived, uint64_t entropy)
    : tracer_(tracer),
      trace_id_(context.trace_id),
      client_parent_(context.parent_span),
      head_sampled_(head_sampled),
      arrived_unix_ns_(arrived_unix_ns),
      arrived_(arrived),
      entropy_(entropy),
      root_id_(NextId()) {}

int64_t RequestTrace::Wall(SteadyTime t) const {
  return arrived_unix_ns_ + std::chrono::duration_cast<std::chrono::nanoseconds>(t - arrived_).count();
}

uint64_t RequestTrace::NextId() {
  // A span id is random in W3C's sense: unique within the trace, never zero.
  uint64_t id = Mix64(entropy_++);
  return id == 0 ? 1 : id;
}

otlp::Span* RequestTrace::AddChild(std::string name, otlp::SpanKind kind, SteadyTime begin) {
  // The root is the last slot of the cap.
  if (finished_ || spans_.size() + 1 >= tracer_->max_spans_per_request()) {
    ++over_cap_;
    return nullptr;
  }
  otlp::Span& s = spans_.emplace_back();
  s.trace_id = trace_id_;
  s.span_id = NextId();
  s.parent_span_id = root_id_;
  s.name = std::move(name);
  s.kind = kind;
  s.start_unix_ns = s.end_unix_ns = Wall(begin);
  return &s;
}

void RequestTrace::Routing(SteadyTime begin, SteadyTime end, const Route& route, int64_t input_tokens) {
  otlp::Span* s = AddChild("route", otlp::SpanKind::kInternal, begin);
  if (!s) return;
  s->end_unix_ns = Wall(end);
  SetString(*s, "myriad.route.policy", route.policy);
  Set(*s, "myriad.route.candidates", static_cast<int64_t>(route.candidates));
  Set(*s, "myriad.route.estimated_ttft_s", route.estimated_ttft_s);
  if (route.rejected) {
    SetString(*s, "myriad.route.rejected", route.reason);
    s->status = otlp::StatusCode::kError;
    s->status_message = route.reason;
    return;
  }
  SetString(*s, "myriad.route.backend", route.entry->config.name);
  if (route.entry_rank >= 0) Set(*s, "myriad.route.dp_rank", static_cast<int64_t>(route.entry_rank));
  if (route.decode) SetString(*s, "myriad.route.decode_backend", route.decode->config.name);
  const int64_t hbm = route.cached_tokens - route.store_tokens;
  Set(*s, "myriad.route.tier", fmt::format("hbm:{},store:{}", hbm, route.store_tokens));
  Set(*s, "myriad.route.cached_tokens", route.cached_tokens);
  Set(*s, "myriad.route.input_tokens", input_tokens);
  Set(*s, "myriad.route.queued_tokens", route.queued_tokens);
}

uint64_t RequestTrace::BeginAttempt(SteadyTime begin, std::string_view backend, const net::HostPort& server,
                                    std::string_view target, int retry, std::string_view phase, int dp_rank) {
  otlp::Span* s = AddChild(fmt::format("POST {}", target), otlp::SpanKind::kClient, begin);
  if (!s) {
    open_attempt_ = -1;
    return NextId();  // the engine still gets a parent of its own
  }
  open_attempt_ = static_cast<int>(spans_.size() - 1);
  Set(*s, "http.request.method", std::string("POST"));
  Set(*s, "server.address", server.host);
  Set(*s, "server.port", static_cast<int64_t>(server.port));
  Set(*s, "url.path", std::string(target));
  Set(*s, "myriad.backend", std::string(backend));
  Set(*s, "myriad.retry", static_cast<int64_t>(retry));
  Set(*s, "myriad.phase", std::string(phase));
  if (dp_rank >= 0) Set(*s, "myriad.dp_rank", static_cast<int64_t>(dp_rank));
  return s->span_id;
}

void RequestTrace::EndAttempt(SteadyTime end, int status, std::string_view error, double ttft_s) {
  if (open_attempt_ < 0) return;
  otlp::Span& s = spans_[static_cast<size_t>(open_attempt_)];
  open_attempt_ = -1;
  s.end_unix_ns = Wall(end);
  if (status > 0) Set(s, "http.response.status_code", static_cast<int64_t>(status));
  if (ttft_s >= 0) Set(s, "myriad.ttft_s", ttft_s);
  // A client span is an error on any failure or any 4xx/5xx (OpenTelemetry's HTTP conventions).
  if (!error.empty() || status >= 400) {
    s.status = otlp::StatusCode::kError;
    s.status_message = !error.empty() ? std::string(error) : fmt::format("HTTP {}", status);
    Set(s, "error.type", status >= 400 ? std::to_string(status) : std::string("connection"));
  }
}

void RequestTrace::HandOff(SteadyTime begin, SteadyTime end, std::string_view prefill, std::string_view decode,
                           int decode_rank) {
  otlp::Span* s = AddChild("pd handoff", otlp::SpanKind::kInternal, begin);
  if (!s) return;
  s->end_unix_ns = Wall(end);
  Set(*s, "myriad.pd.prefill_backend", std::string(prefill));
  Set(*s, "myriad.pd.decode_backend", std::string(decode));
  if (decode_rank >= 0) Set(*s, "myriad.pd.decode_dp_rank", static_cast<int64_t>(decode_rank));
}

void RequestTrace::Finish(SteadyTime end, const Outcome& o) {
  if (finished_) return;
  // An attempt still open (the request ended around it: a shutdown, a slow client) ends here.
  if (open_attempt_ >= 0) EndAttempt(end, 0, "the request ended first", -1);
  finished_ = true;
  const auto duration = end - arrived_;
  const policy::SampleReason reason = tracer_->sampler_.Keep(
      head_sampled_, o.status,
      o.ttft_s >= 0 ? static_cast<Nanos>(o.ttft_s * 1e9) : Nanos{-1},
      std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count());
  if (reason == policy::SampleReason::kDropped) {
    tracer_->Done({}, reason, over_cap_);
    spans_.clear();
    return;
  }
  otlp::Span& root = spans_.emplace_back();
  root.trace_id = trace_id_;
  root.span_id = root_id_;
  root.parent_span_id = client_parent_;
  root.name = fmt::format("POST {}", o.route);
  root.kind = otlp::SpanKind::kServer;
  root.start_unix_ns = arrived_unix_ns_;
  root.end_unix_ns = Wall(end);
  Set(root, "http.request.method", std::string("POST"));
  Set(root, "url.path", std::string(o.route));
  Set(root, "http.route", std::string(o.route));
  Set(root, "http.response.status_code", static_cast<int64_t>(o.status));
  SetString(root, "client.address", o.client);
  // gen_ai.* as OpenTelemetry's GenAI conventions name them.
  Set(root, "gen_ai.operation.name", std::string(o.chat ? "chat" : "text_completion"));
  SetString(root, "gen_ai.request.model", o.model);
  if (o.input_tokens >= 0) Set(root, "gen_ai.usage.input_tokens", o.input_tokens);
  if (o.output_tokens >= 0) Set(root, "gen_ai.usage.output_tokens", o.output_tokens);
  SetString(root, "myriad.tenant", o.tenant);
  SetString(root, "myriad.backend", o.backend);
  SetString(root, "myriad.reject_reason", o.reject_reason);
  Set(root, "myriad.stream", o.stream);
  Set(root, "myriad.attempts", static_cast<int64_t>(o.attempts));
  if (o.ttft_s >= 0) Set(root, "myriad.ttft_s", o.ttft_s);
  Set(root, "myriad.sampled_by", std::string(policy::SampleReasonName(reason)));
  if (over_cap_ > 0) Set(root, "myriad.spans_dropped", static_cast<int64_t>(over_cap_));
  // A server span is an error on 5xx only: a 4xx is the client's (HTTP conventions).
  if (o.status >= 500) {
    root.status = otlp::StatusCode::kError;
    root.status_message = !o.error.empty() ? std::string(o.error) : fmt::format("HTTP {}", o.status);
    Set(root, "error.type", std::to_string(o.status));
  }
  tracer_->Done(std::move(spans_), reason, over_cap_);
  spans_.clear();
}

absl::StatusOr<std::unique_ptr<Tracer>> Tracer::Create(const TracingConfig& config) {
  if (config.endpoint.empty()) return nullptr;
  std::unique_ptr<Tracer> t(new Tracer(config));
  net::OtlpExporterOptions o;
  o.endpoint = config.endpoint;
  o.resource.attributes.push_back({"service.name", config.service_name});
  o.resource.scope_name = "myriad.gateway";
  o.max_queue = config.max_queue;
  o.max_batch = config.max_batch;
  o.flush_interval = config.flush_interval;
  o.timeout = config.export_timeout;
  o.max_retries = config.max_retries;
  o.max_backoff = config.max_backoff;
  auto e = net::OtlpExporter::Create(std::move(o));
  if (!e.ok()) return e.status();
  t->exporter_ = *std::move(e);
  return t;
}

policy::TraceSamplerOptions Tracer::SamplerOptions(const TracingConfig& c) {
  return policy::TraceSamplerOptions{
      .sample_ratio = c.sample_ratio, .slow_threshold = c.slow_threshold, .keep_rejected = c.keep_rejected};
}

bool Tracer::HeadSample(const TraceContext& context) const {
  uint64_t low = 0;
  // The id's last 16 hex digits: its random part (validated hex, or made by us).
  const std::string_view tail = std::string_view(context.trace_id).substr(16);
  std::from_chars(tail.data(), tail.data() + tail.size(), low, 16);
  std::optional<bool> parent;
  if (context.parent_span != 0) {
    unsigned flags = 0;
    std::from_chars(context.flags.data(), context.flags.data() + context.flags.size(), flags, 16);
    parent = (flags & 1) != 0;
  }
  return sampler_.Head(parent, low);
}

void Tracer::Done(std::vector<otlp::Span> spans, policy::SampleReason reason, uint64_t over_cap) {
  if (over_cap > 0) over_cap_ += over_cap;
  if (reason == policy::SampleReason::kDropped) {
    ++sampled_out_;
    return;
  }
  exporter_->Export(std::move(spans));
}

void WriteTracerMetrics(const TracerStats& s, net::PrometheusWriter& w) {
  w.Counter("myriad_gateway_trace_spans_exported_total", "Spans the OTLP collector accepted.", s.exporter.exported);
  w.Family("myriad_gateway_trace_spans_dropped_total",
           "Spans not exported: queue_full (the export queue was full), export_failed (the collector refused "
           "them or could not be reached after the retries), request_cap (over tracing.max_spans_per_request).",
           net::MetricType::kCounter);
  for (const auto& [reason, n] : {std::pair<const char*, uint64_t>{"queue_full", s.exporter.dropped_queue_full},
                                  {"export_failed", s.exporter.dropped_export_failed},
                                  {"request_cap", s.dropped_request_cap}}) {
    w.Sample("myriad_gateway_trace_spans_dropped_total", {{"reason", reason}}, n);
  }
  w.Counter("myriad_gateway_trace_export_retries_total", "OTLP POSTs sent again after a refusal or failure.",
            s.exporter.retries);
  w.Counter("myriad_gateway_traces_sampled_out_total", "Requests whose spans the sampler did not keep.",
            s.traces_sampled_out);
}

void Tracer::Stop() { exporter_->Stop(); }

TracerStats Tracer::stats() const {
  return TracerStats{.exporter = exporter_->stats(),
                     .dropped_request_cap = over_cap_.load(),
                     .traces_sampled_out = sampled_out_.load()};
}

}  // namespace myriad::gateway
