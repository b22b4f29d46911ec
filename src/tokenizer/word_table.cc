#include "tokenizer/word_table.h"

#include <algorithm>

namespace myriad::tokenizer {
namespace {
// The slots start with room for this many words at the load factor of 1/2, and double as words
// come: sized to the words actually held they stay in the processor's caches (a prompt's 10-20 k
// distinct words take 256-512 KiB).
constexpr size_t kInitialWords = 16384;
}  // namespace

WordTable::WordTable(size_t max_words, size_t arena_words) : max_words_(max_words) {
  if (max_words == 0) return;
  size_t slots = 16;
  while (slots < 2 * std::min(max_words, kInitialWords)) slots *= 2;
  slots_ = HugeArray<uint64_t>(slots, 0);
  mask_ = slots - 1;
  arena_ = HugeArray<uint32_t>(std::max<size_t>(arena_words, 2) + kSlackWords, 0);
}

uint32_t WordTable::Append(std::string_view word, const uint32_t* ids, size_t count) {
  const auto offset = static_cast<uint32_t>(used_);
  uint32_t* e = &arena_[used_];
  e[0] = static_cast<uint32_t>(word.size()) | static_cast<uint32_t>(count == kPending ? kPending : count) << 16;
  const size_t n = count == kPending ? 1 : count;
  std::copy(ids, ids + n, e + 1);
  std::memcpy(e + 1 + n, word.data(), word.size());
  used_ += EntryWords(word.size(), n);
  return offset;
}

uint32_t WordTable::Insert(std::string_view word, uint64_t hash, const uint32_t* ids, size_t count) {
  if (!enabled()) return 0;
  if (2 * (size_ + 1) > mask_ + 1) Grow();
  const uint32_t offset = Append(word, ids, count);
  size_t i = (hash >> 32) & mask_;
  while (slots_[i] != 0) i = (i + 1) & mask_;
  slots_[i] = (hash >> 32) << 32 | offset;
  ++size_;
  return offset;
}

void WordTable::Replace(std::string_view word, uint64_t hash, uint32_t offset, const uint32_t* ids, size_t count) {
  if (!enabled()) return;
  if (count == 1) {
    uint32_t* e = &arena_[offset];
    e[0] = static_cast<uint32_t>(word.size()) | uint32_t{1} << 16;
    e[1] = ids[0];
    return;
  }
  const uint64_t old = (hash >> 32) << 32 | offset;
  for (size_t i = (hash >> 32) & mask_;; i = (i + 1) & mask_) {
    const uint64_t s = slots_[i];
    if (s == 0) return;  // not there (cannot happen while the caller follows the contract)
    if (s == old) {
      slots_[i] = (hash >> 32) << 32 | Append(word, ids, count);
      return;
    }
  }
}

void WordTable::Grow() {
  const size_t n = 2 * (mask_ + 1);
  HugeArray<uint64_t> slots(n, 0);
  const size_t mask = n - 1;
  for (size_t i = 0; i <= mask_; ++i) {
    const uint64_t s = slots_[i];
    if (s == 0) continue;
    size_t j = (s >> 32) & mask;
    while (slots[j] != 0) j = (j + 1) & mask;
    slots[j] = s;
  }
  slots_ = std::move(slots);
  mask_ = mask;
}

void WordTable::Clear() {
  if (!enabled()) return;
  size_ = 0;
  used_ = 1;
  // The slots keep the size they grew to: a cache that filled up once will again.
  std::fill(slots_.data(), slots_.data() + mask_ + 1, uint64_t{0});
}

}  // namespace myriad::tokenizer
