#pragma once
// The gateway's per-request series for /metrics: time to first token (at the first streamed
// token, not the response header), inter-token gaps, request duration and token counts by model
// and tenant, and refusals by model, tenant and reason. Every label is bounded (BoundedLabel):
// a client cannot add series by sending new model names or keys.
#include <cstdint>
#include <map>
#include <mutex>
#include <string_view>
#include <tuple>
#include <utility>

#include "gateway/stream_meter.h"
#include "net/prometheus.h"

namespace myriad::gateway {

// One finished request, as the metrics count it.
struct RequestOutcome {
  std::string_view model;          // a model the gateway serves; empty: unknown (label "other")
  std::string_view tenant;         // empty: refused before a tenant was known
  std::string_view reject_reason;  // refused by the gateway itself: why; empty otherwise
  bool ok = false;                 // answered with a status below 400
  double duration_s = 0;
  double ttft_s = -1;              // to the first streamed token; -1: none (not streamed)
  const StreamMeter* meter = nullptr;  // the answer's gaps between token events
  int64_t prompt_tokens = -1, output_tokens = -1;  // -1: unknown
  std::string_view version;  // of a rolled-out model (gateway/rollouts.h); empty: none
};

class RequestMetrics {
 public:
  // Label caps (docs/gateway.md): values past them are counted as "other".
  static constexpr size_t kMaxModels = 16;
  static constexpr size_t kMaxTenants = 64;
  static constexpr size_t kMaxReasons = 16;
  static constexpr std::string_view kUnauthenticated = "unauthenticated";

  RequestMetrics();
  void Record(const RequestOutcome& o);
  // Appends the families (each once, with all its label sets).
  void Write(net::PrometheusWriter& w) const;

 private:
  struct Series {
    net::HistogramCounts ttft, itl, duration;
    uint64_t prompt_tokens = 0, generation_tokens = 0;
  };
  using Key = std::pair<std::string_view, std::string_view>;  // model, tenant

  mutable std::mutex mu_;
  net::BoundedLabel models_{kMaxModels}, tenants_{kMaxTenants}, reasons_{kMaxReasons};
  std::map<Key, Series> series_;
  std::map<std::tuple<std::string_view, std::string_view, std::string_view>, uint64_t> rejections_;
};

}  // namespace myriad::gateway
