#pragma once
// `myriad loadgen --trace`: replays a recorded trace (the simulator's parsers, sim/trace_workload.h)
// against a live OpenAI endpoint, open loop at the trace's own arrival times, so one workload
// can run both through `myriad up` and through `myriad sim` (issue 19's twin check). Prompts are
// token ids derived from the trace's 512-token block ids, so the prefix sharing the trace
// describes is the sharing the gateway's index and the engines' caches see.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/stats.h"
#include "core/time.h"
#include "sim/trace_workload.h"

namespace myriad::net {
class AsyncHttpClient;
}

namespace myriad::cli {

// A trace with more records than this is refused before it is parsed: a replay holds one log
// entry per record, and a few thousand records is what a twin check needs.
inline constexpr int64_t kMaxReplayRecords = 1'000'000;
// --time-scale bounds: trace seconds per real second.
inline constexpr double kMinTimeScale = 1e-3, kMaxTimeScale = 1e6;
// A replay lasting longer than this many real seconds (the trace's span / --time-scale, about
// 116 days) is refused: nobody means it, and the schedule must stay within steady_clock's range.
inline constexpr double kMaxReplaySeconds = 1e7;
// The streamed completion request for record `index`: {"model", "prompt": [ids], "max_tokens":
// the record's output length (at least 1), "stream": true, "stream_options": include_usage}.
std::string TraceRequestBody(const sim::TraceRecord& record, uint64_t index, std::string_view model);

// Counts a trace file's records without parsing them (non-blank lines, less Azure's header) and
// refuses one past kMaxReplayRecords, naming the file and the first line over the bound.
absl::Status CheckTraceSize(const std::string& path, std::string_view format);

struct ReplayOptions {
  std::string url = "http://127.0.0.1:8000";
  std::string path = "/v1/completions";
  std::string model = "emu-model";
  std::string api_key;
  // The API key of each trace tenant (a record's "tenant" indexes it); a tenant past the list
  // uses api_key.
  std::vector<std::string> tenant_keys;
  int concurrency = 8;       // requests in flight at most; an arrival past it waits (delayed)
  double time_scale = 1.0;   // trace seconds per real second (`myriad up --speed`)
  int threads = 1;
  Nanos timeout = 60 * kSecond;  // per request, whole call
};

// Names the first flag that is out of its bounds ("--time-scale: must be in [0.001, 1e+06]...").
absl::Status ValidateReplayOptions(const ReplayOptions& o);

// One request of a replay, as its log line says it.
struct ReplayEntry {
  uint64_t index = 0;
  double scheduled_s = 0;  // real seconds after the start: the trace offset / time_scale
  double sent_s = 0;       // when it was actually sent (later when delayed by the cap)
  bool delayed = false;
  int status = 0;          // HTTP status; 0 when no response came
  std::string backend;     // the gateway's X-Myriad-Backend; empty when absent
  std::string prefill_backend;  // X-Myriad-Prefill-Backend (P/D); empty when absent
  double ttft_s = -1;      // -1: no first byte of a 200 answer
  double e2e_s = -1;
  int64_t prompt_tokens = -1;  // from usage; -1 when absent
  int64_t cached_tokens = -1;
  int64_t output_tokens = 0;
  std::string error;       // non-200: the body's error type and message; else a transport failure
};

struct ReplayReport {
  ReplayOptions options;
  std::string trace;  // file name, for the summary
  std::vector<ReplayEntry> entries;  // trace order
  uint64_t delayed = 0;
  std::map<std::string, uint64_t> outcomes;  // "200", "429", "connect_unavailable"... -> count
  Distribution ttft_ms;                      // 200 answers
  int64_t prompt_tokens = 0, cached_tokens = 0;
  double elapsed_s = 0;

  uint64_t ok() const;
  double prefix_hit_rate() const;  // cached / prompt tokens over the 200 answers reporting usage
  std::string Table() const;
  std::string Json() const;
  // One JSON object per line, per request, in trace order.
  std::string Log() const;
};

// The error an OpenAI error body names: "type: message" ({"error": {"type", "message"}}), or
// the body's first 200 bytes when it is not one.
std::string ErrorReason(std::string_view body);

// Sends every record and blocks until all have finished. Uses `client` when given (tests).
// Refuses options ValidateReplayOptions refuses, and a schedule past kMaxReplaySeconds.
absl::StatusOr<ReplayReport> RunReplay(const std::vector<sim::TraceRecord>& records, const ReplayOptions& o,
                                       net::AsyncHttpClient* client = nullptr);

}  // namespace myriad::cli
