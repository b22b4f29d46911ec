#pragma once
// Reading an OpenAI completions or chat request far enough to route it, and no further: the
// body goes upstream as the client sent it (plus what P/D needs). Malformed fields are refused
// here with the OpenAI error shape, naming the field, before any backend is bothered.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/http.h"

namespace myriad::gateway {

struct GenerateRequest {
  nlohmann::json body;
  bool chat = false;
  std::string model;
  bool stream = false;
  int64_t max_tokens = 16;          // the engine's default when absent
  std::string text;                 // the prompt text, messages flattened (role + content)
  std::vector<uint32_t> token_ids;  // when the client sent token ids
  std::string cache_salt;           // vLLM's cache_salt; empty: none
};

// The route's name in metrics and logs.
inline std::string_view RouteName(bool chat) { return chat ? "chat.completions" : "completions"; }

struct RequestError {
  int status = 400;
  std::string message;
  std::string param;
  net::HttpResponse Response() const;
};

// "Authorization: Bearer KEY" -> KEY (scheme case-insensitive on its first letter, spaces
// trimmed); empty when absent or another scheme.
std::string BearerToken(const net::Headers& headers);

// Returns false and fills `error` when the request cannot be served.
bool ParseGenerateRequest(std::string_view body, bool chat, GenerateRequest* out,
                          RequestError* error);

}  // namespace myriad::gateway
