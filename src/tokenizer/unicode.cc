#include "tokenizer/unicode.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <iterator>
#include <mutex>

namespace myriad::tokenizer {

namespace {

constexpr CodePointRange kSupplement[] = {
#include "tokenizer/unicode_supplement.inc"
};

uint8_t ClassOfType(uint32_t cp, int8_t type) {
  uint8_t c = 0;
  switch (type) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      c = kLetter;
      break;
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK:
      c = kMark;
      break;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      c = kNumber;
      break;
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_CONNECTOR_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
      c = kPunct;
      break;
    case U_MATH_SYMBOL:
    case U_CURRENCY_SYMBOL:
    case U_MODIFIER_SYMBOL:
    case U_OTHER_SYMBOL:
      c = kSymbol;
      break;
    default:
      break;
  }
  if (u_isUWhiteSpace(static_cast<UChar32>(cp))) c |= kSpace;
  if (cp == '\r' || cp == '\n') c |= kCrLf;
  return c;
}

// ICU's class, or the supplement's where ICU has the code point unassigned (a newer ICU knows
// more and the supplement then changes nothing).
uint8_t ClassOfCodePoint(uint32_t cp) {
  const int8_t type = u_charType(static_cast<UChar32>(cp));
  return type == U_UNASSIGNED ? SupplementaryClass(cp) : ClassOfType(cp, type);
}

// The Basic Multilingual Plane, filled once: 64 KiB, and u_charType's trie walk leaves the loop.
struct BmpTable {
  std::array<uint8_t, 0x10000> cls;
  BmpTable() {
    for (uint32_t cp = 0; cp < 0x10000; ++cp) cls[cp] = ClassOfCodePoint(cp);
  }
};

// Built at load time rather than on first use, so lookups carry no initialization guard.
const BmpTable kBmp;

}  // namespace

uint8_t ClassFromIcu(uint32_t cp) { return ClassOfType(cp, u_charType(static_cast<UChar32>(cp))); }

std::span<const CodePointRange> SupplementaryRanges() { return kSupplement; }

uint8_t SupplementaryClass(uint32_t cp) {
  const auto* it = std::upper_bound(std::begin(kSupplement), std::end(kSupplement), cp,
                                    [](uint32_t c, const CodePointRange& r) { return c < r.first; });
  if (it == std::begin(kSupplement)) return 0;
  --it;
  return cp <= it->last ? it->cls : 0;
}

uint8_t ClassOfNonAscii(uint32_t cp) {
  if (cp < 0x10000) return kBmp.cls[cp];
  if (cp > 0x10FFFF) return 0;
  return ClassOfCodePoint(cp);
}


}  // namespace myriad::tokenizer
