#pragma once
// HttpClient: a blocking HTTP/1.1 client for one server (tests, the CLI, benchmarks). It keeps
// one connection alive across calls and reconnects when the server has closed it. Every call
// is bounded by the timeout, connect included. Not thread-safe: one client per thread.
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "net/http.h"

namespace myriad::net {

struct HttpClientOptions {
  Nanos timeout = 10 * kSecond;  // per call
  // Responses above this are refused (a broken or hostile server cannot exhaust memory).
  size_t max_response_bytes = size_t{64} << 20;
};

class HttpClient {
 public:
  HttpClient(HostPort server, HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // "http://host:port".
  static absl::StatusOr<std::unique_ptr<HttpClient>> FromUrl(std::string_view url,
                                                             HttpClientOptions options = {});

  absl::StatusOr<HttpResponse> Get(std::string_view target);
  absl::StatusOr<HttpResponse> Post(std::string_view target, std::string body,
                                    std::string_view content_type = "application/json");
  absl::StatusOr<HttpResponse> Delete(std::string_view target);
  // Any method. Errors: kDeadlineExceeded on timeout, kUnavailable when the server cannot be
  // reached or closes the connection, kInternal for a malformed response. An HTTP error status
  // is a successful call: look at response.status.
  absl::StatusOr<HttpResponse> Request(std::string_view method, std::string_view target,
                                       std::string body, std::string_view content_type = {},
                                       const Headers& headers = {});

  // Calls made over an already open connection (keep-alive reuse), for tests.
  uint64_t reused() const { return reused_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint64_t reused_ = 0;
};

}  // namespace myriad::net
