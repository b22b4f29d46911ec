#pragma once
// GPT-2's byte-to-character map ("bytes_to_unicode"): byte-level vocabularies spell every byte
// as a printable character (0x20 ' ' is 'Ġ', U+0120). We store the vocabulary as raw bytes and
// use these to translate at load and decode time.
#include <cstdint>
#include <string>
#include <string_view>

namespace myriad::tokenizer {

// The character that spells byte `b`.
uint32_t ByteToChar(uint8_t b);

// The byte a character spells, or -1 when it spells none.
int CharToByte(uint32_t cp);

// Raw bytes -> their byte-level spelling (UTF-8), e.g. " hi" -> "Ġhi".
std::string ByteLevelSpell(std::string_view bytes);

// A byte-level token -> raw bytes as Hugging Face's ByteLevel decoder does: characters that
// spell a byte become it, any other character passes through as its UTF-8. Returns whether
// every character spelled a byte.
bool ByteLevelUnspell(std::string_view token, std::string& out);

// Appends one code point as UTF-8.
void AppendUtf8(uint32_t cp, std::string& out);

}  // namespace myriad::tokenizer
