#pragma once
// The one reading of an OpenAI completions or chat request, shared by the gateway (which routes
// it and forwards the body as sent) and the engine emulator (which serves it): the same body is
// accepted or refused, with the same message, by both. Refusals have the OpenAI error shape and
// name the field; every numeric field has a bound (docs/gateway.md, "Request fields").
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/http.h"

namespace myriad::net {

// Bounds on the numeric fields (docs/gateway.md lists them with the reasons).
inline constexpr int64_t kMaxRequestTokens = int64_t{1} << 24;  // max_tokens, max_completion_tokens
inline constexpr int64_t kMaxChoices = 128;                      // n (OpenAI's bound)
inline constexpr double kMaxTemperature = 100;
inline constexpr int64_t kMaxStopStrings = 64;
inline constexpr int64_t kMaxLogprobs = 20;  // logprobs, top_logprobs (vLLM's default max_logprobs)

struct ChatMessage {
  std::string role;
  std::string content;  // the text parts, concatenated; other parts (images, audio) are skipped
};

struct GenerateRequest {
  nlohmann::json body;
  bool chat = false;
  std::string model;  // empty only where ParseOptions::require_model is off and none was sent
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int64_t max_tokens = 16;     // ParseOptions::default_max_tokens when absent
  int64_t n = 1;
  int64_t priority = 0;  // vLLM's priority scheduling: lower is served first
  std::string user;
  std::string cache_salt;  // vLLM's cache_salt; empty: none
  // Completions: the prompt text, or token ids when the client sent ids. Chat: `messages`, and
  // `text` the messages flattened (role, newline, content, newline) as a routing key.
  std::string text;
  std::vector<uint32_t> token_ids;
  std::vector<ChatMessage> messages;
  // vLLM's P/D kv_transfer_params: this is the prefill side (answer with where the KV is) or
  // the decode side (pull the prompt's KV from remote_block_ids).
  bool remote_decode = false;
  bool remote_prefill = false;
};

struct ParseOptions {
  // The gateway routes by model and needs one; an engine (vLLM, the emulator) serves its only
  // model when none is named.
  bool require_model = true;
  int64_t default_max_tokens = 16;
  // The most choices a request may ask for; 1 where only one completion per request is made.
  int64_t max_n = kMaxChoices;
};

// The route's name in metrics and logs.
inline std::string_view RouteName(bool chat) { return chat ? "chat.completions" : "completions"; }

struct RequestError {
  int status = 400;
  std::string message;
  std::string param;
  HttpResponse Response() const;
};

// "Authorization: Bearer KEY" -> KEY (scheme case-insensitive on its first letter, spaces
// trimmed); empty when absent or another scheme.
std::string BearerToken(const Headers& headers);

// Returns false and fills `error` when the request cannot be served.
bool ParseGenerateRequest(std::string_view body, bool chat, GenerateRequest* out,
                          RequestError* error, const ParseOptions& options = {});

}  // namespace myriad::net
