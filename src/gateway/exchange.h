#pragma once
// One client request on its way through the gateway: routing, the upstream call(s), retries,
// the streamed answer, and the access-log line at the end. Shared by the server's responder
// callbacks and the upstream client's callbacks, so its mutable state is under its own lock.
// It reaches the gateway only through ExchangeServices (lock order: the exchange's, then any
// the services take).
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/block_hash.h"
#include "gateway/backends.h"
#include "gateway/exchange_services.h"
#include "gateway/stream_meter.h"
#include "gateway/tracing.h"
#include "net/async_http_client.h"
#include "net/http_server.h"
#include "net/openai_request.h"

namespace myriad::gateway {

// W3C trace context: the incoming traceparent's trace id is kept (a new one is made when it is
// absent or malformed); each upstream call gets a fresh span id under it.
struct TraceContext {
  std::string trace_id;  // 32 hex digits
  std::string flags = "01";
  uint64_t parent_span = 0;  // the client's span id; 0: it sent no valid traceparent
  static TraceContext FromHeader(const std::string* header, uint64_t entropy);
  std::string Header(uint64_t span_entropy) const;
  std::string HeaderWithSpan(uint64_t span_id) const;
};

struct Exchange : std::enable_shared_from_this<Exchange> {
  using Clock = std::chrono::steady_clock;

  ExchangeServices* gw = nullptr;  // the gateway, as far as an exchange may see it
  std::shared_ptr<net::HttpResponder> r;
  net::GenerateRequest req;
  std::string raw_body;  // the client's body, as sent
  uint32_t tenant = 0;
  std::string tenant_name;
  std::vector<BlockKey> keys;
  bool token_keys = false;
  int64_t input_tokens = 0;
  TraceContext trace;
  Clock::time_point start = Clock::now();
  // For the access log: when the request arrived (wall clock) and from where.
  int64_t arrived_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::system_clock::now().time_since_epoch()).count();
  std::string client;
  bool model_served = false;  // a backend serves req.model: it may be a metrics label
  // The model version the rollout split picked (set before dispatch; "" without a rollout),
  // and whether the canary was picked but had no backend, so stable serves it.
  std::string version;
  bool version_fallback = false;
  std::unique_ptr<RequestTrace> spans;  // null: tracing is off

  std::mutex mu;  // guards everything below
  std::vector<std::string> tried;
  int attempts = 0;
  std::shared_ptr<net::Call> call;
  std::shared_ptr<Backend> backend;         // of the current call
  std::shared_ptr<Backend> decode_backend;  // P/D: the decode side chosen for this request
  std::string prefill_backend;              // P/D: the engine that computed the prompt
  int64_t prefill_cached = -1;              // P/D: the prompt tokens it found in its cache
  int rank = -1;         // the current call's DP rank (X-data-parallel-rank); -1: the engine's pick
  int decode_rank = -1;  // P/D: the decode side's
  int64_t queued = 0;  // prompt tokens charged to the backend's prefill queue until the first token
  int64_t decode_kv = 0;  // P/D: the KV tokens the decode call charged to its engine until it ends
  bool first_byte = false;
  bool first_token = false;  // the current call's first-token event has happened
  bool header_sent = false;  // the client's status line is gone: no retry past this
  bool end_relayed = false;  // the stream's end ([DONE], finish_reason) was written to the client
  bool finished = false;
  bool cancelled = false;
  bool pd = false;
  int upstream_status = 0;
  // An upstream error body (to retry or pass on), the prefill answer, or a 200 answer held
  // back until its first token (a stream) or its end (a whole answer).
  std::string held;
  std::string content_type;  // the current call's, for the client's answer
  // Set when the gateway itself fails the current call before its first token (an error
  // event, no token in time): why, and the status it is reported as.
  std::string call_failure;
  bool call_timed_out = false;
  std::string last_error;
  std::string decision;  // the routing decision and its reason, for the log
  int64_t cached_tokens = 0;
  int status_sent = 0;
  uint64_t bytes_out = 0;
  Clock::time_point first;  // the upstream's answer header
  StreamMeter meter;        // the current call's answer as it arrives: first token, gaps, usage
  std::string reject_reason;  // refused by the gateway (no engine saw it): why
  // The current call's dispatch, for the backend's learned cost: pending while the call may
  // still give a first-token time (a stream's first event; the whole answer of a prefill
  // phase or of an unstreamed one-token request). Other unstreamed answers give none: their
  // time includes the whole generation.
  bool cost_pending = false;
  policy::CostSample cost_sample;
  Clock::time_point call_start;

  // Routes and starts the next attempt; answers the client itself when none is possible.
  void Dispatch();
  // Answers `response` to a request the gateway refuses before routing it (401, 400, 404),
  // and logs and counts it like any other.
  void Refuse(net::HttpResponse response, std::string_view reason);

 private:
  // Bytes of a 200 answer held back before its first token, past which it is passed on as it
  // comes: a stream of that many bytes without a token is not an engine's answer.
  static constexpr size_t kMaxHeldBytes = size_t{1} << 20;

  void StartCall(std::shared_ptr<Backend> b, std::string body, bool prefill_phase);
  void OnHeader(int status, const net::Headers& headers, bool prefill_phase);
  void OnData(std::string_view data, bool prefill_phase);
  void OnDone(absl::Status st, net::CallStage stage, bool prefill_phase);
  void AfterPrefill(std::shared_ptr<Backend> prefill);
  // The one first-token event of a call (a stream's first token event; a whole answer's end):
  // the prompt's charge leaves the backend's prefill queue and, with `observe`, the learned
  // cost model gets the time, in one step of the gateway's. Caller holds mu.
  void OnFirstToken(bool observe);
  // Fails the current call before its first token; OnDone retries or answers. Caller holds mu.
  void FailCall(std::string why, bool timed_out);
  // The answer's header fields for the client.
  net::Headers ClientHeaders() const;
  // Sends the status line of a held 200 answer and what was held. Caller holds mu.
  void BeginClientStream();
  // Writes to the client, unless it does not keep up (then drops it). Caller holds mu.
  void Relay(std::string_view data);
  // Answers with an error unless the answer has started; logs. Caller holds mu.
  void FinishWithError(int status, std::string_view type, const std::string& message);
  void Finish(int status);  // caller holds mu
  bool Retryable(int status) const { return status == 429 || status >= 500; }
};

}  // namespace myriad::gateway
