#pragma once
// The hash of a pre-token's bytes for the tokenizer's word tables.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL  // header-only use: the hash inlines into the lookup
#endif
#include <xxhash.h>

namespace myriad::tokenizer {

namespace word_hash_internal {
// The mask of the first n (0..16) bytes of a 16-byte block, as two little-endian halves.
struct Masks {
  uint64_t m[17][2];
  constexpr Masks() : m{} {
    for (size_t n = 0; n <= 16; ++n) {
      m[n][0] = n >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * n)) - 1;
      m[n][1] = n <= 8 ? 0 : n == 16 ? ~uint64_t{0} : (uint64_t{1} << (8 * (n - 8))) - 1;
    }
  }
};
inline constexpr Masks kMasks{};
}  // namespace word_hash_internal

// Words of up to 16 bytes (nearly all pre-tokens) are read as two 8-byte halves, zero beyond
// the word, and mixed by one 64 x 64 -> 128-bit multiply (the wyhash construction), a few
// cycles against XXH3's length dispatch; longer ones go to XXH3. Both halves of the result are
// well mixed: the word tables take a tag from the upper half and the home slot from that tag's
// low bits. Where the caller knows that 16 bytes from the word's start may be read (a word
// inside a longer text), HashReadable loads them as they are and masks them by the length, so
// that hashing takes no branch on the word's length (a misprediction per few words otherwise).
struct WordHash {
  size_t operator()(std::string_view w) const {
    const size_t n = w.size();
    if (n > 16) return XXH3_64bits(w.data(), n);
    char buf[16] = {};
    std::memcpy(buf, w.data(), n);
    return Short(buf, n);
  }
  // The same hash; needs the 16 bytes from w.data() readable.
  static size_t HashReadable(std::string_view w) {
    const size_t n = w.size();
    if (n > 16) [[unlikely]] return XXH3_64bits(w.data(), n);
    return Short(w.data(), n);
  }

 private:
  // p: 16 readable bytes of which the word is the first n.
  static size_t Short(const char* p, size_t n) {
    static_assert(std::endian::native == std::endian::little, "the masks keep the first bytes");
    uint64_t a, b;
    std::memcpy(&a, p, 8);
    std::memcpy(&b, p + 8, 8);
    a &= word_hash_internal::kMasks.m[n][0];
    b &= word_hash_internal::kMasks.m[n][1];
    const unsigned __int128 m = static_cast<unsigned __int128>(a ^ 0xA0761D6478BD642Full) *
                                (b ^ (0xE7037ED1A0B428DBull + n));
    const uint64_t h = static_cast<uint64_t>(m) ^ static_cast<uint64_t>(m >> 64);
    // One more round so that words differing in a single byte spread over the whole tag.
    const unsigned __int128 m2 = static_cast<unsigned __int128>(h ^ 0x8EBC6AF09C88C6E3ull) * 0x589965CC75374CC3ull;
    return static_cast<size_t>(static_cast<uint64_t>(m2) ^ static_cast<uint64_t>(m2 >> 64));
  }
};

}  // namespace myriad::tokenizer
