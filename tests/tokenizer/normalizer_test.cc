// Normalizers: the inert-text shortcut (no copy) and ICU's forms agree, alone and in a Sequence.
#include "tokenizer/normalizer.h"

#include <gtest/gtest.h>

#include <unicode/normalizer2.h>

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

// The table of characters the shortcut accepts, checked against ICU itself: every BMP
// character, alone and before a combining acute, a kana voicing mark and a Hangul vowel and
// final (which compose with some characters before them), gives what ICU's normalizeUTF8 gives.
TEST(TokenizerNormalizer, ShortcutAgreesWithIcuOnEveryBmpCharacter) {
  std::string buffer;
  for (const char* type : {"NFC", "NFD", "NFKC", "NFKD"}) {
    const auto n = Parse({{"type", type}});
    UErrorCode status = U_ZERO_ERROR;
    const std::string t = type;
    const icu::Normalizer2* form = t == "NFC"    ? icu::Normalizer2::getNFCInstance(status)
                                   : t == "NFD"  ? icu::Normalizer2::getNFDInstance(status)
                                   : t == "NFKC" ? icu::Normalizer2::getNFKCInstance(status)
                                                 : icu::Normalizer2::getNFKDInstance(status);
    ASSERT_TRUE(U_SUCCESS(status));
    int mismatches = 0;
    for (uint32_t c = 0x20; c < 0x10000 && mismatches < 5; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      std::string ch;
      icu::UnicodeString(static_cast<UChar32>(c)).toUTF8String(ch);
      for (const char* after : {"", "\u0301", "\u3099", "\u1161", "\u11a8"}) {
        const std::string text = "a" + ch + after;
        std::string want;
        icu::StringByteSink<std::string> sink(&want);
        status = U_ZERO_ERROR;
        form->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink, nullptr, status);
        ASSERT_TRUE(U_SUCCESS(status));
        if (n->Normalize(text, buffer) != want) {
          ++mismatches;
          ADD_FAILURE() << type << ": U+" << std::hex << c << " before '" << after << "'";
        }
      }
    }
  }
}

}  // namespace
}  // namespace myriad::tokenizer
