#pragma once
// AsyncHttpClient: the proxy's side of HTTP/1.1. Many concurrent calls to many servers, each
// delivering its response body as it arrives (an SSE stream is passed on token by token), over
// kept-alive pooled connections, with a deadline on every stage and cancellation.
//
// Threads: `threads` io threads, each with its own io_context and connection pool; a call
// stays on one of them, so its callbacks never run concurrently with each other.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "core/time.h"
#include "net/http.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace myriad::net {

struct CallTimeouts {
  Nanos connect = 2 * kSecond;
  // From the request's first byte sent to the response's header received: the upstream's
  // queueing plus, for a non-streaming completion, the whole generation.
  Nanos first_byte = 60 * kSecond;
  // Between two reads of the body: a stream that stalls this long is dead.
  Nanos idle = 30 * kSecond;
  // The whole call; 0: no limit beyond the others.
  Nanos total = 0;
};

struct CallRequest {
  HostPort server;
  std::string method = "POST";
  std::string target;
  std::string body;
  std::string content_type = "application/json";
  Headers headers;  // extra fields (traceparent, authorization...)
  CallTimeouts timeouts;
  size_t max_response_bytes = size_t{256} << 20;
};

// Failure stages, so the caller knows whether the upstream may have seen the request.
enum class CallStage {
  kConnect,     // nothing was sent: always safe to retry elsewhere
  kSend,        // the request may be partly sent
  kHeader,      // sent; no response yet
  kBody,        // the response started
};
std::string_view CallStageName(CallStage stage);

struct CallCallbacks {
  // The status line and header fields, once.
  std::function<void(int status, const Headers& headers)> on_header;
  // Body bytes (de-chunked) as they arrive.
  std::function<void(std::string_view data)> on_data;
  // Exactly once, last: OK when the body completed; otherwise the error (kCancelled after
  // Cancel, kDeadlineExceeded on a timeout, kUnavailable when the server cannot be reached or
  // drops the connection, kInternal for a malformed response) and the stage it happened in.
  std::function<void(absl::Status status, CallStage stage)> on_done;
};

class Call {
 public:
  virtual ~Call() = default;
  // Stops the call: its connection is closed (the upstream sees the client go, which is how
  // vLLM learns to abort the request), on_done gets kCancelled unless it has already run.
  virtual void Cancel() = 0;
};

struct AsyncHttpClientOptions {
  int threads = 1;
  // Run every call on this io_context instead of threads of the client's own: it must be run by
  // exactly one thread (e.g. a one-thread HttpServer's), which then does both sides of a proxy
  // with no hand-off. The client must be destroyed while that thread still runs, not on it.
  boost::asio::io_context* shared_io_context = nullptr;
  // Or several, each run by exactly one thread (an HttpServer with context_per_thread): a call
  // started on one of those threads runs on it, others round-robin.
  std::vector<boost::asio::io_context*> shared_io_contexts{};
  size_t max_idle_per_server = 64;  // pooled connections per server and io thread
  Nanos idle_keep = 30 * kSecond;   // pooled connections unused this long are closed
};

class AsyncHttpClient {
 public:
  explicit AsyncHttpClient(AsyncHttpClientOptions options = {});
  // Cancels every call in progress (each gets on_done) and joins the io threads.
  ~AsyncHttpClient();
  AsyncHttpClient(const AsyncHttpClient&) = delete;
  AsyncHttpClient& operator=(const AsyncHttpClient&) = delete;

  std::shared_ptr<Call> Start(CallRequest request, CallCallbacks callbacks);

  struct Stats {
    uint64_t calls = 0;
    uint64_t connections_opened = 0;
    uint64_t connections_reused = 0;
  };
  Stats stats() const;

  struct Impl;  // opaque; public so the implementation's call objects can name it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace myriad::net
