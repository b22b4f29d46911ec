#pragma once
// What `add_special_tokens` adds around one sequence: the `post_processor` of tokenizer.json,
// or, for Llama-class tokenizers, the BOS/EOS choice of tokenizer_config.json (transformers'
// LlamaTokenizerFast rebuilds the post-processor from add_bos_token / add_eos_token, which is
// how DeepSeek-V3 gets its BOS although its tokenizer.json only says ByteLevel).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"

namespace myriad::tokenizer {

struct SpecialWrap {
  std::vector<uint32_t> prefix;
  std::vector<uint32_t> suffix;
};

using TokenLookup = std::function<std::optional<uint32_t>(std::string_view)>;

// Parses `j` (the value of `field`): null, ByteLevel, TemplateProcessing, RobertaProcessing,
// BertProcessing, or a Sequence of them.
absl::StatusOr<SpecialWrap> ParsePostProcessor(const nlohmann::json& j, const std::string& field);

// Applies tokenizer_config.json (`config`, read from `source`) to `wrap`; returns whether it
// changed anything. Only Llama-class tokenizer_class values act on add_bos_token/add_eos_token,
// as in transformers.
absl::StatusOr<bool> ApplyTokenizerConfig(const nlohmann::json& config, std::string_view source,
                                          const TokenLookup& lookup, SpecialWrap& wrap);

}  // namespace myriad::tokenizer
