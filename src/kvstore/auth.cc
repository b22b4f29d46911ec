#include "kvstore/auth.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "kvstore/api_json.h"

namespace myriad::kvstore {

namespace {

constexpr std::string_view kBearer = "Bearer ";

absl::StatusOr<std::string> Check(std::string token, std::string_view from) {
  const size_t first = token.find_first_not_of(" \t\r\n");
  const size_t last = token.find_last_not_of(" \t\r\n");
  token = first == std::string::npos ? std::string() : token.substr(first, last - first + 1);
  if (token.empty()) return absl::InvalidArgumentError(fmt::format("{}: the token is empty", from));
  if (token.size() > kMaxAuthTokenBytes) {
    return absl::InvalidArgumentError(fmt::format("{}: the token has {} bytes, at most {} are allowed",
                                                  from, token.size(), kMaxAuthTokenBytes));
  }
  for (size_t i = 0; i < token.size(); ++i) {
    const auto c = static_cast<unsigned char>(token[i]);
    if (c <= 0x20 || c >= 0x7f) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: byte {} of the token is not printable ASCII (spaces and control bytes are not allowed)",
          from, i));
    }
  }
  return token;
}

}  // namespace

absl::StatusOr<std::string> LoadAuthToken(const std::string& file) {
  if (file.empty()) {
    const char* env = std::getenv(std::string(kAuthTokenEnv).c_str());
    if (env == nullptr) return std::string();
    return Check(env, kAuthTokenEnv);
  }
  std::ifstream in(file, std::ios::binary);
  std::string text;
  if (in) {
    // Read a bounded prefix: the token file is small, and a wrong path (a device, a huge file)
    // must not be read whole.
    text.resize(kMaxAuthTokenBytes + 64);
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
  }
  if (!in && !in.eof()) {
    return absl::InvalidArgumentError(fmt::format("--auth-token-file: cannot read '{}'", file));
  }
  return Check(std::move(text), fmt::format("--auth-token-file '{}'", file));
}

bool TokensEqual(std::string_view expected, std::string_view got) {
  unsigned char diff = expected.size() == got.size() ? 0 : 1;
  // Walk the expected token whatever the length of the guess.
  for (size_t i = 0; i < expected.size(); ++i) {
    const char g = i < got.size() ? got[i] : 0;
    diff |= static_cast<unsigned char>(expected[i] ^ g);
  }
  return diff == 0;
}

net::Headers AuthHeaders(std::string_view token) {
  if (token.empty()) return {};
  return {{"Authorization", fmt::format("{}{}", kBearer, token)}};
}

bool HttpAuthorized(const net::HttpRequest& request, std::string_view token) {
  if (token.empty()) return true;
  const std::string* h = net::FindHeader(request.headers, "Authorization");
  if (h == nullptr || h->size() < kBearer.size() || h->compare(0, kBearer.size(), kBearer) != 0) {
    return false;
  }
  return TokensEqual(token, std::string_view(*h).substr(kBearer.size()));
}

net::HttpResponse Unauthorized() {
  net::HttpResponse r = api::Error(
      401, api::ErrorType::kUnauthorized,
      "this KV store requires its shared token: send 'Authorization: Bearer TOKEN' "
      "(myriad kvstore ... --auth-token-file FILE, or MYRIAD_KVSTORE_TOKEN)");
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

}  // namespace myriad::kvstore
