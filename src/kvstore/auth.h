#pragma once
// The KV store's shared secret (docs/kvstore.md, "Security and bounds"): every master, storage
// node, repair agent and client of one cluster is given the same token. The masters' HTTP API
// wants it in "Authorization: Bearer TOKEN" (401 otherwise; /health and /metrics stay open),
// the nodes' TCP data path in an AUTH frame before any other request, and the shared-memory
// hello after the node's shm token. An empty token turns every check off (the store is then
// open to anyone who reaches its ports).
#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "net/http.h"

namespace myriad::kvstore {

inline constexpr size_t kMaxAuthTokenBytes = 256;
inline constexpr std::string_view kAuthTokenEnv = "MYRIAD_KVSTORE_TOKEN";

// The token in `file` (one line; surrounding whitespace dropped), or, when `file` is empty, in
// the environment variable MYRIAD_KVSTORE_TOKEN; "" when neither is given. Errors name the file
// or the variable: unreadable, empty, longer than kMaxAuthTokenBytes, or holding a byte that
// is not printable ASCII (it travels in an HTTP header).
absl::StatusOr<std::string> LoadAuthToken(const std::string& file);

// Whether `got` equals `expected`, in time that depends on the lengths only, so a caller
// cannot learn the token a byte at a time from how long a refusal takes.
bool TokensEqual(std::string_view expected, std::string_view got);

// The header a client sends (none when `token` is empty).
net::Headers AuthHeaders(std::string_view token);

// Whether `request` carries `token` (always true when `token` is empty).
bool HttpAuthorized(const net::HttpRequest& request, std::string_view token);

// The 401 answer to a request without the right token.
net::HttpResponse Unauthorized();

}  // namespace myriad::kvstore
