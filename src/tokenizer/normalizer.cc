#include "tokenizer/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "tokenizer/json_util.h"
#include "tokenizer/unicode.h"

namespace myriad::tokenizer {
namespace {

class IcuForm final : public Normalizer {
 public:
  IcuForm(const icu::Normalizer2* form, std::string name) : form_(form), name_(std::move(name)) {
    for (uint32_t c = 0x80; c < 0x10000; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;  // surrogates: not characters
      const auto u = static_cast<UChar32>(c);
      bool alone = form_->isInert(u);
      if (!alone && form_->hasBoundaryBefore(u)) {
        UErrorCode status = U_ZERO_ERROR;
        alone = form_->isNormalized(icu::UnicodeString(u), status) && U_SUCCESS(status);
      }
      if (alone) inert_[c / 64] |= uint64_t{1} << (c % 64);
    }
  }
  std::string Describe() const override { return name_; }
  std::string_view Normalize(std::string_view in, std::string& buffer) const override {
    // A text whose every character has a normalization boundary before it (no character
    // interacts with the ones before it: ASCII, and the characters of most prompts, CJK and
    // kana included) normalizes character by character, so it is normalized when each of its
    // characters is normalized alone: decided from a table, without ICU's UTF-8 decoding of
    // the whole text. (Kana are not inert, since a voicing mark after one composes with it,
    // but the mark has no boundary before it, so a text holding one goes to ICU.)
    if (AllInert(in)) return in;
    UErrorCode status = U_ZERO_ERROR;
    const icu::StringPiece piece(in.data(), static_cast<int32_t>(in.size()));
    if (form_->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return in;
    status = U_ZERO_ERROR;
    buffer.clear();
    icu::StringByteSink<std::string> sink(&buffer, static_cast<int32_t>(in.size()));
    form_->normalizeUTF8(0, piece, sink, nullptr, status);
    if (U_FAILURE(status)) return in;  // only on allocation failure: keep the text as is
    return buffer;
  }

 private:
  // Whether `s` is well-formed UTF-8 of ASCII and of BMP characters in inert_ (anything else:
  // false, and ICU decides).
  bool AllInert(std::string_view s) const {
    const auto* p = reinterpret_cast<const uint8_t*>(s.data());
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
      while (i + 8 <= n) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        if ((w & 0x8080808080808080ull) != 0) break;
        i += 8;
      }
      if (i >= n) break;
      const uint8_t b = p[i];
      if (b < 0x80) {
        ++i;
        continue;
      }
      size_t len;
      const uint32_t c = DecodeUtf8(s, i, len);
      if (c >= 0x10000) return false;  // beyond the BMP, or invalid UTF-8 (0xFFFFFFFF)
      i += len;
      if ((inert_[c / 64] >> (c % 64) & 1) == 0) return false;
    }
    return true;
  }

  const icu::Normalizer2* form_;
  std::string name_;
  // BMP code point -> normalized alone and a boundary before it (isInert, or hasBoundaryBefore
  // and isNormalized of the character alone).
  std::vector<uint64_t> inert_ = std::vector<uint64_t>(0x10000 / 64, 0);
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  std::string Describe() const override {
    std::string s;
    for (const auto& step : steps_) Append(&s, s.empty() ? "" : " -> ", step->Describe());
    return s;
  }
  std::string_view Normalize(std::string_view in, std::string& buffer) const override {
    // Each step reads the last one's result and writes the other buffer, if it changes it.
    std::string tmp[2];
    int k = 0;
    std::string_view cur = in;
    for (const auto& s : steps_) {
      const std::string_view next = s->Normalize(cur, tmp[k]);
      if (next.data() != cur.data() || next.size() != cur.size()) k ^= 1;
      cur = next;
    }
    if (cur.data() == in.data() && cur.size() == in.size()) return in;
    buffer.assign(cur);
    return buffer;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Normalizer>> ParseNormalizer(const nlohmann::json& j, const std::string& field) {
  if (j.is_null()) return nullptr;
  auto type = GetString(j, "type", field);
  if (!type.ok()) return type.status();
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* form = nullptr;
  if (*type == "NFC") form = icu::Normalizer2::getNFCInstance(status);
  if (*type == "NFD") form = icu::Normalizer2::getNFDInstance(status);
  if (*type == "NFKC") form = icu::Normalizer2::getNFKCInstance(status);
  if (*type == "NFKD") form = icu::Normalizer2::getNFKDInstance(status);
  if (form != nullptr) {
    if (U_FAILURE(status)) return absl::InternalError(Cat(field, ": ICU ", *type, " data unavailable"));
    return std::unique_ptr<Normalizer>(new IcuForm(form, *type));
  }
  if (*type == "Sequence") {
    const std::string list_field = field + ".normalizers";
    auto list = GetArray(j, "normalizers", field);
    if (!list.ok()) return list.status();
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < (*list)->size(); ++i) {
      auto step = ParseNormalizer((**list)[i], Cat(list_field, "[", i, "]"));
      if (!step.ok()) return step.status();
      if (*step != nullptr) steps.push_back(*std::move(step));
    }
    if (steps.empty()) return nullptr;
    if (steps.size() == 1) return std::move(steps[0]);
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(steps)));
  }
  return Unsupported(field + ".type", *type);
}

}  // namespace myriad::tokenizer
