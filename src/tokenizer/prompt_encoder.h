#pragma once
// The prompt token ids an engine computes for an OpenAI request, so that the gateway's block
// keys are the engine's: completions encode the prompt with special tokens (vLLM's default for
// /v1/completions); chat renders the model's chat template over the messages (tools and
// chat_template_kwargs included, add_generation_prompt true unless the request says otherwise)
// and encodes the result without adding special tokens again (vLLM's default for chat).
// Shared by the gateway and the engine emulator.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace myriad::tokenizer {

class PromptEncoder {
 public:
  // `tokenizer_json` and `tokenizer_config_json` are file paths (Hugging Face layout); a
  // directory is also accepted for the first, meaning DIR/tokenizer.json and
  // DIR/tokenizer_config.json. Without a chat template, chat requests are refused.
  static absl::StatusOr<std::unique_ptr<PromptEncoder>> Load(const std::string& tokenizer_json,
                                                             const std::string& tokenizer_config_json = "");

  std::vector<uint32_t> Completion(std::string_view prompt) const;
  // `body` is the raw request body (parsed here keeping key order, as the template's tojson
  // needs). Errors (no template, a template error such as raise_exception) name the cause.
  absl::StatusOr<std::vector<uint32_t>> Chat(std::string_view body) const;

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  bool has_chat_template() const { return chat_ != nullptr; }

 private:
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> chat_;
};

}  // namespace myriad::tokenizer
