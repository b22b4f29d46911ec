#include "tokenizer/word_cache.h"

namespace myriad::tokenizer {
namespace {
// Average bytes and ids per cached word we size the arenas for; when either arena fills up
// before `max_words`, the cache empties early rather than reallocating.
constexpr size_t kBytesPerWord = 16;
// The map starts at this many words and grows with use rather than reserving max_words: sized
// to the words actually cached its slots stay in L2 (16 k words take 800 KB of slots; 65,536
// reserved took 3 MB and made a warm encode 10-20% slower), and a typical prompt's distinct
// words (about 10 k in 100 k tokens of prose) fit without rehashing.
constexpr size_t kInitialWords = 16384;
}  // namespace

WordCache::WordCache(size_t max_words) : max_words_(max_words) {
  keys_.reserve(max_words * kBytesPerWord);
  map_.reserve(kInitialWords);
}

void WordCache::Insert(std::string_view word, const uint32_t* ids, size_t count) {
  if (word.size() > kMaxWordBytes || max_words_ == 0) return;
  if (map_.size() >= max_words_ || keys_.size() + word.size() > keys_.capacity()) Clear();
  const size_t key_offset = keys_.size();
  keys_.append(word);
  const auto offset = static_cast<uint32_t>(ids_.size());
  ids_.insert(ids_.end(), ids, ids + count);
  map_.emplace(std::string_view(keys_.data() + key_offset, word.size()), Span{offset, static_cast<uint32_t>(count)});
}

void WordCache::Clear() {
  map_.clear();
  keys_.clear();
  ids_.clear();
  map_.reserve(kInitialWords);
}

}  // namespace myriad::tokenizer
