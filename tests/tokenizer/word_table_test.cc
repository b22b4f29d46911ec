// WordTable and WordHash: the length-masked fast paths for words inside a longer text
// (HashReadable, FindReadable) agree with the plain ones whatever bytes follow the word.
#include "tokenizer/word_table.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace myriad::tokenizer {
namespace {

TEST(TokenizerWordTable, HashReadableIgnoresTheBytesAfterTheWord) {
  std::mt19937_64 rng(7);
  for (size_t n = 0; n <= 40; ++n) {
    for (int trial = 0; trial < 200; ++trial) {
      std::string text(n + 16, '\0');
      for (char& c : text) c = static_cast<char>(rng());
      const std::string word = text.substr(0, n);
      ASSERT_EQ(WordTable::HashReadable(std::string_view(text).substr(0, n)), WordTable::Hash(word)) << n;
    }
  }
}

TEST(TokenizerWordTable, FindReadableAgreesWithFind) {
  std::mt19937_64 rng(11);
  // Words of 1-24 bytes over a small alphabet with NUL in it, so that many share prefixes and
  // differ only in a last byte or in length.
  std::vector<std::string> words;
  for (int k = 0; k < 3000; ++k) {
    std::string w(1 + rng() % 24, '\0');
    for (char& c : w) c = "ab\0c"[rng() % 4];
    words.push_back(w);
  }
  WordTable table(4096, 4096 * 12);
  uint32_t id = 0;
  for (size_t k = 0; k < words.size(); k += 2) {  // every other word; the rest are probes that miss
    const uint64_t h = WordTable::Hash(words[k]);
    if (table.Find(words[k], h) == nullptr) table.Insert(words[k], h, &++id, 1);
  }
  for (const std::string& w : words) {
    for (int trial = 0; trial < 3; ++trial) {
      std::string text = w + std::string(16, '\0');
      for (size_t i = w.size(); i < text.size(); ++i) text[i] = trial == 0 ? '\0' : "ab\0c"[rng() % 4];
      const std::string_view word = std::string_view(text).substr(0, w.size());
      const uint64_t h = WordTable::HashReadable(word);
      ASSERT_EQ(table.FindReadable(word, h), table.Find(w, WordTable::Hash(w))) << w.size();
    }
  }
}

}  // namespace
}  // namespace myriad::tokenizer
