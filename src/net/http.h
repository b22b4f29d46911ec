#pragma once
// Plain value types for HTTP/1.1 requests and responses, shared by net::HttpServer and
// net::HttpClient. They keep Boost.Beast out of every header but the net implementation files,
// so the modules that serve or call HTTP (kvstore, gateway, cli) compile without it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace myriad::net {

using Headers = std::vector<std::pair<std::string, std::string>>;

// How much the HTTP clients read from a response at a time: they reserve this much free room
// in their read buffer (beast reads no more than a buffer's free capacity, and at least 512
// bytes), so that a burst of streamed events or a /metrics page is one read, not one per 512
// bytes.
inline constexpr size_t kResponseReadBytes = 16384;

// Case-insensitive lookup (HTTP field names are case-insensitive); nullptr when absent.
const std::string* FindHeader(const Headers& headers, std::string_view name);

struct HttpRequest {
  std::string method;  // upper case, as sent: "GET", "POST", "DELETE"...
  std::string target;  // as sent: path and query
  std::string body;
  Headers headers;
  // The client's address as the server's socket sees it ("127.0.0.1:51234", "[::1]:51234");
  // empty for requests not read by HttpServer.
  std::string peer;

  // The target without its query string.
  std::string_view path() const;
  // The query string after '?', without it; empty when none.
  std::string_view query() const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // Extra fields; Content-Type, Content-Length, Connection and Server are set by the server.
  Headers headers;
};

// The error shape of every JSON API Myriad serves (OpenAI's):
// {"error": {"message": ..., "type": ..., "param": ...}}, "param" only when a field is at fault.
HttpResponse JsonError(int status, std::string_view type, std::string_view message,
                       std::string_view param = {});

// The standard reason phrase of a status code ("Not Found"); "Unknown" for others.
std::string_view ReasonPhrase(int status);

struct HostPort {
  std::string host;
  uint16_t port = 0;
};

// "127.0.0.1:8080", "localhost:0", "[::1]:8080". Port 0 is allowed (an ephemeral port).
absl::StatusOr<HostPort> ParseHostPort(std::string_view text);
// "http://host:port" with an optional trailing "/"; https is not supported (plain HTTP inside
// the cluster network). The port defaults to 80.
absl::StatusOr<HostPort> ParseHttpUrl(std::string_view url);

}  // namespace myriad::net
