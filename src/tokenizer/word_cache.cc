#include "tokenizer/word_cache.h"

namespace myriad::tokenizer {
namespace {
// Average bytes and ids per cached word we size the arenas for; when either arena fills up
// before `max_words`, the cache empties early rather than reallocating.
constexpr size_t kBytesPerWord = 16;
}  // namespace

WordCache::WordCache(size_t max_words) : max_words_(max_words) {
  keys_.reserve(max_words * kBytesPerWord);
  // The map is not reserved: sized to the words actually cached, its slots stay in L2 (a
  // prompt's 10 k distinct words take 400 KB; 65,536 reserved would take 3 MB).
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
}

}  // namespace myriad::tokenizer
