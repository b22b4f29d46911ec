#pragma once
// The core of `myriad loadgen`: an HTTP load generator for OpenAI completion endpoints (an
// engine, the gateway, or any proxy in front of them) on net::AsyncHttpClient. Closed loop
// (`concurrency` requests always in flight) or open loop (Poisson arrivals at `rate`, at most
// `concurrency` in flight). Bodies are a pure function of the options and the request's index,
// so two runs with one seed send the same bytes.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/stats.h"
#include "core/time.h"

namespace myriad::net {
class AsyncHttpClient;
enum class CallStage;
struct HostPort;
}

namespace myriad::cli {

struct LoadgenOptions {
  std::string url = "http://127.0.0.1:8000";
  std::string path = "/v1/completions";
  std::string model = "emu-model";
  int concurrency = 8;
  // The run stops sending at whichever bound comes first; 0: that bound is off (not both).
  Nanos duration = 10 * kSecond;
  int64_t requests = 0;
  double rate = 0;  // > 0: open loop at this many requests per second
  int max_tokens = 16;
  bool stream = false;
  int prompt_words = 64;         // words of each request's own part of the prompt
  int shared_prefix_words = 0;   // words of its group's shared prefix, before its own part
  int prefix_groups = 1;
  uint64_t seed = 1;
  int threads = 1;               // client io threads
  Nanos timeout = 60 * kSecond;  // per request, whole call
  // Sent as "Authorization: Bearer KEY" (a gateway's tenant key, vLLM's --api-key); empty: none.
  std::string api_key;
};

// Names the first flag that is wrong ("--concurrency: must be >= 1").
absl::Status ValidateLoadgenOptions(const LoadgenOptions& o);

// The request bodies: {"model", "prompt", "max_tokens", "stream"[, "stream_options"]}, where the
// prompt is the shared prefix of the request's group (drawn per group) followed by words of its
// own. One word is one token of the emulator's stand-in tokenizer.
class BodyMaker {
 public:
  explicit BodyMaker(const LoadgenOptions& o);
  int Group(uint64_t index) const;
  std::string Prompt(uint64_t index) const;
  std::string Body(uint64_t index) const;

 private:
  const LoadgenOptions o_;
  std::vector<std::string> prefixes_;
};

// The usage object of an OpenAI response body (or of a stream's usage chunk); -1 for a count
// that is absent. cached is usage.prompt_tokens_details.cached_tokens.
struct Usage {
  int64_t completion = -1, prompt = -1, cached = -1;
};
Usage ParseUsage(std::string_view body);

// Counts the generated tokens of an OpenAI SSE stream fed in arbitrary pieces: the usage chunk's
// completion_tokens when the server sends one, otherwise the chunks still generating
// ("finish_reason":null), one token each.
class SseTokenCounter {
 public:
  void Feed(std::string_view data);
  int64_t tokens() const { return usage_.completion >= 0 ? usage_.completion : chunks_; }
  // From the usage chunk; -1 without one.
  int64_t prompt_tokens() const { return usage_.prompt; }
  int64_t cached_tokens() const { return usage_.cached; }
  bool done() const { return done_; }  // "data: [DONE]" seen

 private:
  void Event(std::string_view event);
  std::string pending_;
  int64_t chunks_ = 0;
  Usage usage_;
  bool done_ = false;
};

// How a call that got no HTTP answer failed, as reports count it: "connect_unavailable".
std::string CallFailureKind(const absl::Status& status, net::CallStage stage);

// What one call of a load run saw, for its `done` callback: the status, the gateway's
// X-Myriad-Backend header, when the first body byte came, and the stream (a 200 to a streamed
// request) or the body (otherwise: usage, or an error's message; the first 1 MiB).
struct TimedCall {
  uint64_t index = 0;
  std::chrono::steady_clock::time_point start, first;
  bool has_first = false;
  int status = 0;
  std::string backend;
  std::string prefill_backend;  // X-Myriad-Prefill-Backend: P/D, the engine that computed the prompt
  int64_t prefill_cached_tokens = -1;  // X-Myriad-Prefill-Cached-Tokens: what that engine's cache held
  SseTokenCounter sse;
  std::string body;
};

// The parts of a call every request of a run shares.
struct CallTarget {
  const net::HostPort* server = nullptr;
  std::string_view path;
  std::string_view api_key;  // empty: no Authorization header
  Nanos timeout = 0;         // first byte, idle and whole call
  bool stream = false;
};
using TimedCallDone = std::function<void(TimedCall& call, const absl::Status& status, net::CallStage stage)>;

// POSTs `body` as request `index` of a run and calls `done` once, from the client's thread, when
// the call ends; `start` is set just before it is sent.
void StartTimedCall(net::AsyncHttpClient& client, const CallTarget& target, uint64_t index, std::string body,
                    TimedCallDone done);

// The completion_tokens of a non-streaming response body; -1 when absent.
int64_t UsageCompletionTokens(std::string_view body);

struct LoadReport {
  LoadgenOptions options;
  uint64_t sent = 0;
  uint64_t ok = 0;
  uint64_t not_sent = 0;  // open loop: arrivals that found `concurrency` requests in flight
  std::map<std::string, uint64_t> errors;  // kind ("http_503", "connect_unavailable"...) -> count
  double elapsed_s = 0;     // first send to last completion
  int64_t output_tokens = 0;
  Distribution latency_ms;  // successful requests, send to last byte
  Distribution ttft_ms;     // successful streaming requests, send to first body byte

  uint64_t error_count() const;
  std::string Table() const;
  std::string Json() const;
};

// Runs the load and blocks until every request sent has finished (each is bounded by
// o.timeout). Uses `client` when given (tests), else its own with o.threads io threads.
absl::StatusOr<LoadReport> RunLoad(const LoadgenOptions& o, net::AsyncHttpClient* client = nullptr);

}  // namespace myriad::cli
