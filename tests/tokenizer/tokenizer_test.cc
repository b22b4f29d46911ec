// Tokenizer tests that need no downloaded files: a small byte-level BPE written here, errors,
// and the hand-written split patterns against PCRE2.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "../cli/run_myriad.h"
#include "corpus.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/split_pattern.h"
#include "tokenizer/unicode.h"
#include "../test_util/temp_dir.h"

namespace myriad::tokenizer {
namespace {

using nlohmann::json;

// Ids 0-255: the byte-level spelling of bytes 0-255; then the merges' results in order.
json TinyTokenizer(bool pair_merges = false) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteLevelSpell(std::string(1, static_cast<char>(b)))] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"\u0120", "w"}, {"o", "r"}, {"\u0120w", "or"}, {"l", "d"},
      {"a", "a"}, {"aa", "aa"}};
  json m = json::array();
  uint32_t next = 256;
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
    if (pair_merges) m.push_back({a, b});
    else m.push_back(a + " " + b);
  }
  return json{
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", 300}, {"content", "<|bos|>"}, {"special", true}, {"lstrip", false}, {"rstrip", false},
         {"single_word", false}, {"normalized", false}},
        {{"id", 301}, {"content", "<pad>"}, {"special", false}, {"lstrip", true}, {"rstrip", true},
         {"single_word", false}, {"normalized", true}}}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<|bos|>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<|bos|>", {{"id", "<|bos|>"}, {"ids", {300}}, {"tokens", {"<|bos|>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}}},
  };
}

std::unique_ptr<Tokenizer> Make(const json& j) {
  auto t = Tokenizer::FromJson(j.dump(), "tiny.json");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

TEST(TokenizerTiny, MergesByRank) {
  auto t = Make(TinyTokenizer());
  ASSERT_NE(t, nullptr);
  const uint32_t hello = *t->TokenToId("hello");
  const uint32_t world = *t->TokenToId("\u0120wor");
  EXPECT_EQ(t->Encode("hello world", false), (std::vector<uint32_t>{hello, world, *t->TokenToId("ld")}));
  EXPECT_EQ(t->Decode(t->Encode("hello world", false)), "hello world");
  // The heap path (more than 48 bytes) and the linear path agree: 'aaaa' pieces, one 'a' left.
  const uint32_t aaaa = *t->TokenToId("aaaa");
  std::vector<uint32_t> expect(25, aaaa);
  expect.push_back('a');
  EXPECT_EQ(t->Encode(std::string(101, 'a'), false), expect);
  EXPECT_EQ(t->Encode(std::string(9, 'a'), false), (std::vector<uint32_t>{aaaa, aaaa, 'a'}));
}

TEST(TokenizerTiny, PairMergesSpellingIsEquivalent) {
  auto a = Make(TinyTokenizer(false));
  auto b = Make(TinyTokenizer(true));
  ASSERT_TRUE(a && b);
  for (const auto& s : testing::Corpus()) EXPECT_EQ(a->Encode(s, false), b->Encode(s, false));
}

TEST(TokenizerTiny, AddedTokensAndTemplate) {
  auto t = Make(TinyTokenizer());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("hello", true).front(), 300u);
  EXPECT_EQ(t->Encode("hello", false).front(), *t->TokenToId("hello"));
  // <pad> strips the whitespace around it (lstrip/rstrip).
  const auto ids = t->Encode("hello  <pad>  hello<|bos|>", false);
  const uint32_t hello = *t->TokenToId("hello");
  EXPECT_EQ(ids, (std::vector<uint32_t>{hello, 301, hello, 300}));
  EXPECT_EQ(t->Decode(ids, /*skip_special_tokens=*/true), "hello<pad>hello");
  EXPECT_EQ(t->IdToToken(300), "<|bos|>");
  EXPECT_EQ(t->vocab_size(), 256u + 10u + 2u);
}

// ignore_merges (Llama 3): a vocabulary word is taken whole even where the merges would not
// reach it; without it, the merges decide.
TEST(TokenizerTiny, IgnoreMerges) {
  json j = TinyTokenizer();
  j["model"]["vocab"]["aaa"] = 290;  // no merge makes "aaa"
  auto merged = Make(j);
  j["model"]["ignore_merges"] = true;
  auto whole = Make(j);
  ASSERT_TRUE(merged && whole);
  EXPECT_EQ(merged->Encode("aaa", false), (std::vector<uint32_t>{*merged->TokenToId("aa"), 'a'}));
  EXPECT_EQ(whole->Encode("aaa", false), (std::vector<uint32_t>{290}));
  EXPECT_EQ(whole->Encode("aaaaa", false), (std::vector<uint32_t>{*whole->TokenToId("aaaa"), 'a'}));
}

// ByteLevel's add_prefix_space puts a space before every piece the added tokens leave, as
// Hugging Face does.
TEST(TokenizerTiny, AddPrefixSpace) {
  json j = TinyTokenizer();
  j["pre_tokenizer"]["add_prefix_space"] = true;
  auto t = Make(j);
  ASSERT_NE(t, nullptr);
  const uint32_t space = *t->TokenToId("\u0120");
  const uint32_t hello = *t->TokenToId("hello");
  EXPECT_EQ(t->Encode("hello", false), (std::vector<uint32_t>{space, hello}));
  EXPECT_EQ(t->Encode("<|bos|>hello", false), (std::vector<uint32_t>{300, space, hello}));
  EXPECT_EQ(t->Encode(" hello", false), (std::vector<uint32_t>{space, hello}));
}

TEST(TokenizerTiny, InvalidUtf8NeverCrashes) {
  auto t = Make(TinyTokenizer());
  ASSERT_NE(t, nullptr);
  const std::string junk = "ok \xff\xfe \xc3( \xe2\x82 \xf0\x9f\x98 end";
  const auto ids = t->Encode(junk, false);
  EXPECT_FALSE(ids.empty());
  EXPECT_EQ(t->Decode(ids), "ok \uFFFD\uFFFD \uFFFD( \uFFFD \uFFFD end");
}

json WithField(json j, const std::string& key, json value) {
  j[key] = std::move(value);
  return j;
}

std::string ErrorOf(const std::string& text) {
  auto t = Tokenizer::FromJson(text, "tokenizer.json");
  return t.ok() ? "ok" : std::string(t.status().message());
}

TEST(TokenizerErrors, NameTheField) {
  const json tiny = TinyTokenizer();
  EXPECT_EQ(ErrorOf(WithField(tiny, "pre_tokenizer", {{"type", "Metaspace"}}).dump()),
            "tokenizer.json: pre_tokenizer.type 'Metaspace' is not supported");
  EXPECT_EQ(ErrorOf(WithField(tiny, "normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Lowercase"}}}}})
                        .dump()),
            "tokenizer.json: normalizer.normalizers[1].type 'Lowercase' is not supported");
  json model = tiny["model"];
  model["type"] = "WordPiece";
  EXPECT_EQ(ErrorOf(WithField(tiny, "model", model).dump()), "tokenizer.json: model.type 'WordPiece' is not supported");
  model = tiny["model"];
  model["merges"].push_back("zz qq");
  EXPECT_EQ(ErrorOf(WithField(tiny, "model", model).dump()),
            "tokenizer.json: model.merges[10]: 'zz' is not in the vocabulary");
  EXPECT_EQ(ErrorOf(WithField(tiny, "decoder", {{"type", "Metaspace"}}).dump()),
            "tokenizer.json: decoder.type 'Metaspace' is not supported");
  EXPECT_EQ(ErrorOf(WithField(tiny, "post_processor", {{"type", "Sequence"}, {"processors", {{{"type", "Fancy"}}}}}).dump()),
            "tokenizer.json: post_processor.processors[0].type 'Fancy' is not supported");
  EXPECT_EQ(ErrorOf(WithField(tiny, "pre_tokenizer",
                              {{"type", "Sequence"},
                               {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}},
                                                  {{"type", "ByteLevel"}}}}})
                        .dump())
                .rfind("tokenizer.json: pre_tokenizer.pretokenizers[0].pattern.Regex: regex does not compile", 0),
            0u);
  EXPECT_EQ(ErrorOf(WithField(tiny, "pre_tokenizer", {{"type", "Whitespace"}}).dump()),
            "tokenizer.json: pre_tokenizer.type 'Whitespace' is not supported");
  EXPECT_EQ(ErrorOf(WithField(tiny, "pre_tokenizer", nullptr).dump()),
            "tokenizer.json: pre_tokenizer: no ByteLevel step; only byte-level BPE is supported");
  const std::string malformed = ErrorOf("{\"model\": {\"type\": \"BPE\",\n \"vocab\": }");
  EXPECT_NE(malformed.find("tokenizer.json: malformed JSON"), std::string::npos) << malformed;
  EXPECT_NE(malformed.find("line 2"), std::string::npos) << malformed;
  EXPECT_EQ(ErrorOf("[1, 2]"), "tokenizer.json: expected a JSON object");
}

TEST(TokenizerErrors, MissingFile) {
  auto t = Tokenizer::FromFile("/nonexistent/dir/tokenizer.json");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("/nonexistent/dir/tokenizer.json"), std::string::npos);
}

TEST(TokenizerErrors, ConfigWithoutBosToken) {
  const std::string path = (myriad::testing::TestTempDir() / "tok_cfg").string();
  std::filesystem::create_directories(path);
  std::ofstream(path + "/tokenizer.json") << TinyTokenizer().dump();
  std::ofstream(path + "/tokenizer_config.json") << R"({"tokenizer_class": "LlamaTokenizerFast", "bos_token": "<nope>"})";
  auto t = Tokenizer::FromFile(path);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), path + "/tokenizer_config.json: bos_token '<nope>' is not a token of the vocabulary");
  std::ofstream(path + "/tokenizer_config.json") << R"({"tokenizer_class": "LlamaTokenizerFast", "bos_token": {"content": "<|bos|>"}, "add_eos_token": false})";
  t = Tokenizer::FromFile(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->special_wrap().prefix, std::vector<uint32_t>{300});
  std::filesystem::remove_all(path);
}

TEST(TokenizerCli, PrintsIds) {
  const std::string path = myriad::testing::WriteTempFile("tiny_tokenizer.json", TinyTokenizer().dump());
  auto r = myriad::testing::RunMyriad("tokenize --tokenizer " + path + " 'hello world'");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "300 259 262 263\n");
  r = myriad::testing::RunMyriad("tokenize --tokenizer " + path + " --no-special --format json 'hello'");
  EXPECT_EQ(r.out, "[259]\n");
  r = myriad::testing::RunMyriad("tokenize --tokenizer /nonexistent.json x");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("/nonexistent.json: cannot open"), std::string::npos) << r.out;
}

// The spelled-out ASCII classes and the BMP table agree with ICU, and with the Unicode 16.0
// supplement where it lists a code point (ICU 72 knows Unicode 15.0's additions too: the two
// must agree on them).
TEST(TokenizerPatterns, CharacterClassesMatchIcu) {
  for (uint32_t cp = 0; cp < 0x10000; ++cp) {
    const uint8_t want = SupplementaryClass(cp) != 0 ? SupplementaryClass(cp) : ClassFromIcu(cp);
    ASSERT_EQ(ClassOf(cp), want) << "U+" << std::hex << cp;
  }
  for (const CodePointRange& r : SupplementaryRanges()) {
    for (uint32_t cp = r.first; cp <= r.last; ++cp) {
      ASSERT_EQ(ClassOf(cp), r.cls) << "U+" << std::hex << cp;
      if (ClassFromIcu(cp) != 0) {
        ASSERT_EQ(ClassFromIcu(cp), r.cls) << "U+" << std::hex << cp;
      }
    }
  }
  EXPECT_EQ(ClassOf(0x10D50), kLetter);      // Garay capital letter A (Unicode 16.0)
  EXPECT_EQ(ClassOf(0x2EBF0), kLetter);      // CJK extension I (15.1)
  EXPECT_EQ(ClassOf(0xA7CB), kLetter);       // Latin capital letter ram's horn (16.0), in the BMP
  EXPECT_EQ(ClassOf(0x10D40), kNumber);      // Garay digit zero (16.0)
  EXPECT_EQ(ClassOf(0x10D66), 0);            // still unassigned in 16.0
  EXPECT_EQ(ClassOf(0x1F600), kSymbol);      // emoji: So
  EXPECT_EQ(ClassOf(0x20000), kLetter);      // CJK extension B: Lo
  EXPECT_EQ(ClassOf(0x0085), kSpace);        // NEL is White_Space
  EXPECT_EQ(ClassOf(0xFEFF), 0);             // BOM is not (JavaScript's \s disagrees)
  EXPECT_EQ(ClassOf(0xFFFFFFFFu), 0);
}

// The hand-written matchers split exactly as PCRE2 running the original pattern.
TEST(TokenizerPatterns, BuiltinsAgreeWithPcre2) {
  const std::vector<std::string> patterns = {
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      R"(\p{N}{1,3})",
      "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
      "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
  };
  // The corpus, and random strings over characters that exercise every branch.
  std::vector<std::string> texts = testing::Corpus();
  const std::vector<std::string> alphabet = {"a", "Z", "'", "s", "L", "l", "e", " ", " ", "\t", "\r", "\n", "1", "7",
                                             "\u0661", "\u00bd", ".", ",", "!", "-", "_", "$", "\u4e2d", "\u3042",
                                             "\u30ab", "\u00e9", "\u0301", "\u00a0", "\u3000", "\U0001F600", "\u200d",
                                             "\x01", "\u0416", "\u00ab"};
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) s += alphabet[rng() % alphabet.size()];
    texts.push_back(s);
  }
  // Mostly words of ASCII letters after spaces (the fast path for " word"), ending at every
  // kind of character: ASCII punctuation and digits, line breaks, non-ASCII letters and marks.
  const std::vector<std::string> wordy = {"a", "b", "x", "Q", "z", "A", " ", " ", " ", " ", ".", "'", "1", "\n",
                                          "\u00e9", "\u0301", "\u4e2d", "\u00a0", "-", "\r"};
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 48);
    for (int k = 0; k < n; ++k) s += wordy[rng() % 3 == 0 ? rng() % wordy.size() : rng() % 10];
    texts.push_back(s);
  }
  // Letter runs of every length to 40 (the scans take 8 and 16 bytes at a time), each ended by
  // one of wordy's characters, by an ASCII character next to the letters' ranges, or by the
  // text's end.
  const std::vector<std::string> enders = {"@", "[", "`", "{", "\x7f", "\xc3\x80"};
  for (int i = 0; i < 1200; ++i) {
    std::string s = i % 2 == 0 ? " " : "";
    s.append(static_cast<size_t>(1 + i % 40), "aZqA"[i % 4]);
    if (i % 7 != 0) s += (i % 3 == 0 ? enders[rng() % enders.size()] : wordy[rng() % wordy.size()]) + "tail";
    texts.push_back(s);
  }
  for (size_t p = 0; p < patterns.size(); ++p) {
    auto fast = CompileRegex(patterns[p], "test", false);
    auto slow = CompileRegex(patterns[p], "test", true);
    ASSERT_TRUE(fast.ok() && slow.ok());
    ASSERT_EQ((*fast)->Kind().substr(0, 8), "builtin:") << p;
    ASSERT_EQ((*slow)->Kind(), "pcre2");
    for (const auto& s : texts) {
      size_t from_a = 0, from_b = 0, a0, a1, b0, b1;
      while (true) {
        const bool fa = (*fast)->Find(s, from_a, a0, a1);
        const bool fb = (*slow)->Find(s, from_b, b0, b1);
        ASSERT_EQ(fa, fb) << "pattern " << p << " on \"" << s << "\" from " << from_a;
        if (!fa) break;
        ASSERT_EQ(std::make_pair(a0, a1), std::make_pair(b0, b1)) << "pattern " << p << " on \"" << s << "\"";
        if (a1 == a0) break;  // builtins never match empty; PCRE2 would be caught by the ASSERT above
        from_a = from_b = a1;
      }
    }
  }
}

std::vector<std::string> SplitText(const SplitPattern& p, std::string_view s) {
  std::vector<Piece> pieces;
  p.SplitIsolated(s, 0, pieces);
  std::vector<std::string> out;
  for (const Piece& piece : pieces) out.emplace_back(s.substr(piece.offset, piece.len));
  return out;
}

// A letter added in Unicode 15.1 or 16.0 is a letter to every pattern, hand-written or run on
// PCRE2 (whose tables are Unicode 14.0), as to Hugging Face's: "X's" splits as "X" + "'s", not
// "X'" + "s". New digits are \p{N}: Qwen's one-digit pieces cut between them.
TEST(TokenizerPatterns, Unicode16LettersAndDigits) {
  const std::string qwen =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  const std::string cl100k =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  const std::string gpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  const std::string deepseek =
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
      "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
  using V = std::vector<std::string>;
  for (const bool pcre2 : {false, true}) {
    for (const std::string* pattern : {&qwen, &cl100k, &gpt2, &deepseek}) {
      auto p = CompileRegex(*pattern, "test", pcre2);
      ASSERT_TRUE(p.ok()) << p.status();
      SCOPED_TRACE(std::string((*p)->Kind()) + " " + pattern->substr(0, 20));
      EXPECT_EQ(SplitText(**p, "\U00010D50's"), (V{"\U00010D50", "'s"}));  // Garay A, 16.0
      EXPECT_EQ(SplitText(**p, "\U0002EBF0's"), (V{"\U0002EBF0", "'s"}));  // CJK ext. I, 15.1
      EXPECT_EQ(SplitText(**p, "\uA7CB's"), (V{"\uA7CB", "'s"}));          // ram's horn, 16.0
    }
    auto q = CompileRegex(qwen, "test", pcre2);
    auto c = CompileRegex(cl100k, "test", pcre2);
    ASSERT_TRUE(q.ok() && c.ok());
    const std::string digits = "\U00010D40\U00010D41";  // Garay digits zero and one
    EXPECT_EQ(SplitText(**q, digits), (V{"\U00010D40", "\U00010D41"}));
    EXPECT_EQ(SplitText(**c, digits), V{digits});
  }
  // The widening reads \pL and negations, keeps subcategories as they are, and a broken
  // pattern's error still names its offset as written.
  auto p = CompileRegex(R"(\pL+|\P{L}+)", "test");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(SplitText(**p, "a\U00010D50.1"), (V{"a\U00010D50", ".1"}));
  p = CompileRegex(R"(\p{Lu}+)", "test");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(SplitText(**p, "AB\U00010D50"), (V{"AB", "\U00010D50"}));
  p = CompileRegex(R"([\p{L}]+()", "pre_tokenizer.pattern");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("pre_tokenizer.pattern: regex does not compile at offset 9"), std::string::npos)
      << p.status();
}

// The first difference between two piece lists, if any (a whole list's dump would be too long).
void ExpectSamePieces(const std::vector<Piece>& got, const std::vector<Piece>& want) {
  ASSERT_EQ(got.size(), want.size());
  const auto [g, w] = std::mismatch(got.begin(), got.end(), want.begin());
  EXPECT_TRUE(g == got.end()) << "piece " << (g - got.begin()) << ": (" << g->offset << ", " << g->len << ") instead of ("
                              << w->offset << ", " << w->len << ")";
}

// SplitIsolatedSome's parts, whatever their size, are SplitIsolated's pieces; and
// PreTokenizer::Next's parts (DeepSeek-V3's three Isolated splits) are RunView's.
TEST(TokenizerPatterns, SplitInPartsAgreesWithWhole) {
  std::string text;
  for (const auto& s : testing::Corpus()) text += s;
  std::mt19937 rng(11);
  const std::vector<std::string> alphabet = {"ab", " the", "12345", "\u4e2d\u6587", " ", "\n", ".", "'s", "\u00e9t\u00e9"};
  while (text.size() < 40000) text += alphabet[rng() % alphabet.size()];
  for (const bool pcre2 : {false, true}) {
    auto pattern = CompileRegex(
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
        "test", pcre2);
    ASSERT_TRUE(pattern.ok());
    std::vector<Piece> whole;
    (*pattern)->SplitIsolated(text, 3, whole);
    ASSERT_GT(whole.size(), 2000u);
    for (const size_t limit : {size_t{1}, size_t{7}, size_t{512}}) {
      std::vector<Piece> parts, part;
      SplitPattern::SplitState state;
      bool done = false;
      while (!done) {
        part.clear();
        done = (*pattern)->SplitIsolatedSome(text, 3, state, part, limit);
        ASSERT_TRUE(done || part.size() >= limit);
        parts.insert(parts.end(), part.begin(), part.end());
      }
      SCOPED_TRACE(limit);
      ExpectSamePieces(parts, whole);
    }
  }
  const json deepseek = json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": false},
      {"type": "Split", "pattern": {"Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"}, "behavior": "Isolated", "invert": false},
      {"type": "Split", "pattern": {"Regex": " ?\\p{L}+|\\s+"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})");
  auto pre = ParsePreTokenizer(deepseek, "test");
  ASSERT_TRUE(pre.ok()) << pre.status();
  ASSERT_TRUE(pre->streams());
  ASSERT_FALSE(pre->appends());
  PreTokenizeScratch scratch;
  std::vector<Piece> whole(1, Piece{0, static_cast<uint32_t>(text.size())});
  pre->RunView(text, whole, scratch);
  std::vector<Piece> parts, part;
  PreTokenizer::Stream stream;
  while (pre->Next(text, stream, part, scratch)) parts.insert(parts.end(), part.begin(), part.end());
  ASSERT_GT(whole.size(), 2000u);
  ExpectSamePieces(parts, whole);
}

}  // namespace
}  // namespace myriad::tokenizer
