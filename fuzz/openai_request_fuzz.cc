// libFuzzer target for the OpenAI request parser the gateway and the emulator share
// (net/openai_request.h): any body must parse or be refused with a 4xx that names a reason;
// never a crash, never an unbounded allocation. The first byte picks the route and the options
// (the gateway's, or the emulator's: no model needed, one choice).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "net/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = (data[0] & 1) != 0;
  myriad::net::ParseOptions options;
  if ((data[0] & 2) != 0) options = {.require_model = false, .default_max_tokens = 16, .max_n = 1};
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  myriad::net::GenerateRequest req;
  myriad::net::RequestError error;
  if (myriad::net::ParseGenerateRequest(body, chat, &req, &error, options)) {
    // Whatever parses is servable: a model where one is required, a prompt (text or ids, or
    // messages), a token budget and a choice count within their bounds.
    if (options.require_model && req.model.empty()) std::abort();
    if (req.max_tokens < 1 || req.max_tokens > myriad::net::kMaxRequestTokens) std::abort();
    if (req.n < 1 || req.n > options.max_n) std::abort();
    if (!chat && req.text.empty() && req.token_ids.empty()) std::abort();
    if (chat && req.messages.empty()) std::abort();
  } else {
    if (error.status < 400 || error.status > 499 || error.message.empty()) std::abort();
  }
  return 0;
}
