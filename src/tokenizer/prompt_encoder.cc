#include "tokenizer/prompt_encoder.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace myriad::tokenizer {

namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("{}: cannot open", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PromptEncoder>> PromptEncoder::Load(const std::string& tokenizer_json,
                                                                   const std::string& tokenizer_config_json) {
  std::string tok_path = tokenizer_json, cfg_path = tokenizer_config_json;
  std::error_code ec;
  if (std::filesystem::is_directory(tokenizer_json, ec)) {
    tok_path = (std::filesystem::path(tokenizer_json) / "tokenizer.json").string();
    if (cfg_path.empty()) {
      const auto cfg = std::filesystem::path(tokenizer_json) / "tokenizer_config.json";
      if (std::filesystem::exists(cfg, ec)) cfg_path = cfg.string();
    }
  }
  auto tok = Tokenizer::FromFile(tok_path);
  if (!tok.ok()) return tok.status();
  auto out = std::unique_ptr<PromptEncoder>(new PromptEncoder());
  out->tokenizer_ = *std::move(tok);
  if (!cfg_path.empty()) {
    auto text = ReadFile(cfg_path);
    if (!text.ok()) return text.status();
    auto chat = ChatTemplate::FromTokenizerConfig(*text, cfg_path);
    if (!chat.ok()) return chat.status();
    out->chat_ = std::make_unique<ChatTemplate>(*std::move(chat));
  }
  return out;
}

std::vector<uint32_t> PromptEncoder::Completion(std::string_view prompt) const {
  return tokenizer_->Encode(prompt, /*add_special_tokens=*/true);
}

absl::StatusOr<std::vector<uint32_t>> PromptEncoder::Chat(std::string_view body) const {
  if (!chat_) return absl::FailedPreconditionError("no chat template is loaded (tokenizer_config.json)");
  using ojson = nlohmann::ordered_json;
  ojson req = ojson::parse(body, nullptr, false);
  if (req.is_discarded() || !req.is_object()) return absl::InvalidArgumentError("the body is not a JSON object");
  auto messages = req.find("messages");
  if (messages == req.end() || !messages->is_array()) {
    return absl::InvalidArgumentError("'messages' must be an array");
  }
  ojson tools = req.contains("tools") ? req["tools"] : ojson(nullptr);
  ojson kwargs = req.contains("chat_template_kwargs") ? req["chat_template_kwargs"] : ojson(nullptr);
  const bool add_generation_prompt =
      req.contains("add_generation_prompt") && req["add_generation_prompt"].is_boolean()
          ? req["add_generation_prompt"].get<bool>()
          : true;
  auto text = chat_->Render(*messages, tools, add_generation_prompt, kwargs);
  if (!text.ok()) return text.status();
  const bool add_special =
      req.contains("add_special_tokens") && req["add_special_tokens"].is_boolean()
          ? req["add_special_tokens"].get<bool>()
          : false;
  return tokenizer_->Encode(*text, add_special);
}

}  // namespace myriad::tokenizer
