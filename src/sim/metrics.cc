#include "sim/metrics.h"

namespace myriad::sim {

void RequestMetrics::OnArrival(Nanos now, const Request& r) {
  ++arrived;
  arrived_input_tokens += r.input_tokens;
  arrived_output_tokens += r.output_tokens;
  in_system.Add(now, 1);
}

void RequestMetrics::OnReject(Nanos now, const Request& r, const std::string& reason) {
  ++rejected[reason];
  rejected_input_tokens += r.input_tokens;
  rejected_output_tokens += r.output_tokens;
  in_system.Add(now, -1);
}

void RequestMetrics::OnComplete(Nanos now, const ReqState& s) {
  ++completed;
  in_system.Add(now, -1);
  const Request& r = s.req;
  input_tokens += r.input_tokens;
  output_tokens += r.output_tokens;
  cached_tokens += std::max(s.cached_tokens, 0);
  if (s.preemptions > 0) ++preempted_requests;
  const Nanos ttft = s.first_token - r.arrival;
  ttft_s.Add(NanosToSeconds(ttft));
  e2e_s.Add(NanosToSeconds(now - r.arrival));
  bool ok = ttft <= slo_ttft_;
  if (r.output_tokens > 1) {
    const Nanos tpot = (now - s.first_token) / (r.output_tokens - 1);
    tpot_s.Add(NanosToSeconds(tpot));
    ok = ok && tpot <= slo_tpot_;
  }
  if (ok) {
    ++good;
    good_input_tokens += r.input_tokens;
    good_output_tokens += r.output_tokens;
  }
}

void RequestMetrics::OnUnfinished(Nanos now, const ReqState& s) {
  ++rejected["unfinished_at_end"];
  unfinished_output_tokens += s.generated;
  rejected_input_tokens += s.req.input_tokens;
  rejected_output_tokens += s.req.output_tokens;
  in_system.Add(now, -1);
}

}  // namespace myriad::sim
