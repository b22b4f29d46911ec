#include "net/http.h"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>

namespace myriad::net {

namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

}  // namespace

const std::string* FindHeader(const Headers& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (EqualsIgnoreCase(k, name)) return &v;
  }
  return nullptr;
}

std::string_view HttpRequest::path() const {
  std::string_view t(target);
  return t.substr(0, t.find('?'));
}

std::string_view HttpRequest::query() const {
  std::string_view t(target);
  const size_t q = t.find('?');
  return q == std::string_view::npos ? std::string_view() : t.substr(q + 1);
}

HttpResponse JsonError(int status, std::string_view type, std::string_view message,
                       std::string_view param) {
  nlohmann::json error = {{"message", std::string(message)}, {"type", std::string(type)}};
  if (!param.empty()) error["param"] = std::string(param);
  HttpResponse r;
  r.status = status;
  // Messages can quote client input; replace invalid UTF-8 rather than throw.
  r.body = nlohmann::json{{"error", std::move(error)}}.dump(-1, ' ', false,
                                                            nlohmann::json::error_handler_t::replace);
  return r;
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
  }
}

absl::StatusOr<HostPort> ParseHostPort(std::string_view text) {
  HostPort out;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return absl::InvalidArgumentError(
          fmt::format("'{}': expected [ipv6]:port", std::string(text)));
    }
    out.host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      return absl::InvalidArgumentError(
          fmt::format("'{}': expected host:port", std::string(text)));
    }
    out.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
  }
  unsigned value = 0;
  const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || value > 65535) {
    return absl::InvalidArgumentError(
        fmt::format("'{}': port '{}' is not a number in [0, 65535]", std::string(text),
                    std::string(port)));
  }
  out.port = static_cast<uint16_t>(value);
  return out;
}

absl::StatusOr<HostPort> ParseHttpUrl(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return absl::InvalidArgumentError(
        fmt::format("'{}': expected http://host:port", std::string(url)));
  }
  std::string_view rest = url.substr(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        fmt::format("'{}': expected http://host:port without a path", std::string(url)));
  }
  if (rest.find(':') == std::string_view::npos ||
      (!rest.empty() && rest.front() == '[' && rest.back() == ']')) {
    if (rest.empty()) return absl::InvalidArgumentError(fmt::format("'{}': no host", url));
    std::string host(rest);
    if (host.front() == '[') host = host.substr(1, host.size() - 2);
    return HostPort{host, 80};
  }
  return ParseHostPort(rest);
}

}  // namespace myriad::net
