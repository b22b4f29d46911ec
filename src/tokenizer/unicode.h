#pragma once
// Unicode character classes the pre-tokenizer patterns need (\p{L}, \p{N}, \s, ...), over
// UTF-8 input, without a regex engine. Categories come from ICU; the Basic Multilingual Plane is
// cached in a 64 KiB table so the hot loop costs one load per character.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace myriad::tokenizer {

// One bit per class a pattern may test. A character has exactly one of the general-category
// bits (letter, mark, number, punct, symbol, or none of them) and may have kSpace besides.
enum CharClass : uint8_t {
  kLetter = 1 << 0,  // \p{L}
  kMark = 1 << 1,    // \p{M}
  kNumber = 1 << 2,  // \p{N}
  kPunct = 1 << 3,   // \p{P}
  kSymbol = 1 << 4,  // \p{S}
  kSpace = 1 << 5,   // \s as Oniguruma (Hugging Face's regex engine) reads it: White_Space
  kCrLf = 1 << 6,    // [\r\n]
};

// Decodes one code point at s[i] (i < s.size()); sets `len` to its byte length. Invalid or
// truncated UTF-8 yields one byte with code point 0xFFFFFFFF, which belongs to no class, so
// arbitrary bytes never crash or loop (Hugging Face only ever sees valid UTF-8).
inline uint32_t DecodeUtf8(std::string_view s, size_t i, size_t& len) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    len = 1;
    return b0;
  }
  const size_t left = s.size() - i;
  auto cont = [&](size_t k) { return k < left && (static_cast<uint8_t>(s[i + k]) & 0xC0) == 0x80; };
  auto at = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i + k]) & 0x3F); };
  if (b0 >= 0xC2 && b0 < 0xE0 && cont(1)) {
    len = 2;
    return ((b0 & 0x1Fu) << 6) | at(1);
  }
  if (b0 >= 0xE0 && b0 < 0xF0 && cont(1) && cont(2)) {
    const uint32_t cp = ((b0 & 0x0Fu) << 12) | (at(1) << 6) | at(2);
    if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) {
      len = 3;
      return cp;
    }
  } else if (b0 >= 0xF0 && b0 < 0xF5 && cont(1) && cont(2) && cont(3)) {
    const uint32_t cp = ((b0 & 0x07u) << 18) | (at(1) << 12) | (at(2) << 6) | at(3);
    if (cp >= 0x10000 && cp <= 0x10FFFF) {
      len = 4;
      return cp;
    }
  }
  len = 1;
  return 0xFFFFFFFFu;
}

// ASCII's classes, spelled out so the common case is one inline load (a test checks them
// against ICU).
inline constexpr auto kAsciiClass = [] {
  struct Table {
    uint8_t c[128] = {};
  } t;
  for (int i = 0; i < 128; ++i) {
    const char ch = static_cast<char>(i);
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) t.c[i] = kLetter;
    else if (ch >= '0' && ch <= '9') t.c[i] = kNumber;
    else if (ch == ' ' || (ch >= '\t' && ch <= '\r')) t.c[i] = kSpace | ((ch == '\r' || ch == '\n') ? kCrLf : 0);
    else if (ch == '$' || ch == '+' || ch == '<' || ch == '=' || ch == '>' || ch == '^' || ch == '`' || ch == '|' ||
             ch == '~') t.c[i] = kSymbol;
    else if (ch > ' ' && ch < 127) t.c[i] = kPunct;
  }
  return t;
}();

// The classes of a non-ASCII code point (0 for invalid ones).
uint8_t ClassOfNonAscii(uint32_t cp);

// The classes of code point `cp` (0 for invalid ones).
inline uint8_t ClassOf(uint32_t cp) { return cp < 128 ? kAsciiClass.c[cp] : ClassOfNonAscii(cp); }

// The classes straight from ICU, for tests.
uint8_t ClassFromIcu(uint32_t cp);

// Classes of the character at s[i]; sets `len` to its byte length.
inline uint8_t ClassAt(std::string_view s, size_t i, size_t& len) {
  const auto b = static_cast<uint8_t>(s[i]);
  if (b < 0x80) {
    len = 1;
    return kAsciiClass.c[b];
  }
  return ClassOfNonAscii(DecodeUtf8(s, i, len));
}

}  // namespace myriad::tokenizer
