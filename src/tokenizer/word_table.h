#pragma once
// A map from a pre-token's bytes to its token ids, laid out for a cold cache: a slot of 8 bytes
// (a 32-bit tag of the hash and the entry's offset) and an entry that holds the key and the ids
// together, so a lookup reads the slot and one entry, and a caller that hashes a word once can
// prefetch both ahead of time. Insert-only but for Clear. Serves as the tokenizer's per-call
// word cache and as its table of whole-vocabulary words. Not thread-safe.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/huge_array.h"
#include "tokenizer/word_hash.h"

namespace myriad::tokenizer {

class WordTable {
 public:
  static constexpr size_t kMaxWordBytes = 0xFFFF;
  static constexpr uint32_t kPending = 0xFFFF;  // an entry's count while its ids are being made

  // At most `max_words` words; their entries (about 2 + bytes / 4 + ids 32-bit words each) in at
  // most `arena_words`. max_words == 0 makes a table that holds nothing.
  WordTable(size_t max_words, size_t arena_words);

  static uint64_t Hash(std::string_view word) { return WordHash{}(word); }
  // The same, for a word followed by at least 16 - word.size() more readable bytes.
  static uint64_t HashReadable(std::string_view word) { return WordHash::HashReadable(word); }

  // The entry of `word` (whose Hash is `hash`), or nullptr.
  const uint32_t* Find(std::string_view word, uint64_t hash) const { return FindWith<false>(word, hash); }
  // The same for a word followed by at least 16 - word.size() readable bytes (HashReadable's
  // condition): a key of up to 16 bytes is compared as two masked 8-byte halves, with no
  // branch on its length (the arena keeps 16 readable bytes after every key).
  const uint32_t* FindReadable(std::string_view word, uint64_t hash) const { return FindWith<true>(word, hash); }
  void PrefetchSlot(uint64_t hash) const {
    if (mask_ != 0) __builtin_prefetch(&slots_[(hash >> 32) & mask_]);
  }
  // Prefetches the entry the home slot points to, when its tag matches (the slot having been
  // prefetched before: this reads it).
  void PrefetchEntry(uint64_t hash) const {
    if (mask_ == 0) return;
    const uint64_t s = slots_[(hash >> 32) & mask_];
    if (s != 0 && (s >> 32) == (hash >> 32)) __builtin_prefetch(&arena_[static_cast<uint32_t>(s)]);
  }

  // An entry's ids: Count(e) of them from Ids(e); a pending entry has Count kPending and one id,
  // the caller's job number.
  static uint32_t Count(const uint32_t* e) { return e[0] >> 16; }
  static const uint32_t* Ids(const uint32_t* e) { return e + 1; }

  // Whether a new word (Insert) or a new entry for a word (Replace) with `count` ids (or
  // kPending) fits without Clear.
  bool HasRoom(size_t word_bytes, size_t count, bool new_word = true) const {
    return (!new_word || size_ < max_words_) &&
           used_ + EntryWords(word_bytes, count == kPending ? 1 : count) + kSlackWords <= arena_.size();
  }
  // Adds a word that is not in the table; needs HasRoom and word.size() <= kMaxWordBytes.
  // Returns the entry's offset.
  uint32_t Insert(std::string_view word, uint64_t hash, const uint32_t* ids, size_t count);
  // Gives the pending entry of `word` at `offset` (Insert's) its ids: in place when one id
  // fits where the job number was, else a new entry its slot points to, which needs
  // HasRoom(..., new_word = false).
  bool FitsInPlace(size_t count) const { return count == 1; }
  void Replace(std::string_view word, uint64_t hash, uint32_t offset, const uint32_t* ids, size_t count);

  size_t size() const { return size_; }
  bool enabled() const { return max_words_ != 0; }
  // Forgets every word, keeping the memory.
  void Clear();

 private:
  template <bool kReadable>
  const uint32_t* FindWith(std::string_view word, uint64_t hash) const {
    if (mask_ == 0) return nullptr;
    const uint64_t tag = hash >> 32;
    for (size_t i = tag & mask_;; i = (i + 1) & mask_) {
      const uint64_t s = slots_[i];
      if (s == 0) return nullptr;
      if ((s >> 32) == tag) {
        const uint32_t* e = &arena_[static_cast<uint32_t>(s)];
        if (Len(e) == word.size() && (kReadable ? SameBytesReadable(KeyOf(e), word.data(), word.size())
                                                : SameBytes(KeyOf(e), word.data(), word.size()))) {
          return e;
        }
      }
    }
  }
  static bool SameBytesReadable(const char* a, const char* b, size_t n) {
    if (n > 16) [[unlikely]] return std::memcmp(a, b, n) == 0;
    uint64_t a0, a1, b0, b1;
    std::memcpy(&a0, a, 8);
    std::memcpy(&a1, a + 8, 8);
    std::memcpy(&b0, b, 8);
    std::memcpy(&b1, b + 8, 8);
    const auto& m = word_hash_internal::kMasks.m[n];
    return (((a0 ^ b0) & m[0]) | ((a1 ^ b1) & m[1])) == 0;
  }
  static uint32_t Len(const uint32_t* e) { return e[0] & 0xFFFF; }
  // memcmp == 0 without the call for the short words that are most of a prompt: two
  // overlapping loads from each side cover 4-16 bytes.
  static bool SameBytes(const char* a, const char* b, size_t n) {
    auto load8 = [](const char* p) {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    };
    auto load4 = [](const char* p) {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    };
    if (n >= 8 && n <= 16) return load8(a) == load8(b) && load8(a + n - 8) == load8(b + n - 8);
    if (n >= 4 && n < 8) return load4(a) == load4(b) && load4(a + n - 4) == load4(b + n - 4);
    return std::memcmp(a, b, n) == 0;
  }
  static const char* KeyOf(const uint32_t* e) {
    const uint32_t c = Count(e);
    return reinterpret_cast<const char*>(e + 1 + (c == kPending ? 1 : c));
  }
  static size_t EntryWords(size_t bytes, size_t count) { return 1 + count + (bytes + 3) / 4; }
  // Words past the last entry that are never used, so that 16 bytes from any key can be read.
  static constexpr size_t kSlackWords = 4;
  uint32_t Append(std::string_view word, const uint32_t* ids, size_t count);
  void Grow();

  size_t max_words_;
  size_t size_ = 0;
  // tag << 32 | arena offset, where the tag is the hash's upper half and its low bits the home
  // slot (so growing needs no hashing); 0 is empty (offset 0 is never used).
  HugeArray<uint64_t> slots_;
  size_t mask_ = 0;
  HugeArray<uint32_t> arena_;
  size_t used_ = 1;
};

}  // namespace myriad::tokenizer
