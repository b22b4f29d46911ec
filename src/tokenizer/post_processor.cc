#include "tokenizer/post_processor.h"

#include <nlohmann/json.hpp>

#include "tokenizer/json_util.h"

namespace myriad::tokenizer {
namespace {

absl::Status ParseInto(const nlohmann::json& j, const std::string& field, SpecialWrap& wrap) {
  if (j.is_null()) return absl::OkStatus();
  auto type = GetString(j, "type", field);
  if (!type.ok()) return type.status();
  if (*type == "ByteLevel") return absl::OkStatus();  // offsets only; ids unchanged
  if (*type == "Sequence") {
    auto list = GetArray(j, "processors", field);
    if (!list.ok()) return list.status();
    for (size_t i = 0; i < (*list)->size(); ++i) {
      if (auto s = ParseInto((**list)[i], Cat(field, ".processors[", i, "]"), wrap); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  SpecialWrap outer;
  if (*type == "RobertaProcessing" || *type == "BertProcessing") {
    for (const char* key : {"cls", "sep"}) {
      auto it = j.find(key);
      if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_unsigned()) {
        return absl::InvalidArgumentError(Cat(field, ".", key, ": expected [token, id]"));
      }
      (std::string_view(key) == "cls" ? outer.prefix : outer.suffix).push_back((*it)[1].get<uint32_t>());
    }
  } else if (*type == "TemplateProcessing") {
    auto single = GetArray(j, "single", field);
    if (!single.ok()) return single.status();
    auto specials = j.find("special_tokens");
    bool seen_sequence = false;
    for (size_t i = 0; i < (*single)->size(); ++i) {
      const auto& item = (**single)[i];
      const std::string item_field = Cat(field, ".single[", i, "]");
      if (item.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      if (!item.contains("SpecialToken") || !item["SpecialToken"].contains("id") ||
          !item["SpecialToken"]["id"].is_string()) {
        return absl::InvalidArgumentError(Cat(item_field, ": expected {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": ...}"));
      }
      const std::string name = item["SpecialToken"]["id"].get<std::string>();
      if (specials == j.end() || !specials->contains(name) || !(*specials)[name].contains("ids") ||
          !(*specials)[name]["ids"].is_array()) {
        return absl::InvalidArgumentError(Cat(field, ".special_tokens: '", name, "' has no ids"));
      }
      for (const auto& id : (*specials)[name]["ids"]) {
        if (!id.is_number_unsigned()) return absl::InvalidArgumentError(Cat(field, ".special_tokens['", name, "'].ids: expected ids"));
        (seen_sequence ? outer.suffix : outer.prefix).push_back(id.get<uint32_t>());
      }
    }
  } else {
    return Unsupported(field + ".type", *type);
  }
  // Each processor wraps what the previous ones produced.
  outer.prefix.insert(outer.prefix.end(), wrap.prefix.begin(), wrap.prefix.end());
  wrap.suffix.insert(wrap.suffix.end(), outer.suffix.begin(), outer.suffix.end());
  wrap.prefix = std::move(outer.prefix);
  return absl::OkStatus();
}

// bos_token / eos_token are a string or {"__type": "AddedToken", "content": ...}; absent or null
// gives "".
std::string TokenContent(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return "";
}

}  // namespace

absl::StatusOr<SpecialWrap> ParsePostProcessor(const nlohmann::json& j, const std::string& field) {
  SpecialWrap wrap;
  if (auto s = ParseInto(j, field, wrap); !s.ok()) return s;
  return wrap;
}

absl::StatusOr<bool> ApplyTokenizerConfig(const nlohmann::json& config, std::string_view source,
                                          const TokenLookup& lookup, SpecialWrap& wrap) {
  if (!config.is_object()) return absl::InvalidArgumentError(Cat(source, ": expected an object"));
  std::string cls = config.value("tokenizer_class", "");
  if (cls.size() > 4 && cls.compare(cls.size() - 4, 4, "Fast") == 0) cls.resize(cls.size() - 4);
  if (cls != "LlamaTokenizer" && cls != "CodeLlamaTokenizer" && cls != "GemmaTokenizer") return false;
  const std::string field = Cat(source, ":");
  auto add_bos = GetBool(config, "add_bos_token", field, true);  // transformers' defaults
  if (!add_bos.ok()) return add_bos.status();
  auto add_eos = GetBool(config, "add_eos_token", field, false);
  if (!add_eos.ok()) return add_eos.status();
  SpecialWrap w;
  for (auto [on, key, list] : {std::tuple{*add_bos, "bos_token", &w.prefix}, std::tuple{*add_eos, "eos_token", &w.suffix}}) {
    if (!on) continue;
    const std::string content = TokenContent(config, key);
    auto id = content.empty() ? std::nullopt : lookup(content);
    if (!id) {
      return absl::InvalidArgumentError(Cat(source, ": ", key, " '", content, "' is not a token of the vocabulary"));
    }
    list->push_back(*id);
  }
  wrap = std::move(w);
  return true;
}

}  // namespace myriad::tokenizer
