#pragma once
// A model's chat template, as found in its Hugging Face tokenizer_config.json, applied to an
// OpenAI-style chat request to produce exactly the prompt text the engine (vLLM, through
// transformers' apply_chat_template and Python's Jinja2) renders, so that the gateway can
// tokenize, hash and route the prompt the engine will actually see.
//
//   auto tmpl = ChatTemplate::FromTokenizerConfig(config_json, "qwen3/tokenizer_config.json");
//   auto prompt = tmpl->Render(messages, tools, /*add_generation_prompt=*/true, kwargs);
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "tokenizer/jinja_template.h"

namespace myriad::tokenizer {

struct ChatTemplateOptions {
  jinja::TemplateOptions parse;
  // Requests come from clients: every render is bounded (output size, loop iterations,
  // recursion) and fails with a clear error instead of running away.
  jinja::RenderLimits limits;
};

class ChatTemplate {
 public:
  // Reads `chat_template` (a string, or a list of {"name", "template"}) and the special tokens
  // (bos_token, eos_token, ...: strings or {"content": ...} objects) from a tokenizer_config.json.
  // Errors name `source_name` and the field, or the template line and column.
  static absl::StatusOr<ChatTemplate> FromTokenizerConfig(std::string_view json,
                                                          std::string source_name,
                                                          const ChatTemplateOptions& options = {});
  // A bare template; special_tokens is a JSON object of name -> string (may be null).
  static absl::StatusOr<ChatTemplate> FromTemplate(std::string_view source, std::string source_name,
                                                   const nlohmann::ordered_json& special_tokens,
                                                   const ChatTemplateOptions& options = {});

  // Renders the conversation as apply_chat_template(messages, tools=tools,
  // add_generation_prompt=..., **kwargs, tokenize=False) does. `messages` is a JSON array;
  // `tools` is null or an array; `kwargs` (chat_template_kwargs, e.g. {"enable_thinking":
  // false}) is null or an object. With named templates, "tool_use" is chosen when tools are
  // given (not null) and it exists, else "default" (transformers' rule). Parse requests with
  // nlohmann::ordered_json: tojson prints keys in the order it is given them, as Python does.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& messages,
                                     const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                     const nlohmann::ordered_json& kwargs = nullptr) const;
  // The same for nlohmann::json, whose objects are sorted by key (so tojson output is too).
  absl::StatusOr<std::string> Render(const nlohmann::json& messages, const nlohmann::json& tools,
                                     bool add_generation_prompt,
                                     const nlohmann::json& kwargs = nullptr) const;

  // Names of the templates ("default" for a single one).
  std::vector<std::string> template_names() const;

 private:
  ChatTemplate() = default;

  template <typename Json>
  absl::StatusOr<std::string> RenderImpl(const Json& messages, const Json& tools,
                                         bool add_generation_prompt, const Json& kwargs) const;

  std::string source_name_;
  std::vector<std::pair<std::string, jinja::Template>> templates_;
  std::vector<std::pair<std::string, jinja::Value>> special_tokens_;
  jinja::RenderLimits limits_;
};

}  // namespace myriad::tokenizer
