#include "tokenizer/tokenizer.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "tokenizer/byte_level.h"
#include "tokenizer/json_util.h"
#include "tokenizer/word_encoder.h"

namespace myriad::tokenizer {
namespace {

// Whether a pre_tokenizer (or any step of a Sequence) is ByteLevel: our BPE merges bytes,
// which is only what Hugging Face does when ByteLevel spelled the text as bytes first.
bool HasByteLevel(const nlohmann::json& j) {
  if (!j.is_object()) return false;
  if (j.value("type", "") == "ByteLevel") return true;
  if (auto it = j.find("pretokenizers"); it != j.end() && it->is_array()) {
    for (const auto& p : *it) {
      if (HasByteLevel(p)) return true;
    }
  }
  return false;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(Cat(path, ": cannot open: ", std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(Cat(path, ": read failed"));
  return std::move(ss).str();
}

// String::from_utf8_lossy: each maximal invalid subsequence becomes one U+FFFD.
std::string Utf8Lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    int need = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) need = 1;
    else if (b == 0xE0) need = 2, lo = 0xA0;
    else if (b == 0xED) need = 2, hi = 0x9F;
    else if (b >= 0xE1 && b <= 0xEF) need = 2;
    else if (b == 0xF0) need = 3, lo = 0x90;
    else if (b == 0xF4) need = 3, hi = 0x8F;
    else if (b >= 0xF1 && b <= 0xF3) need = 3;
    size_t j = i + 1;
    int got = 0;
    if (need > 0 && j < s.size() && static_cast<uint8_t>(s[j]) >= lo && static_cast<uint8_t>(s[j]) <= hi) {
      ++j, ++got;
      while (got < need && j < s.size() && (static_cast<uint8_t>(s[j]) & 0xC0) == 0x80) ++j, ++got;
    }
    if (need > 0 && got == need) {
      out.append(s.substr(i, j - i));
    } else {
      out.append("\xEF\xBF\xBD");
    }
    i = j;
  }
  return out;
}

// The `added_tokens` array; absent or null gives none.
absl::StatusOr<std::vector<AddedToken>> ParseAddedTokens(const nlohmann::json& j, const std::string& root) {
  std::vector<AddedToken> out;
  auto it = j.find("added_tokens");
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_array()) return absl::InvalidArgumentError(root + "added_tokens: expected an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const auto& a = (*it)[i];
    const std::string f = Cat(root, "added_tokens[", i, "]");
    auto content = GetString(a, "content", f);
    if (!content.ok()) return content.status();
    if (content->empty()) return absl::InvalidArgumentError(f + ".content: empty");
    if (!a.contains("id") || !a["id"].is_number_unsigned()) return absl::InvalidArgumentError(f + ".id: expected an id");
    AddedToken tok{*content, a["id"].get<uint32_t>(), false, false, false, false, false};
    // Hugging Face's defaults for absent flags: normalized true, the others false.
    for (auto [key, dst, fallback] :
         {std::tuple{"special", &tok.special, false}, std::tuple{"lstrip", &tok.lstrip, false},
          std::tuple{"rstrip", &tok.rstrip, false}, std::tuple{"single_word", &tok.single_word, false},
          std::tuple{"normalized", &tok.normalized, true}}) {
      auto v = GetBool(a, key, f, fallback);
      if (!v.ok()) return v.status();
      *dst = *v;
    }
    out.push_back(std::move(tok));
  }
  return out;
}

}  // namespace

struct Tokenizer::Context {
  explicit Context(size_t cache_words) : words(cache_words) {}
  WordEncoder words;
  std::string normalized;
  std::string text;
  std::vector<Piece> pieces;
  PreTokenizeScratch pre;
};

Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string& path, TokenizerOptions options) {
  std::filesystem::path file(path);
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) file /= "tokenizer.json";
  auto text = ReadFile(file.string());
  if (!text.ok()) return text.status();
  if (options.tokenizer_config_json.empty()) {
    const auto config = file.parent_path() / "tokenizer_config.json";
    if (std::filesystem::exists(config, ec)) {
      auto c = ReadFile(config.string());
      if (!c.ok()) return c.status();
      options.tokenizer_config_json = *std::move(c);
      options.tokenizer_config_source = config.string();
    }
  }
  return FromJson(*text, file.string(), std::move(options));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view tokenizer_json,
                                                               std::string_view source_name,
                                                               TokenizerOptions options) {
  const std::string src(source_name);
  nlohmann::json j = nlohmann::json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    // Parse again with exceptions only to learn where it failed (nlohmann names line/column).
    try {
      const nlohmann::json unused = nlohmann::json::parse(tokenizer_json);
      (void)unused;
    } catch (const nlohmann::json::parse_error& e) {
      return absl::InvalidArgumentError(Cat(src, ": malformed JSON: ", e.what()));
    }
    return absl::InvalidArgumentError(Cat(src, ": malformed JSON"));
  }
  if (!j.is_object()) return absl::InvalidArgumentError(Cat(src, ": expected a JSON object"));
  const std::string root = src + ": ";
  // `truncation` and `padding` are not read: transformers resets both on every encode call to
  // what the call asks (vLLM asks for neither), so they never change the ids the engine sees.

  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->source_ = src;
  t->cache_words_ = options.cache_words;

  auto model_it = j.find("model");
  if (model_it == j.end()) return absl::InvalidArgumentError(root + "model: missing");
  auto model = BpeModel::Parse(*model_it, root + "model");
  if (!model.ok()) return model.status();
  t->model_ = *std::move(model);

  auto normalizer = ParseNormalizer(j.value("normalizer", nlohmann::json()), root + "normalizer");
  if (!normalizer.ok()) return normalizer.status();
  t->normalizer_ = *std::move(normalizer);

  const nlohmann::json pre_json = j.value("pre_tokenizer", nlohmann::json());
  auto pre = ParsePreTokenizer(pre_json, root + "pre_tokenizer", options.force_pcre2);
  if (!pre.ok()) return pre.status();
  if (!HasByteLevel(pre_json)) {
    return absl::InvalidArgumentError(root + "pre_tokenizer: no ByteLevel step; only byte-level BPE is supported");
  }
  t->pre_tokenizer_ = *std::move(pre);

  auto post = ParsePostProcessor(j.value("post_processor", nlohmann::json()), root + "post_processor");
  if (!post.ok()) return post.status();
  t->wrap_ = *std::move(post);

  const nlohmann::json decoder = j.value("decoder", nlohmann::json());
  if (decoder.is_null()) {
    t->byte_level_decoder_ = false;
  } else {
    auto type = GetString(decoder, "type", root + "decoder");
    if (!type.ok()) return type.status();
    if (*type != "ByteLevel") return Unsupported(root + "decoder.type", *type);
  }

  auto added = ParseAddedTokens(j, root);
  if (!added.ok()) return added.status();
  t->added_ = *std::move(added);
  std::vector<const AddedToken*> raw, normalized;
  for (const auto& a : t->added_) {
    t->added_by_content_[a.content] = a.id;
    // Two passes, as in Hugging Face: normalized == false tokens in the raw text, then the
    // others in the normalized gaps (even when the normalizer is the identity: the order
    // decides which token wins where two overlap).
    (a.normalized ? normalized : raw).push_back(&a);
  }
  t->raw_matcher_ = AddedTokenMatcher(raw);
  t->normalized_matcher_ = AddedTokenMatcher(normalized);

  if (!options.tokenizer_config_json.empty()) {
    nlohmann::json config = nlohmann::json::parse(options.tokenizer_config_json, nullptr, false);
    if (config.is_discarded()) {
      return absl::InvalidArgumentError(Cat(options.tokenizer_config_source, ": malformed JSON"));
    }
    const Tokenizer* self = t.get();
    auto applied = ApplyTokenizerConfig(config, options.tokenizer_config_source,
                                        [self](std::string_view s) { return self->TokenToId(s); }, t->wrap_);
    if (!applied.ok()) return applied.status();
  }

  // Decode table: every id's token through Hugging Face's ByteLevel decoder.
  const auto& vocab = t->model_.id_to_token();
  size_t ids = vocab.size();
  for (const auto& a : t->added_) ids = std::max<size_t>(ids, a.id + 1);
  t->decoded_.assign(ids, std::string());
  t->special_.assign(ids, false);
  t->known_.assign(ids, false);
  for (uint32_t id = 0; id < vocab.size(); ++id) {
    if (vocab[id].empty()) continue;
    t->known_[id] = true;
    if (t->byte_level_decoder_) ByteLevelUnspell(vocab[id], t->decoded_[id]);
    else t->decoded_[id] = vocab[id];
  }
  t->added_index_.assign(ids, -1);
  for (size_t i = 0; i < t->added_.size(); ++i) {
    const AddedToken& a = t->added_[i];
    t->added_index_[a.id] = static_cast<int32_t>(i);
    t->known_[a.id] = true;
    t->special_[a.id] = a.special;
    t->decoded_[a.id].clear();
    if (t->byte_level_decoder_) ByteLevelUnspell(a.content, t->decoded_[a.id]);
    else t->decoded_[a.id] = a.content;
  }
  for (bool k : t->known_) t->vocab_size_ += k;
  return t;
}

std::unique_ptr<Tokenizer::Context> Tokenizer::Acquire() const {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!pool_.empty()) {
      auto ctx = std::move(pool_.back());
      pool_.pop_back();
      return ctx;
    }
  }
  return std::make_unique<Context>(cache_words_);
}

void Tokenizer::Release(std::unique_ptr<Context> ctx) const {
  std::lock_guard<std::mutex> lock(pool_mu_);
  pool_.push_back(std::move(ctx));
}

void Tokenizer::ClearCache() const {
  std::lock_guard<std::mutex> lock(pool_mu_);
  for (auto& ctx : pool_) ctx->words.ClearCache();
}

void Tokenizer::ReleaseMemory() const {
  std::lock_guard<std::mutex> lock(pool_mu_);
  pool_.clear();
}

std::vector<uint32_t> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  std::vector<uint32_t> out;
  Encode(text, add_special_tokens, out);
  return out;
}

void Tokenizer::Encode(std::string_view text, bool add_special_tokens, std::vector<uint32_t>& out) const {
  out.clear();
  auto ctx = Acquire();
  if (add_special_tokens) out.insert(out.end(), wrap_.prefix.begin(), wrap_.prefix.end());
  size_t pos = 0;
  AddedTokenMatcher::Match m;
  while (!raw_matcher_.empty() && raw_matcher_.Next(text, pos, m)) {
    EncodeNormalizable(text.substr(pos, m.begin - pos), out, *ctx);
    out.push_back(m.token->id);
    pos = m.end;
  }
  EncodeNormalizable(text.substr(pos), out, *ctx);
  if (add_special_tokens) out.insert(out.end(), wrap_.suffix.begin(), wrap_.suffix.end());
  Release(std::move(ctx));
}

void Tokenizer::EncodeNormalizable(std::string_view segment, std::vector<uint32_t>& out, Context& ctx) const {
  if (segment.empty()) return;
  std::string_view s = segment;
  if (normalizer_ != nullptr) {
    s = normalizer_->Normalize(segment, ctx.normalized);
  }
  size_t pos = 0;
  AddedTokenMatcher::Match m;
  while (!normalized_matcher_.empty() && normalized_matcher_.Next(s, pos, m)) {
    EncodePreTokenized(s.substr(pos, m.begin - pos), out, ctx);
    out.push_back(m.token->id);
    pos = m.end;
  }
  EncodePreTokenized(s.substr(pos), out, ctx);
}

void Tokenizer::EncodePreTokenized(std::string_view text, std::vector<uint32_t>& out, Context& ctx) const {
  if (text.empty()) return;
  if (pre_tokenizer_.streams()) {  // (every step an Isolated Split: none appends)
    // Split and look up a few hundred pieces at a time, while their bytes are in L1.
    out.reserve(out.size() + text.size());  // at most one id (or placeholder) per byte
    PreTokenizer::Stream stream;
    while (pre_tokenizer_.Next(text, stream, ctx.pieces, ctx.pre)) ctx.words.EncodeSome(model_, text, ctx.pieces, out);
    ctx.words.Finish(model_, out);
    return;
  }
  ctx.pieces.assign(1, Piece{0, static_cast<uint32_t>(text.size())});
  if (!pre_tokenizer_.appends()) {
    // No step adds to the text (Qwen3's, DeepSeek-V3's): the pieces point into it as it is,
    // without a copy of the prompt.
    pre_tokenizer_.RunView(text, ctx.pieces, ctx.pre);
    ctx.words.Encode(model_, text, ctx.pieces, out);
    return;
  }
  ctx.text.assign(text);
  pre_tokenizer_.Run(ctx.text, ctx.pieces, ctx.pre);
  ctx.words.Encode(model_, ctx.text, ctx.pieces, out);
}

std::string Tokenizer::Decode(std::span<const uint32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  bool first = true;
  for (uint32_t id : ids) {
    if (id >= known_.size() || !known_[id]) continue;
    if (skip_special_tokens && special_[id]) continue;
    if (!byte_level_decoder_ && !first) bytes.push_back(' ');  // no decoder: tokens joined by spaces
    bytes += decoded_[id];
    first = false;
  }
  return Utf8Lossy(bytes);
}

std::optional<uint32_t> Tokenizer::TokenToId(std::string_view token) const {
  if (auto it = added_by_content_.find(absl::string_view(token.data(), token.size())); it != added_by_content_.end()) return it->second;
  return model_.TokenToId(token);
}

std::optional<std::string_view> Tokenizer::IdToToken(uint32_t id) const {
  if (id < added_index_.size() && added_index_[id] >= 0) return std::string_view(added_[added_index_[id]].content);
  const auto& vocab = model_.id_to_token();
  if (id < vocab.size() && !vocab[id].empty()) return std::string_view(vocab[id]);
  return std::nullopt;
}

std::string Tokenizer::Describe() const {
  size_t specials = 0;
  for (const auto& a : added_) specials += a.special;
  std::string prefix, suffix;
  for (uint32_t id : wrap_.prefix) Append(&prefix, prefix.empty() ? "" : " ", id);
  for (uint32_t id : wrap_.suffix) Append(&suffix, suffix.empty() ? "" : " ", id);
  return Cat("source: ", source_, "\nnormalizer: ", normalizer_ ? normalizer_->Describe() : "none",
                      "\npre_tokenizer: ", pre_tokenizer_.Describe(), "\nmodel: byte-level BPE, ", model_.size(),
                      " tokens\nadded tokens: ", added_.size(), " (", specials, " special)\nvocab size: ", vocab_size_,
                      "\nadd_special_tokens: prefix [", prefix, "] suffix [", suffix, "]");
}

}  // namespace myriad::tokenizer
