#include "net/http_client.h"

#include <fmt/format.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <optional>

namespace myriad::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HttpClient::Impl {
  Impl(HostPort s, HttpClientOptions o) : server(std::move(s)), options(o) {}

  // Runs one asynchronous operation to completion on this thread (Beast's timeouts only apply
  // to asynchronous operations).
  template <typename Start>
  beast::error_code Run(Start&& start) {
    beast::error_code result;
    start([&result](beast::error_code ec, auto&&...) { result = ec; });
    ioc.restart();
    ioc.run();
    return result;
  }

  void Close() {
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.close();
    buffer.clear();
    connected = false;
  }

  HostPort server;
  HttpClientOptions options;
  asio::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;
  bool connected = false;
};

HttpClient::HttpClient(HostPort server, HttpClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(server), options)) {}

HttpClient::~HttpClient() { impl_->Close(); }

absl::StatusOr<std::unique_ptr<HttpClient>> HttpClient::FromUrl(std::string_view url,
                                                                HttpClientOptions options) {
  absl::StatusOr<HostPort> hp = ParseHttpUrl(url);
  if (!hp.ok()) return hp.status();
  return std::make_unique<HttpClient>(*std::move(hp), options);
}

absl::StatusOr<HttpResponse> HttpClient::Get(std::string_view target) {
  return Request("GET", target, {});
}

absl::StatusOr<HttpResponse> HttpClient::Post(std::string_view target, std::string body,
                                              std::string_view content_type) {
  return Request("POST", target, std::move(body), content_type);
}

absl::StatusOr<HttpResponse> HttpClient::Delete(std::string_view target) {
  return Request("DELETE", target, {});
}

absl::StatusOr<HttpResponse> HttpClient::Request(std::string_view method, std::string_view target,
                                                 std::string body, std::string_view content_type,
                                                 const Headers& headers) {
  Impl& c = *impl_;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::nanoseconds(c.options.timeout);
  const std::string where = fmt::format("http://{}:{}", c.server.host, c.server.port);
  auto failure = [&](beast::error_code ec, std::string_view stage) -> absl::Status {
    c.Close();
    const std::string message =
        fmt::format("{} {}{}: {} failed: {}", std::string(method), where, std::string(target),
                    std::string(stage), ec.message());
    if (ec == beast::error::timeout) return absl::DeadlineExceededError(message);
    if (ec.category() == http::make_error_code(http::error::bad_version).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return absl::InternalError(message);
    }
    return absl::UnavailableError(message);
  };

  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(http::field::host, fmt::format("{}:{}", c.server.host, c.server.port));
  req.set(http::field::user_agent, "myriad");
  if (!content_type.empty()) req.set(http::field::content_type, content_type);
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = std::move(body);
  req.keep_alive(true);
  req.prepare_payload();

  for (int attempt = 0;; ++attempt) {
    const bool reusing = c.connected;
    if (!c.connected) {
      beast::error_code ec;
      tcp::resolver resolver(c.ioc);
      auto endpoints = resolver.resolve(c.server.host, std::to_string(c.server.port),
                                        tcp::resolver::numeric_service, ec);
      if (ec) return failure(ec, "resolve");
      c.stream.expires_at(deadline);
      ec = c.Run([&](auto handler) { c.stream.async_connect(endpoints, std::move(handler)); });
      if (ec) return failure(ec, "connect");
      beast::error_code ignored;
      c.stream.socket().set_option(tcp::no_delay(true), ignored);
      c.connected = true;
    } else {
      ++reused_;
    }
    c.stream.expires_at(deadline);
    beast::error_code ec =
        c.Run([&](auto handler) { http::async_write(c.stream, req, std::move(handler)); });
    http::response_parser<http::string_body> parser;
    parser.body_limit(c.options.max_response_bytes);
    if (!ec) {
      c.buffer.reserve(kResponseReadBytes);
      ec = c.Run([&](auto handler) {
        http::async_read(c.stream, c.buffer, parser, std::move(handler));
      });
    }
    if (ec) {
      // A kept-alive connection the server has meanwhile closed (idle timeout): the request
      // never reached it, so sending it again on a fresh connection is safe.
      const bool stale = reusing && attempt == 0 &&
                         (ec == http::error::end_of_stream || ec == asio::error::eof ||
                          ec == asio::error::connection_reset || ec == asio::error::broken_pipe);
      if (stale) {
        c.Close();
        continue;
      }
      return failure(ec, "request");
    }
    auto res = parser.release();
    HttpResponse out;
    out.status = static_cast<int>(res.result_int());
    out.content_type = std::string(res[http::field::content_type]);
    for (const auto& field : res) {
      out.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    out.body = std::move(res.body());
    if (!res.keep_alive()) c.Close();
    return out;
  }
}

}  // namespace myriad::net
