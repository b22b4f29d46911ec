#pragma once
// The hash of a pre-token's bytes for the tokenizer's word tables.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL  // header-only use: the hash inlines into the lookup
#endif
#include <xxhash.h>

namespace myriad::tokenizer {

// Words of up to 16 bytes (nearly all pre-tokens) are read as two overlapping loads and mixed
// by one 64 x 64 -> 128-bit multiply (the wyhash construction), a few cycles against XXH3's
// length dispatch; longer ones go to XXH3. Both halves of the result are well mixed: the word
// tables take a tag from the upper half and the home slot from that tag's low bits.
struct WordHash {
  size_t operator()(std::string_view w) const {
    const size_t n = w.size();
    if (n > 16) return XXH3_64bits(w.data(), n);
    const char* p = w.data();
    uint64_t a = 0, b = 0;
    if (n >= 8) {
      std::memcpy(&a, p, 8);
      std::memcpy(&b, p + n - 8, 8);
    } else if (n >= 4) {
      uint32_t x, y;
      std::memcpy(&x, p, 4);
      std::memcpy(&y, p + n - 4, 4);
      a = x;
      b = y;
    } else if (n > 0) {
      a = static_cast<uint64_t>(static_cast<uint8_t>(p[0])) << 16 |
          static_cast<uint64_t>(static_cast<uint8_t>(p[n / 2])) << 8 | static_cast<uint8_t>(p[n - 1]);
    }
    const unsigned __int128 m = static_cast<unsigned __int128>(a ^ 0xA0761D6478BD642Full) *
                                (b ^ (0xE7037ED1A0B428DBull + n));
    const uint64_t h = static_cast<uint64_t>(m) ^ static_cast<uint64_t>(m >> 64);
    // One more round so that words differing in a single byte spread over the whole tag.
    const unsigned __int128 m2 = static_cast<unsigned __int128>(h ^ 0x8EBC6AF09C88C6E3ull) * 0x589965CC75374CC3ull;
    return static_cast<size_t>(static_cast<uint64_t>(m2) ^ static_cast<uint64_t>(m2 >> 64));
  }
};

}  // namespace myriad::tokenizer
