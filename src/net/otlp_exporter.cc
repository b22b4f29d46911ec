#include "net/otlp_exporter.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <optional>
#include <nlohmann/json.hpp>

#include "net/http_client.h"
#include "net/json_text.h"

namespace myriad::net {

using json = nlohmann::json;

namespace otlp {

namespace {

json Value(const AttributeValue& v) {
  // int64 is a string in proto3's JSON mapping (a JSON number loses precision past 2^53).
  if (const auto* s = std::get_if<std::string>(&v)) return {{"stringValue", *s}};
  if (const auto* i = std::get_if<int64_t>(&v)) return {{"intValue", std::to_string(*i)}};
  if (const auto* b = std::get_if<bool>(&v)) return {{"boolValue", *b}};
  const double d = std::get<double>(v);
  // JSON has no NaN or infinity; proto3's mapping spells them as strings.
  if (std::isnan(d)) return {{"doubleValue", "NaN"}};
  if (std::isinf(d)) return {{"doubleValue", d > 0 ? "Infinity" : "-Infinity"}};
  return {{"doubleValue", d}};
}

json Attributes(const std::vector<Attribute>& attrs) {
  json out = json::array();
  for (const auto& a : attrs) out.push_back({{"key", a.key}, {"value", Value(a.value)}});
  return out;
}

}  // namespace

std::string EncodeTraces(const Resource& resource, std::span<const Span> spans) {
  json out_spans = json::array();
  for (const Span& s : spans) {
    json j = {{"traceId", s.trace_id},
              {"spanId", fmt::format("{:016x}", s.span_id)},
              {"name", s.name},
              {"kind", static_cast<int>(s.kind)},
              {"startTimeUnixNano", std::to_string(s.start_unix_ns)},
              {"endTimeUnixNano", std::to_string(s.end_unix_ns)},
              {"attributes", Attributes(s.attributes)}};
    if (s.parent_span_id != 0) j["parentSpanId"] = fmt::format("{:016x}", s.parent_span_id);
    json status = {{"code", static_cast<int>(s.status)}};
    if (!s.status_message.empty()) status["message"] = s.status_message;
    j["status"] = std::move(status);
    out_spans.push_back(std::move(j));
  }
  json scope = {{"name", resource.scope_name}};
  if (!resource.scope_version.empty()) scope["version"] = resource.scope_version;
  json request = {
      {"resourceSpans",
       json::array({{{"resource", {{"attributes", Attributes(resource.attributes)}}},
                     {"scopeSpans", json::array({{{"scope", scope}, {"spans", std::move(out_spans)}}})}}})}};
  return JsonText(request);
}

}  // namespace otlp

namespace {

// Retry-After in seconds (the HTTP-date form is not worth a date parser here: collectors send
// seconds); nullopt when absent or not a number.
std::optional<Nanos> RetryAfter(const Headers& headers) {
  const std::string* v = FindHeader(headers, "Retry-After");
  if (!v) return std::nullopt;
  int64_t seconds = 0;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), seconds);
  if (ec != std::errc() || end != v->data() + v->size() || seconds < 0) return std::nullopt;
  return std::min<int64_t>(seconds, 24 * 3600) * kSecond;
}

bool RetryableStatus(int status) { return status == 429 || status == 502 || status == 503 || status == 504; }

}  // namespace

absl::StatusOr<std::unique_ptr<OtlpExporter>> OtlpExporter::Create(OtlpExporterOptions options) {
  auto hp = ParseHttpUrl(options.endpoint);
  if (!hp.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("tracing.endpoint: '{}' is not an http://host:port URL", options.endpoint));
  }
  if (options.max_queue < 1 || options.max_queue > kMaxOtlpQueueSpans || options.max_batch < 1 ||
      options.max_batch > kMaxOtlpBatchSpans || options.max_retries < 0 || options.max_retries > kMaxOtlpRetries ||
      options.flush_interval <= 0 || options.flush_interval > kMaxOtlpInterval || options.timeout <= 0 ||
      options.timeout > kMaxOtlpInterval || options.max_backoff < 0 || options.max_backoff > kMaxOtlpInterval) {
    return absl::InvalidArgumentError("tracing: a setting is out of its bounds (docs/gateway.md)");
  }
  std::unique_ptr<OtlpExporter> e(new OtlpExporter(std::move(options), *hp));
  e->thread_ = std::thread([p = e.get()] { p->Run(); });
  return e;
}

OtlpExporter::OtlpExporter(OtlpExporterOptions options, HostPort collector)
    : options_(std::move(options)), collector_(std::move(collector)) {}

OtlpExporter::~OtlpExporter() { Stop(); }

bool OtlpExporter::Export(std::vector<otlp::Span> spans) {
  {
    std::lock_guard l(mu_);
    if (stopping_ || queue_.size() + spans.size() > options_.max_queue) {
      stats_.dropped_queue_full += spans.size();
      return false;
    }
    for (auto& s : spans) queue_.push_back(std::move(s));
    if (queue_.size() < options_.max_batch) return true;
  }
  cv_.notify_one();
  return true;
}

void OtlpExporter::Stop() {
  {
    std::lock_guard l(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

OtlpExporterStats OtlpExporter::stats() const {
  std::lock_guard l(mu_);
  return stats_;
}

bool OtlpExporter::WaitStopping(Nanos d) {
  std::unique_lock l(mu_);
  cv_.wait_for(l, std::chrono::nanoseconds(d), [&] { return stopping_; });
  return stopping_;
}

void OtlpExporter::Run() {
  for (;;) {
    std::vector<otlp::Span> batch;
    bool stopping;
    {
      std::unique_lock l(mu_);
      cv_.wait_for(l, std::chrono::nanoseconds(options_.flush_interval),
                   [&] { return stopping_ || queue_.size() >= options_.max_batch; });
      stopping = stopping_;
      if (queue_.empty()) {
        if (stopping) return;
        continue;
      }
      const size_t n = std::min(queue_.size(), options_.max_batch);
      batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.begin() + static_cast<ptrdiff_t>(n)));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
    }
    // Encoded here, off the request path.
    const std::string body = otlp::EncodeTraces(options_.resource, batch);
    const bool ok = Send(body, stopping);
    std::lock_guard l(mu_);
    (ok ? stats_.exported : stats_.dropped_export_failed) += batch.size();
    if (stopping && !ok) {
      // A collector that fails the last flush would fail the rest too: stopping stays bounded
      // by one timeout.
      stats_.dropped_export_failed += queue_.size();
      queue_.clear();
      return;
    }
  }
}

bool OtlpExporter::Send(const std::string& body, bool stopping) {
  HttpClient client(collector_, HttpClientOptions{.timeout = options_.timeout, .max_response_bytes = size_t{1} << 20});
  Nanos backoff = 100 * kMillisecond;
  for (int attempt = 0;; ++attempt) {
    {
      std::lock_guard l(mu_);
      ++stats_.posts;
      if (attempt > 0) ++stats_.retries;
    }
    auto res = client.Request("POST", "/v1/traces", body, "application/json");
    if (res.ok() && res->status >= 200 && res->status < 300) return true;
    // Other statuses (400: the collector cannot read it) will not get better by sending again.
    const bool retryable = !res.ok() || RetryableStatus(res->status);
    if (!retryable || stopping || attempt >= options_.max_retries) return false;
    Nanos wait = backoff;
    if (res.ok()) {
      if (auto ra = RetryAfter(res->headers)) wait = *ra;
    }
    wait = std::min(wait, options_.max_backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
    if (WaitStopping(wait)) stopping = true;
  }
}

}  // namespace myriad::net
