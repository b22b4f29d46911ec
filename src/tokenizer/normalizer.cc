#include "tokenizer/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "tokenizer/json_util.h"
#include "tokenizer/unicode.h"

namespace myriad::tokenizer {
namespace {

class IcuForm final : public Normalizer {
 public:
  IcuForm(const icu::Normalizer2* form, std::string name) : form_(form), name_(std::move(name)) {}
  std::string Describe() const override { return name_; }
  void Normalize(std::string_view in, std::string& out) const override {
    out.clear();
    // ASCII is invariant under every form; most prompts are mostly ASCII, so skip ICU's
    // UTF-8 decoding entirely for them.
    if (IsAscii(in)) {
      out.assign(in);
      return;
    }
    UErrorCode status = U_ZERO_ERROR;
    const icu::StringPiece piece(in.data(), static_cast<int32_t>(in.size()));
    if (form_->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) {
      out.assign(in);
      return;
    }
    status = U_ZERO_ERROR;
    icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(in.size()));
    form_->normalizeUTF8(0, piece, sink, nullptr, status);
    if (U_FAILURE(status)) out.assign(in);  // only on allocation failure: keep the text as is
  }

 private:
  const icu::Normalizer2* form_;
  std::string name_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  std::string Describe() const override {
    std::string s;
    for (const auto& step : steps_) Append(&s, s.empty() ? "" : " -> ", step->Describe());
    return s;
  }
  void Normalize(std::string_view in, std::string& out) const override {
    std::string tmp(in);
    for (const auto& s : steps_) {
      s->Normalize(tmp, out);
      tmp.swap(out);
    }
    out.swap(tmp);
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
