#include "tokenizer/chat_template.h"

#include "absl/status/status.h"

namespace myriad::tokenizer {
namespace {

// The special tokens transformers passes to every chat template (its special_tokens_map).
constexpr std::string_view kSpecialTokens[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                               "pad_token", "cls_token", "mask_token"};

// A token is a string or an AddedToken object {"content": ...}; null means absent.
absl::StatusOr<std::optional<std::string>> TokenText(const nlohmann::ordered_json& j,
                                                     const std::string& where) {
  if (j.is_null()) return std::nullopt;
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) {
    return j["content"].get<std::string>();
  }
  return absl::InvalidArgumentError(where + " must be a string or an object with a string \"content\"");
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromTokenizerConfig(std::string_view json,
                                                               std::string source_name,
                                                               const ChatTemplateOptions& options) {
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(json, nullptr, false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError(source_name + ": not a JSON object");
  }
  nlohmann::ordered_json special = nlohmann::ordered_json::object();
  for (std::string_view name : kSpecialTokens) {
    auto it = config.find(std::string(name));
    if (it == config.end()) continue;
    auto text = TokenText(*it, source_name + ": field '" + std::string(name) + "'");
    if (!text.ok()) return text.status();
    if (text->has_value()) special[std::string(name)] = **text;
  }
  if (auto it = config.find("additional_special_tokens"); it != config.end() && it->is_array()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (size_t i = 0; i < it->size(); ++i) {
      auto text = TokenText((*it)[i], source_name + ": field 'additional_special_tokens[" +
                                          std::to_string(i) + "]'");
      if (!text.ok()) return text.status();
      if (text->has_value()) list.push_back(**text);
    }
    special["additional_special_tokens"] = std::move(list);
  }

  auto field = config.find("chat_template");
  if (field == config.end() || field->is_null()) {
    return absl::NotFoundError(source_name + ": no 'chat_template' field");
  }
  if (field->is_string()) {
    return FromTemplate(field->get<std::string>(), std::move(source_name), special, options);
  }
  if (!field->is_array()) {
    return absl::InvalidArgumentError(source_name +
                                      ": field 'chat_template' must be a string or a list of "
                                      "{\"name\", \"template\"} objects");
  }
  ChatTemplate result;
  result.source_name_ = source_name;
  result.limits_ = options.limits;
  for (size_t i = 0; i < field->size(); ++i) {
    const auto& entry = (*field)[i];
    const std::string where = source_name + ": field 'chat_template[" + std::to_string(i) + "]'";
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
        !entry.contains("template") || !entry["template"].is_string()) {
      return absl::InvalidArgumentError(where + " must be an object with string 'name' and 'template'");
    }
    const std::string name = entry["name"].get<std::string>();
    auto parsed = jinja::Template::Parse(entry["template"].get<std::string>(),
                                         source_name + "[chat_template " + name + "]", options.parse);
    if (!parsed.ok()) return parsed.status();
    result.templates_.emplace_back(name, *std::move(parsed));
  }
  for (auto it = special.begin(); it != special.end(); ++it) {
    result.special_tokens_.emplace_back(it.key(), jinja::Value::FromJson(it.value()));
  }
  return result;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromTemplate(std::string_view source, std::string source_name,
                                                        const nlohmann::ordered_json& special_tokens,
                                                        const ChatTemplateOptions& options) {
  auto parsed = jinja::Template::Parse(source, source_name + "[chat_template]", options.parse);
  if (!parsed.ok()) return parsed.status();
  ChatTemplate result;
  result.source_name_ = std::move(source_name);
  result.limits_ = options.limits;
  result.templates_.emplace_back("default", *std::move(parsed));
  if (special_tokens.is_object()) {
    for (auto it = special_tokens.begin(); it != special_tokens.end(); ++it) {
      try {
        result.special_tokens_.emplace_back(it.key(), jinja::Value::FromJson(it.value()));
      } catch (const jinja::JinjaError& e) {
        return absl::InvalidArgumentError(result.source_name_ + ": special token '" + it.key() +
                                          "': " + e.message);
      }
    }
  }
  return result;
}

std::vector<std::string> ChatTemplate::template_names() const {
  std::vector<std::string> names;
  for (const auto& [name, unused] : templates_) names.push_back(name);
  return names;
}

template <typename Json>
absl::StatusOr<std::string> ChatTemplate::RenderImpl(const Json& messages, const Json& tools,
                                                     bool add_generation_prompt,
                                                     const Json& kwargs) const {
  if (!messages.is_array()) return absl::InvalidArgumentError("messages must be a JSON array");
  if (!tools.is_null() && !tools.is_array()) {
    return absl::InvalidArgumentError("tools must be null or a JSON array");
  }
  if (!kwargs.is_null() && !kwargs.is_object()) {
    return absl::InvalidArgumentError("chat template kwargs must be null or a JSON object");
  }
  // transformers' rule: "tool_use" whenever tools are passed (even an empty list) and it
  // exists, else "default".
  const jinja::Template* chosen = nullptr;
  const jinja::Template* fallback = nullptr;
  for (const auto& [name, tmpl] : templates_) {
    if (name == "tool_use" && !tools.is_null()) chosen = &tmpl;
    if (name == "default") fallback = &tmpl;
  }
  if (chosen == nullptr) chosen = fallback;
  if (chosen == nullptr) {
    return absl::InvalidArgumentError(source_name_ + ": no 'default' chat template among the named ones" +
                                      (tools.is_null() ? "" : " (nor 'tool_use')"));
  }

  std::vector<std::pair<std::string, jinja::Value>> globals;
  try {
    globals.emplace_back("messages", jinja::Value::FromJson(messages));
    globals.emplace_back("tools", jinja::Value::FromJson(tools));
    globals.emplace_back("documents", jinja::Value::None());
    globals.emplace_back("add_generation_prompt", jinja::Value(add_generation_prompt));
    globals.insert(globals.end(), special_tokens_.begin(), special_tokens_.end());
    if (kwargs.is_object()) {
      for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
        const std::string& key = it.key();
        if (key == "messages" || key == "tools" || key == "documents" || key == "add_generation_prompt") {
          return absl::InvalidArgumentError("chat template kwargs may not set '" + key + "'");
        }
        jinja::Value value = jinja::Value::FromJson(it.value());
        bool replaced = false;
        for (auto& [name, slot] : globals) {
          if (name == key) {
            slot = value;
            replaced = true;
          }
        }
        if (!replaced) globals.emplace_back(key, std::move(value));
      }
    }
  } catch (const jinja::JinjaError& e) {
    return absl::InvalidArgumentError("chat request: " + e.message);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("chat request: out of memory converting the request");
  }
  return chosen->Render(std::move(globals), limits_);
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& messages,
                                                 const nlohmann::ordered_json& tools,
                                                 bool add_generation_prompt,
                                                 const nlohmann::ordered_json& kwargs) const {
  return RenderImpl(messages, tools, add_generation_prompt, kwargs);
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::json& messages,
                                                 const nlohmann::json& tools, bool add_generation_prompt,
                                                 const nlohmann::json& kwargs) const {
  return RenderImpl(messages, tools, add_generation_prompt, kwargs);
}

}  // namespace myriad::tokenizer
