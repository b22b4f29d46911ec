#pragma once
// A request's spans on their way out of the gateway (tracing: in its config). Each exchange
// records its spans in a RequestTrace as it goes: the root (the client's request), one per
// routing decision, one per upstream attempt (whose id is the parent the engine is told in its
// traceparent), and the P/D hand-off. They wait in the exchange until its end, when the
// sampling decision (policy::TraceSampler: the head's, or an error's, or a slow request's) says
// whether they go to the exporter (net/otlp_exporter.h) or are dropped.
//
// Times are wall clock (the collector's timeline), measured as steady offsets from the
// request's arrival: the instant the access log prints, so both tell the same time.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gateway/config.h"
#include "net/http.h"
#include "net/otlp_exporter.h"
#include "net/prometheus.h"
#include "policy/trace_sampler.h"

namespace myriad::gateway {

struct Route;
struct TraceContext;

struct TracerStats {
  net::OtlpExporterStats exporter;
  uint64_t dropped_request_cap = 0;  // spans over tracing.max_spans_per_request
  uint64_t traces_sampled_out = 0;   // requests whose spans the sampler dropped
};

class Tracer;

class RequestTrace {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  RequestTrace(Tracer* tracer, const TraceContext& context, bool head_sampled, int64_t arrived_unix_ns,
               SteadyTime arrived, uint64_t entropy);

  uint64_t root_span_id() const { return root_id_; }
  bool head_sampled() const { return head_sampled_; }

  // One routing decision (an attempt's): what was chosen, from how many, and why.
  void Routing(SteadyTime begin, SteadyTime end, const Route& route, int64_t input_tokens);
  // An upstream attempt begins; returns its span id (the upstream's traceparent parent).
  uint64_t BeginAttempt(SteadyTime begin, std::string_view backend, const net::HostPort& server,
                        std::string_view target, int retry, std::string_view phase, int dp_rank);
  // The attempt ends: its HTTP status (0: none came), why it failed (empty: it did not), and
  // its time to first token (negative: none).
  void EndAttempt(SteadyTime end, int status, std::string_view error, double ttft_s);
  // P/D: the prompt was computed on `prefill`, the request moves to `decode`.
  void HandOff(SteadyTime begin, SteadyTime end, std::string_view prefill, std::string_view decode, int decode_rank);

  // The request's end: the root span, and the sampling decision; the trace is exported or
  // dropped. Attributes of the client's request go on the root.
  struct Outcome {
    std::string_view route;  // "/v1/completions"...
    bool chat = false;
    std::string_view model;
    std::string_view tenant;
    std::string_view client;
    std::string_view backend;
    std::string_view reject_reason;
    std::string_view error;
    bool stream = false;
    int status = 0;
    int attempts = 0;
    int64_t input_tokens = -1;
    int64_t output_tokens = -1;
    double ttft_s = -1;
  };
  void Finish(SteadyTime end, const Outcome& outcome);

 private:
  int64_t Wall(SteadyTime t) const;
  uint64_t NextId();
  // Adds a child of the root unless the request's cap is reached.
  net::otlp::Span* AddChild(std::string name, net::otlp::SpanKind kind, SteadyTime begin);

  Tracer* tracer_;
  std::string trace_id_;
  uint64_t client_parent_;  // the client's span (its traceparent), 0: none
  bool head_sampled_;
  int64_t arrived_unix_ns_;
  SteadyTime arrived_;
  uint64_t entropy_;
  uint64_t root_id_;
  std::vector<net::otlp::Span> spans_;  // children of the root, in order
  int open_attempt_ = -1;  // index in spans_ of the attempt in progress
  uint64_t over_cap_ = 0;
  bool finished_ = false;
};

// The gateway's tracing: the sampler and the exporter. Thread-safe.
class Tracer {
 public:
  // Null when tracing is off (no endpoint).
  static absl::StatusOr<std::unique_ptr<Tracer>> Create(const TracingConfig& config);

  // The head decision for a request whose trace context is `context` (the client's sampled
  // flag when it sent a traceparent).
  bool HeadSample(const TraceContext& context) const;
  size_t max_spans_per_request() const { return static_cast<size_t>(config_.max_spans_per_request); }
  // Flushes what is queued (bounded by one export timeout) and stops exporting.
  void Stop();
  TracerStats stats() const;

 private:
  friend class RequestTrace;
  explicit Tracer(const TracingConfig& config) : config_(config), sampler_(SamplerOptions(config)) {}
  static policy::TraceSamplerOptions SamplerOptions(const TracingConfig& c);
  // A request ended: its spans (root last) go out when the sampler keeps them.
  void Done(std::vector<net::otlp::Span> spans, policy::SampleReason reason, uint64_t over_cap);

  const TracingConfig config_;
  const policy::TraceSampler sampler_;
  std::unique_ptr<net::OtlpExporter> exporter_;
  std::atomic<uint64_t> over_cap_{0};
  std::atomic<uint64_t> sampled_out_{0};
};

// The tracer's counters in the gateway's /metrics (myriad_gateway_trace_*).
void WriteTracerMetrics(const TracerStats& stats, net::PrometheusWriter& w);

}  // namespace myriad::gateway
