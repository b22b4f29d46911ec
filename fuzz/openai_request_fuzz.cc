// libFuzzer target for the gateway's reading of OpenAI requests: any body must parse or be
// refused with a 4xx that names a reason; never a crash, never an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gateway/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = (data[0] & 1) != 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  myriad::gateway::GenerateRequest req;
  myriad::gateway::RequestError error;
  if (myriad::gateway::ParseGenerateRequest(body, chat, &req, &error)) {
    // Whatever parses is routable: a model, a prompt (text or ids), a positive token budget.
    if (req.model.empty() || req.max_tokens < 1) std::abort();
    if (!chat && req.text.empty() && req.token_ids.empty()) std::abort();
  } else {
    if (error.status < 400 || error.status > 499 || error.message.empty()) std::abort();
  }
  return 0;
}
