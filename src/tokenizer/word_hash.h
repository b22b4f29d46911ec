#pragma once
// The hash of a pre-token's bytes for the tokenizer's word tables.
#include <cstddef>
#include <string_view>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL  // header-only use: the hash inlines into the lookup
#endif
#include <xxhash.h>

namespace myriad::tokenizer {

// XXH3: faster than the std::hash Debian's Abseil falls back to for std::string_view.
struct WordHash {
  size_t operator()(std::string_view w) const { return XXH3_64bits(w.data(), w.size()); }
};

}  // namespace myriad::tokenizer
