#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/unicode.h"

namespace myriad::tokenizer {
namespace {

struct Tables {
  std::array<uint32_t, 256> byte_to_char{};
  std::array<int16_t, 512> char_to_byte{};  // every spelling is below U+0200
  Tables() {
    char_to_byte.fill(-1);
    uint32_t extra = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      byte_to_char[b] = printable ? b : 256 + extra++;
      char_to_byte[byte_to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& T() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t ByteToChar(uint8_t b) { return T().byte_to_char[b]; }

int CharToByte(uint32_t cp) { return cp < 512 ? T().char_to_byte[cp] : -1; }

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string ByteLevelSpell(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) AppendUtf8(ByteToChar(static_cast<uint8_t>(c)), out);
  return out;
}

bool ByteLevelUnspell(std::string_view token, std::string& out) {
  bool all = true;
  size_t len;
  for (size_t i = 0; i < token.size(); i += len) {
    const uint32_t cp = DecodeUtf8(token, i, len);
    const int b = cp == 0xFFFFFFFFu ? -1 : CharToByte(cp);
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      out.append(token.substr(i, len));
      all = false;
    }
  }
  return all;
}

}  // namespace myriad::tokenizer
