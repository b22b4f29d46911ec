#pragma once
// Spans out to an OpenTelemetry collector: OTLP/HTTP with the JSON encoding (POST
// {endpoint}/v1/traces), from a bounded queue by a thread of its own, so a request handler only
// ever appends to a queue. A dead or slow collector costs spans, never requests: past the
// queue's bound spans are dropped and counted, a batch the collector refuses with 429, 502,
// 503 or 504 (or cannot take: no connection, a timeout) is retried with backoff, honouring
// Retry-After up to max_backoff, and dropped and counted after max_retries.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "net/http.h"

namespace myriad::net {

namespace otlp {

using AttributeValue = std::variant<std::string, int64_t, double, bool>;
struct Attribute {
  std::string key;
  AttributeValue value;
};

// The protobuf enums' numbers, which the JSON encoding writes as integers.
enum class SpanKind { kInternal = 1, kServer = 2, kClient = 3 };
enum class StatusCode { kUnset = 0, kOk = 1, kError = 2 };

struct Span {
  std::string trace_id;  // 32 lower-case hex digits
  uint64_t span_id = 0;
  uint64_t parent_span_id = 0;  // 0: a root span
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  int64_t start_unix_ns = 0;
  int64_t end_unix_ns = 0;
  std::vector<Attribute> attributes;
  StatusCode status = StatusCode::kUnset;
  std::string status_message;
};

struct Resource {
  std::vector<Attribute> attributes;  // service.name...
  std::string scope_name = "myriad";
  std::string scope_version;
};

// One ExportTraceServiceRequest in OTLP's JSON encoding: ids in hex, enums as integers, 64-bit
// integers (times, intValue) as decimal strings.
std::string EncodeTraces(const Resource& resource, std::span<const Span> spans);

}  // namespace otlp

// Upper bounds of the exporter's settings (docs/gateway.md, tracing:).
inline constexpr size_t kMaxOtlpQueueSpans = 1'000'000;
inline constexpr size_t kMaxOtlpBatchSpans = 10'000;
inline constexpr int kMaxOtlpRetries = 10;
inline constexpr Nanos kMaxOtlpInterval = 60 * kSecond;

struct OtlpExporterOptions {
  std::string endpoint;  // http://host:port of the collector's OTLP/HTTP receiver
  otlp::Resource resource;
  size_t max_queue = 8192;  // spans waiting; more are dropped
  size_t max_batch = 512;   // spans per POST
  Nanos flush_interval = kSecond;  // a partial batch waits at most this long
  Nanos timeout = 2 * kSecond;     // per POST, connect included
  int max_retries = 3;             // per batch, after its first POST
  Nanos max_backoff = 5 * kSecond;  // the longest wait between tries, Retry-After included
};

struct OtlpExporterStats {
  uint64_t exported = 0;            // spans the collector accepted
  uint64_t dropped_queue_full = 0;  // spans refused at Export: the queue was full
  uint64_t dropped_export_failed = 0;  // spans of batches given up on
  uint64_t posts = 0;               // POSTs made, retries included
  uint64_t retries = 0;
};

class OtlpExporter {
 public:
  static absl::StatusOr<std::unique_ptr<OtlpExporter>> Create(OtlpExporterOptions options);
  // Stop().
  ~OtlpExporter();
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  // Queues one trace's spans, whole or not at all (a trace cut in half is worse than none);
  // false when they do not fit, counted as dropped. Never blocks on the collector.
  bool Export(std::vector<otlp::Span> spans);
  // Sends what is queued with one POST per batch and no retries, giving up at the first that
  // fails (so it takes at most about one timeout with a dead collector), then stops the
  // thread; later Exports are dropped and counted. Idempotent; not concurrently.
  void Stop();
  OtlpExporterStats stats() const;

 private:
  explicit OtlpExporter(OtlpExporterOptions options, HostPort collector);
  void Run();
  // POSTs one batch with retries (none when stopping); true when the collector took it.
  bool Send(const std::string& body, bool stopping);
  // Waits up to `d`, returning early when stopping; true when stopping.
  bool WaitStopping(Nanos d);

  const OtlpExporterOptions options_;
  const HostPort collector_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<otlp::Span> queue_;
  bool stopping_ = false;
  OtlpExporterStats stats_;
  std::thread thread_;
};

}  // namespace myriad::net
