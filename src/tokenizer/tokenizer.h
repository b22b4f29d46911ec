#pragma once
// Hugging Face tokenizer.json, byte-level BPE (Qwen 2/3, DeepSeek-V3, Llama 3, GPT-2 style),
// producing the ids the engines produce, so the gateway can name prompt blocks by the same
// token ids as vLLM's KV-cache events.
//
// Encode: added tokens are cut out of the raw text first, the rest is normalized, cut into
// pre-tokens, and each pre-token's bytes are merged by BPE (through a per-call word cache).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace myriad::tokenizer {

struct TokenizerOptions {
  // The contents of tokenizer_config.json, if any (FromFile reads it from beside the file).
  std::string tokenizer_config_json;
  std::string tokenizer_config_source = "tokenizer_config.json";
  // Words each concurrent Encode call caches (one cache per concurrent call, reused).
  size_t cache_words = 1 << 16;
  // Run every Split pattern on PCRE2 instead of the hand-written matchers (tests, debugging).
  bool force_pcre2 = false;
};

class Tokenizer {
 public:
  // Parses a tokenizer.json document; `source_name` prefixes error messages
  // ("tokenizer.json: pre_tokenizer.type 'Metaspace' is not supported").
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(std::string_view tokenizer_json,
                                                             std::string_view source_name,
                                                             TokenizerOptions options = {});
  // Reads `path` (a tokenizer.json, or a folder holding one) and, unless the options already
  // carry one, the tokenizer_config.json beside it.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromFile(const std::string& path, TokenizerOptions options = {});

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  ~Tokenizer();

  // The token ids of `text`; with `add_special_tokens`, wrapped as the post-processor says
  // (e.g. DeepSeek-V3's BOS). Thread-safe; never fails (arbitrary bytes are encoded too).
  std::vector<uint32_t> Encode(std::string_view text, bool add_special_tokens) const;
  // The same into `out` (replaced), reusing its capacity.
  void Encode(std::string_view text, bool add_special_tokens, std::vector<uint32_t>& out) const;

  // The text of `ids` (invalid UTF-8 becomes U+FFFD, as in Hugging Face); unknown ids are
  // skipped.
  std::string Decode(std::span<const uint32_t> ids, bool skip_special_tokens = false) const;

  // Tokens in their tokenizer.json spelling ("Ġthe", "<|im_start|>"); added tokens first.
  std::optional<uint32_t> TokenToId(std::string_view token) const;
  std::optional<std::string_view> IdToToken(uint32_t id) const;

  // Distinct tokens, the model's and the added ones (transformers' len(tokenizer)).
  size_t vocab_size() const { return vocab_size_; }
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  const SpecialWrap& special_wrap() const { return wrap_; }

  // Empties every word cache (keeping its memory), so benchmarks can measure a cold cache.
  void ClearCache() const;
  // Frees the word caches and buffers of the idle Encode contexts.
  void ReleaseMemory() const;

  // One line per stage, naming the matcher each Split uses (builtin or pcre2).
  std::string Describe() const;

 private:
  struct Context;
  Tokenizer() = default;

  std::unique_ptr<Context> Acquire() const;
  void Release(std::unique_ptr<Context> ctx) const;
  void EncodeNormalizable(std::string_view segment, std::vector<uint32_t>& out, Context& ctx) const;
  void EncodePreTokenized(std::string_view text, std::vector<uint32_t>& out, Context& ctx) const;

  std::unique_ptr<Normalizer> normalizer_;
  PreTokenizer pre_tokenizer_;
  BpeModel model_;
  std::vector<AddedToken> added_;
  absl::flat_hash_map<std::string, uint32_t> added_by_content_;
  AddedTokenMatcher raw_matcher_;         // tokens with normalized == false: in the raw text
  AddedTokenMatcher normalized_matcher_;  // the others: in the normalized text
  SpecialWrap wrap_;
  bool byte_level_decoder_ = true;
  std::vector<std::string> decoded_;  // id -> bytes Decode emits
  std::vector<bool> special_;         // id -> an added token marked special
  std::vector<bool> known_;           // id -> exists
  std::vector<int32_t> added_index_;  // id -> index into added_, or -1
  size_t vocab_size_ = 0;
  size_t cache_words_ = 0;
  std::string source_;

  mutable std::mutex pool_mu_;
  mutable std::vector<std::unique_ptr<Context>> pool_;
};

}  // namespace myriad::tokenizer
