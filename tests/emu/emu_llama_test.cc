// `myriad emu --profile llama-server` through its HTTP API, as a router written against a real
// llama-server sees it: slots that each keep their last sequence, and llama-server's fields.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "emu/emu_server.h"
#include "net/http_client.h"
#include "policy/engine_cache_model.h"

namespace myriad::emu {
namespace {

using json = nlohmann::json;

std::unique_ptr<EmuServer> StartLlama() {
  EmuOptions o;
  o.engine.slots = SlotProfile{};  // 2 slots, similarity 0.1, 4096 tokens each
  o.engine.max_batched_tokens = 2048;
  o.engine.speed = 20;  // a 400-token prompt's 300 emulated ms take 15 real ones
  auto s = EmuServer::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Start().ok());
  return *std::move(s);
}

// 400 stand-in tokens (one per word); distinct seeds differ from the first token on.
std::string Prompt(int seed) {
  std::string p;
  for (int i = 0; i < 400; ++i) p += " w" + std::to_string(seed) + "_" + std::to_string(i);
  return p;
}

json Complete(net::HttpClient& c, const std::string& prompt) {
  auto res = c.Post("/v1/completions", json({{"prompt", prompt}, {"max_tokens", 3}}).dump());
  EXPECT_TRUE(res.ok()) << res.status();
  if (!res.ok()) return json();
  EXPECT_EQ(res->status, 200) << res->body;
  return json::parse(res->body);
}

TEST(EmuLlamaTest, SlotsKeepTheLastPromptsAndTheLeastRecentlyUsedIsEvicted) {
  auto emu = StartLlama();
  net::HttpClient c(net::HostPort{"127.0.0.1", emu->port()});
  const json a = Complete(c, Prompt(1));
  EXPECT_EQ(a["usage"]["prompt_tokens"], 400);
  EXPECT_EQ(a["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(a["timings"]["cache_n"], 0);
  EXPECT_EQ(a["timings"]["prompt_n"], 400);
  Complete(c, Prompt(2));  // fills the second slot

  auto slots = c.Get("/slots");
  ASSERT_TRUE(slots.ok());
  const json s = json::parse(slots->body);
  ASSERT_EQ(s.size(), 2u) << s;
  for (const json& slot : s) {
    EXPECT_EQ(slot["n_ctx"], 4096);
    EXPECT_EQ(slot["is_processing"], false);
    EXPECT_EQ(slot["n_prompt_tokens"], 403) << "the prompt and its 3 output tokens: " << s;
    EXPECT_EQ(slot["params"]["n_predict"], 3) << s;
    EXPECT_EQ(slot["next_token"][0]["n_remain"], 0) << "3 of 3 decoded: " << s;
    EXPECT_FALSE(slot.contains("prompt")) << "llama-server shows the text only under LLAMA_SERVER_SLOTS_DEBUG";
  }

  // A repeat of the second prompt finds its slot: all but the last token are cached.
  const json b2 = Complete(c, Prompt(2));
  EXPECT_EQ(b2["usage"]["prompt_tokens_details"]["cached_tokens"], 399);
  EXPECT_EQ(b2["timings"]["cache_n"], 399);
  EXPECT_EQ(b2["timings"]["prompt_n"], 1);
  EXPECT_LT(b2["timings"]["prompt_ms"].get<double>() * 10, a["timings"]["prompt_ms"].get<double>())
      << "a cached prompt is much faster: " << b2["timings"] << " vs " << a["timings"];

  // A third prompt overwrites the least recently used slot, the first prompt's...
  Complete(c, Prompt(3));
  EXPECT_EQ(Complete(c, Prompt(1))["usage"]["prompt_tokens_details"]["cached_tokens"], 0) << "evicted";
  // ... and that repeat took the slot released longest ago, the second prompt's (its repeat
  // ended before the third prompt's); the third prompt's slot was left alone.
  EXPECT_EQ(Complete(c, Prompt(3))["usage"]["prompt_tokens_details"]["cached_tokens"], 399);
  EXPECT_EQ(Complete(c, Prompt(2))["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST(EmuLlamaTest, PropsHealthAndNativeCompletionUseLlamaServersFields) {
  auto emu = StartLlama();
  net::HttpClient c(net::HostPort{"127.0.0.1", emu->port()});
  auto props = c.Get("/props");
  ASSERT_TRUE(props.ok());
  const json p = json::parse(props->body);
  EXPECT_EQ(p["total_slots"], 2);
  EXPECT_EQ(p["default_generation_settings"]["n_ctx"], 4096);
  auto health = c.Get("/health");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(json::parse(health->body), json({{"status", "ok"}}));

  auto native = c.Post("/completion", json({{"prompt", Prompt(4)}, {"n_predict", 2}}).dump());
  ASSERT_TRUE(native.ok());
  ASSERT_EQ(native->status, 200) << native->body;
  const json n = json::parse(native->body);
  EXPECT_EQ(n["tokens_predicted"], 2);
  EXPECT_EQ(n["tokens_evaluated"], 400);
  EXPECT_EQ(n["stop"], true);
  EXPECT_TRUE(n["id_slot"].is_number_integer());
  for (const char* k : {"cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n",
                        "predicted_ms", "predicted_per_token_ms", "predicted_per_second"}) {
    EXPECT_TRUE(n["timings"].contains(k)) << k << " missing in " << n["timings"];
  }
  auto bad = c.Post("/completion", json({{"prompt", "x"}, {"n_predict", "two"}}).dump());
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("n_predict"), std::string::npos) << bad->body;

  auto chat = c.Post("/v1/chat/completions",
                     json({{"messages", {{{"role", "user"}, {"content", Prompt(5)}}}}, {"max_tokens", 2}}).dump());
  ASSERT_TRUE(chat.ok());
  const json ch = json::parse(chat->body);
  EXPECT_EQ(ch["object"], "chat.completion");
  EXPECT_TRUE(ch["timings"].contains("cache_n")) << ch;
  EXPECT_TRUE(ch["usage"]["prompt_tokens_details"].contains("cached_tokens")) << ch;

  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("llamacpp:requests_processing"), std::string::npos) << metrics->body;
  EXPECT_EQ(metrics->body.find("vllm:"), std::string::npos) << "llama-server has no vllm: metrics";
}

// Reads from `fd` until `marker` has arrived; returns when, or nullopt at the end of the stream.
std::optional<std::chrono::steady_clock::time_point> ReadUntil(int fd, std::string* got, std::string_view marker) {
  char buf[4096];
  while (got->find(marker) == std::string::npos) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return std::nullopt;
    got->append(buf, static_cast<size_t>(n));
  }
  return std::chrono::steady_clock::now();
}

TEST(EmuLlamaTest, StreamHeadersComeBeforeThePromptIsProcessed) {
  EmuOptions o;
  o.engine.slots = SlotProfile{};
  o.engine.max_batched_tokens = 2048;
  o.engine.speed = 1;  // the 2,000-token prompt takes its 1.5 s for real
  auto emu = EmuServer::Create(o);
  ASSERT_TRUE(emu.ok()) << emu.status();
  ASSERT_TRUE((*emu)->Start().ok());
  std::string prompt;
  for (int i = 0; i < 2000; ++i) prompt += " t" + std::to_string(i);
  const std::string body = json({{"prompt", prompt}, {"max_tokens", 1}, {"stream", true}}).dump();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons((*emu)->port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::string got;
  const auto headers = ReadUntil(fd, &got, "\r\n\r\n");
  const auto first = ReadUntil(fd, &got, "data: ");
  ::close(fd);
  ASSERT_TRUE(headers && first) << got;
  EXPECT_NE(got.find("200"), std::string::npos) << got;
  EXPECT_NE(got.find("text/event-stream"), std::string::npos) << got;
  const double header_s = std::chrono::duration<double>(*headers - sent).count();
  const double first_s = std::chrono::duration<double>(*first - sent).count();
  EXPECT_GT(first_s, 1.2) << "the prompt's prefill is 1.5 s";
  EXPECT_LT(header_s, first_s - 0.8) << "the headers waited for the prefill";
}

TEST(EmuLlamaTest, RefusesPdTransfers) {
  auto emu = StartLlama();
  net::HttpClient c(net::HostPort{"127.0.0.1", emu->port()});
  const json req = {{"prompt", Prompt(6)},
                    {"max_tokens", 1},
                    {"kv_transfer_params",
                     {{"do_remote_decode", true}, {"do_remote_prefill", false}, {"remote_engine_id", nullptr},
                      {"remote_block_ids", nullptr}, {"remote_host", nullptr}, {"remote_port", nullptr}}}};
  auto res = c.Post("/v1/completions", req.dump());
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->status, 400) << res->body;
  EXPECT_NE(res->body.find("kv_transfer_params"), std::string::npos) << res->body;
}

TEST(EmuLlamaTest, PublishesNoKvEvents) {
  EmuOptions o;
  o.engine.slots = SlotProfile{};
  o.kv_events = "tcp://127.0.0.1:*";
  auto s = EmuServer::Create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("KV events"), std::string::npos) << s.status();
}

// One slot rule (policy/slot_cache.h): the emulator over token ids and the gateway's model of it
// over block keys (policy::EngineCacheModel) choose the same slot, request after request: new
// prompts, continuations, a partial share above and one below the similarity, a repeat. Each
// prompt is a run of 16-word segments, one stand-in token per word, so a segment is one block.
TEST(EmuLlamaTest, GatewaysModelPicksTheEmulatorsSlot) {
  EmuOptions o;
  o.engine.slots = SlotProfile{};
  o.engine.slots->slots = 3;  // llama-server's default similarity, 0.1
  o.engine.max_batched_tokens = 2048;
  o.engine.speed = 20;
  auto s = EmuServer::Create(o);
  ASSERT_TRUE(s.ok()) << s.status();
  std::unique_ptr<EmuServer> emu = *std::move(s);
  ASSERT_TRUE(emu->Start().ok());
  net::HttpClient c(net::HostPort{"127.0.0.1", emu->port()});

  policy::PrefixIndex index(policy::PrefixIndexOptions{});
  policy::EngineCacheModel model(&index);  // the same default
  model.SetCapacity(0, {.kind = policy::EngineCacheKind::kSlots, .slots = 3, .tokens = 4096});

  const std::vector<std::vector<int>> prompts = {
      {1, 2, 3, 4},          {10, 11, 12, 13}, {1, 2, 3, 4, 5, 6},     {20, 21, 22, 23},
      {10, 11, 30, 31, 32},  // 2 of 5 (40%) shared with the second prompt: its slot
      {40, 41, 42, 43},      {1, 2, 3, 4, 5, 6, 7},
      {20, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69},  // 1 of 11 (9%): below the similarity
      {50},                  {40, 41, 42, 43},       {10, 11, 30, 31, 32, 33}, {70, 71}};
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::string text;
    std::vector<BlockKey> blocks;
    BlockKey parent = kRootBlockKey;
    for (int seg : prompts[i]) {
      for (int w = 0; w < 16; ++w) text += " s" + std::to_string(seg) + "_" + std::to_string(w);
      blocks.push_back(parent = HashContentBlock(parent, static_cast<BlockKey>(seg)));
    }
    auto res = c.Post("/completion", json({{"prompt", text}, {"n_predict", 2}}).dump());
    ASSERT_TRUE(res.ok()) << res.status();
    ASSERT_EQ(res->status, 200) << res->body;
    const json n = json::parse(res->body);
    ASSERT_EQ(n["tokens_evaluated"], static_cast<int>(16 * prompts[i].size())) << "one token per word";
    EXPECT_EQ(model.Served(0, blocks, 16), n["id_slot"].get<int>()) << "request " << i;
  }
  emu->Stop();
}

}  // namespace
}  // namespace myriad::emu
