#pragma once
// Which requests' traces leave the gateway. The head decision is taken when a request arrives
// (so the engines it calls are told, in the traceparent's sampled flag): a client's own
// decision when it sent a traceparent (parent-based), else a fixed ratio of trace ids. The
// final decision is taken when the request ends, because the traces worth keeping most (the
// errors, the slow ones) are known only then: they are kept whatever the head said.
//
// Pure: the ratio test reads the trace id's random bits, so the same id gets the same answer
// in every process that samples it (OpenTelemetry's TraceIdRatioBased does the same).
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/time.h"

namespace myriad::policy {

struct TraceSamplerOptions {
  double sample_ratio = 1.0;  // in [0, 1]: the share of traces kept by the head decision
  // A request whose time to first token or whole duration exceeds this is kept; 0: off.
  Nanos slow_threshold = 0;
  // Keep the traces of requests refused with 429 (an overloaded fleet makes many: off by
  // default, so a storm of rejections does not flood the collector).
  bool keep_rejected = false;
};

enum class SampleReason { kDropped, kHead, kError, kRejected, kSlow };
std::string_view SampleReasonName(SampleReason reason);

class TraceSampler {
 public:
  explicit TraceSampler(TraceSamplerOptions options = {});

  // `parent_sampled`: the sampled flag of the client's traceparent, when it sent one.
  // `trace_id_low`: the trace id's last 8 bytes (its random part, as W3C level 2 has it).
  bool Head(std::optional<bool> parent_sampled, uint64_t trace_id_low) const;
  // At the request's end; a negative `ttft` means no token came.
  SampleReason Keep(bool head_sampled, int status, Nanos ttft, Nanos duration) const;

  const TraceSamplerOptions& options() const { return options_; }

 private:
  TraceSamplerOptions options_;
  uint64_t threshold_;  // trace ids whose low 56 bits are below this are kept
};

}  // namespace myriad::policy
