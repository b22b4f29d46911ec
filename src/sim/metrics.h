#pragma once
// What a run measures about requests: latency distributions, SLO attainment, token counts,
// rejections by reason, and the number in the system over time (for Little's law).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include <vector>

#include <nlohmann/json.hpp>

#include "core/stats.h"
#include "policy/tenants.h"
#include "sim/request_table.h"
#include "sim/timeseries.h"

namespace myriad::sim {

struct SloConfig;

// One request's end as `myriad sim --request-log` writes it: completed (`reason` empty), or
// rejected with its reason. Units are indices in the scenario's order (-1: none).
struct RequestOutcome {
  uint64_t id = 0;
  Nanos arrival = 0;
  Nanos end = 0;
  std::string_view reason;
  int32_t unit = -1;         // the unit that computed the prompt
  int32_t decode_unit = -1;  // the unit that decoded it (the same one when colocated)
  Nanos first_token = -1;
  int32_t cached_tokens = -1;
  int32_t input_tokens = 0, output_tokens = 0;
  uint32_t tenant = 0;
};
using OutcomeSink = std::function<void(const RequestOutcome&)>;

class RequestMetrics {
 public:
  // Per-tenant latency distributions cost a copy of every sample: kept only when asked for.
  RequestMetrics(Nanos slo_ttft, Nanos slo_tpot, bool per_tenant_latency = true)
      : slo_ttft_(slo_ttft), slo_tpot_(slo_tpot), per_tenant_latency_(per_tenant_latency) {}

  void OnArrival(Nanos now, const Request& r);
  void OnReject(Nanos now, const Request& r, const std::string& reason);
  void OnComplete(Nanos now, const ReqState& s);
  // A request still in flight when the run ends.
  void OnUnfinished(Nanos now, const ReqState& s);
  // Every completion and rejection is also handed here (null: none; off the hot path then).
  void set_outcome_sink(OutcomeSink sink) { sink_ = std::move(sink); }
  // Every arrival and end is also counted into the sampler's current window (null: none).
  void set_sampler(TimeSeriesSampler* sampler) { sampler_ = sampler; }

  uint64_t arrived = 0, completed = 0, good = 0;
  std::map<std::string, uint64_t> rejected;  // by reason (ordered: stable JSON)
  int64_t arrived_input_tokens = 0, arrived_output_tokens = 0;
  int64_t input_tokens = 0, output_tokens = 0;  // of completed requests
  int64_t good_input_tokens = 0, good_output_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t rejected_input_tokens = 0, rejected_output_tokens = 0;
  int64_t unfinished_output_tokens = 0;  // produced by requests cut off at the end
  int64_t preempted_requests = 0;
  Nanos first_arrival = -1, last_completion = -1;  // -1: none yet
  Distribution ttft_s, tpot_s, e2e_s;
  TimeWeighted in_system;

  struct TenantStats {
    uint64_t arrived = 0, completed = 0, good = 0, rejected = 0;
    int64_t good_tokens = 0;
    Distribution ttft_s;
  };
  std::vector<TenantStats> tenants;

  // SLO attainment (by arrival) and goodput (by completion) in buckets of virtual time.
  struct Bucket {
    uint64_t arrived = 0, good = 0;
    int64_t good_tokens = 0;
  };
  void EnableTimeline(Nanos bucket, Nanos horizon);
  std::vector<Bucket> timeline;
  Nanos timeline_bucket = 0;
  uint64_t corrupted = 0;  // completed with wrong output (silent data corruption)
  // Per tenant: requests, SLO attainment, TTFT percentiles (names from the scenario).
  nlohmann::ordered_json TenantReport(const std::vector<policy::TenantConfig>& configs) const;

 private:
  OutcomeSink sink_;
  TimeSeriesSampler* sampler_ = nullptr;
  Bucket& At(Nanos t) {
    const size_t i = static_cast<size_t>(std::max<Nanos>(t, 0) / timeline_bucket);
    return timeline[std::min(i, timeline.size() - 1)];
  }
  TenantStats& Tenant(uint32_t t) {
    if (t >= tenants.size()) tenants.resize(t + 1);
    return tenants[t];
  }
  Nanos slo_ttft_, slo_tpot_;
  bool per_tenant_latency_;
};

}  // namespace myriad::sim
