#pragma once
// A bounded map from a pre-token's bytes to its ids, so a word's merges run once. Not
// thread-safe: each concurrent Encode call owns one (see Tokenizer's context pool). When full
// it empties itself, which keeps lookups cheap and memory fixed, at the price of a burst of
// misses; prompts reuse a small working set of words, so that is rare.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tokenizer/word_hash.h"

namespace myriad::tokenizer {

class WordCache {
 public:
  // At most `max_words` words of at most kMaxWordBytes each.
  explicit WordCache(size_t max_words);

  static constexpr size_t kMaxWordBytes = 128;  // longer pre-tokens are rare: not worth a slot

  // Appends the cached ids of `word` to `out`; false on a miss.
  bool Lookup(std::string_view word, std::vector<uint32_t>& out) const {
    auto it = map_.find(word);
    if (it == map_.end()) return false;
    out.insert(out.end(), ids_.begin() + it->second.offset, ids_.begin() + it->second.offset + it->second.count);
    return true;
  }

  void Insert(std::string_view word, const uint32_t* ids, size_t count);

  size_t size() const { return map_.size(); }

  // Forgets every word, keeping the memory.
  void Clear();

 private:
  struct Span {
    uint32_t offset;
    uint32_t count;
  };
  size_t max_words_;
  std::string keys_;  // reserved once and cleared, never reallocated: map_'s views stay valid
  std::vector<uint32_t> ids_;
  absl::flat_hash_map<std::string_view, Span, WordHash> map_;
};

}  // namespace myriad::tokenizer
