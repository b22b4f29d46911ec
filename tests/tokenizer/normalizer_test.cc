// Normalizers: the inert-text shortcut (no copy) and ICU's forms agree, alone and in a Sequence.
#include "tokenizer/normalizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace myriad::tokenizer {
namespace {

std::unique_ptr<Normalizer> Parse(const nlohmann::json& j) {
  auto n = ParseNormalizer(j, "normalizer");
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? *std::move(n) : nullptr;
}

TEST(TokenizerNormalizer, InertTextIsReturnedAsIs) {
  const auto nfc = Parse({{"type", "NFC"}});
  std::string buffer;
  for (const std::string text : {"plain ASCII", "\u8fd9\u662f\u4e00\u4e2a \u30ad\u30e3\u30c3\u30b7\u30e5 caf\u00e9", ""}) {
    const std::string_view got = nfc->Normalize(text, buffer);
    EXPECT_EQ(got, text);
    EXPECT_EQ(got.data(), text.data()) << "a copy of " << text;
  }
}

TEST(TokenizerNormalizer, FormsChangeWhatTheyMust) {
  const auto nfc = Parse({{"type", "NFC"}});
  const auto nfd = Parse({{"type", "NFD"}});
  const auto both = Parse({{"type", "Sequence"}, {"normalizers", {{{"type", "NFD"}}, {{"type", "NFC"}}}}});
  const auto twice = Parse({{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "NFC"}}}}});
  std::string buffer;
  // A combining mark after ASCII, after a CJK character, a kana voicing mark, Hangul jamo,
  // invalid UTF-8 (left to ICU).
  EXPECT_EQ(nfc->Normalize("e\u0301 A\u030a", buffer), "\u00e9 \u00c5");
  EXPECT_EQ(nfc->Normalize("\u4e2d\u0301", buffer), "\u4e2d\u0301");
  EXPECT_EQ(nfc->Normalize("\u304b\u3099", buffer), "\u304c");
  EXPECT_EQ(nfc->Normalize("\u1100\u1161", buffer), "\uac00");
  EXPECT_EQ(nfd->Normalize("\u00e9x", buffer), "e\u0301x");
  EXPECT_EQ(both->Normalize("\u00e9 e\u0301 x", buffer), "\u00e9 \u00e9 x");
  EXPECT_EQ(twice->Normalize("e\u0301", buffer), "\u00e9");
  const std::string ascii = "no change";
  EXPECT_EQ(both->Normalize(ascii, buffer).data(), ascii.data());
}

}  // namespace
}  // namespace myriad::tokenizer
