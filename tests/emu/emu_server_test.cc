// The engine emulator through its HTTP API, as a gateway or a person with curl sees it.
#include "emu/emu_server.h"

#include <gtest/gtest.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "net/http_client.h"

namespace myriad::emu {
namespace {

using json = nlohmann::json;

std::unique_ptr<EmuServer> StartEmu(EmuOptions o = {}) {
  o.engine.speed = 50;  // fifty emulated seconds a second: the tests take milliseconds
  auto s = EmuServer::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Start().ok());
  return *std::move(s);
}

std::string LongPrompt(int words, int seed = 0) {
  std::string p;
  for (int i = 0; i < words; ++i) p += " w" + std::to_string((i * 7 + seed) % 1000);
  return p;
}

TEST(EmuServerTest, CompletionCountsCachedPromptTokensOnRepeat) {
  auto emu = StartEmu();
  net::HttpClient c(net::HostPort{"127.0.0.1", emu->port()});
  const std::string body =
      json({{"model", "emu-model"}, {"prompt", LongPrompt(200)}, {"max_tokens", 4}}).dump();
  auto first = c.Post("/v1/completions", body);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->status, 200) << first->body;
  json a = json::parse(first->body);
  EXPECT_EQ(a["object"], "text_completion");
  EXPECT_EQ(a["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(a["usage"]["completion_tokens"], 4);
  EXPECT_EQ(a["usage"]["prompt_tokens"], 200);
  EXPECT_EQ(a["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  auto second = c.Post("/v1/completions", body);
  ASSERT_TRUE(second.ok());
  json b = json::parse(second->body);
  EXPECT_EQ(b["usage"]["prompt_tokens_details"]["cached_tokens"], 192);  // 12 full blocks of 16
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("vllm:prefix_cache_hits_total{model_name=\"emu-model\",engine=\"0\"} 192"),
            std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("vllm:time_to_first_token_seconds_bucket{model_name=\"emu-model\",engine=\"0\",le=\"+Inf\"} 2"),
            std::string::npos);
}

TEST(EmuServerTest, CacheEventsDescribeStoredAndEvictedBlocks) {
  EmuOptions o;
  o.engine.kv_blocks = 34;  // room for two prompts of 13 cached blocks, not for a third
  auto emu = StartEmu(o);
  std::mutex mu;
  std::vector<CacheEvent> events;
  emu->engine().set_event_sink([&](std::vector<CacheEvent> batch) {
    std::lock_guard l(mu);
    for (auto& e : batch) events.push_back(std::move(e));
  });
  net::HttpClient c(net::HostPort{"127.0.0.1", emu->port()});
  for (int seed : {1, 2, 3}) {
    auto r = c.Post("/v1/completions",
                    json({{"prompt", LongPrompt(208, seed)}, {"max_tokens", 2}}).dump());
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200) << r->body;
  }
  std::lock_guard l(mu);
  int stored_blocks = 0, removed_blocks = 0;
  for (const auto& e : events) {
    if (e.kind == CacheEvent::Kind::kStored) {
      stored_blocks += static_cast<int>(e.hashes.size());
      EXPECT_EQ(e.tokens.size(), e.hashes.size() * 16);
      EXPECT_FALSE(e.parent.has_value());  // each prompt's chain starts at the root
    }
    if (e.kind == CacheEvent::Kind::kRemoved) removed_blocks += static_cast<int>(e.hashes.size());
  }
  EXPECT_EQ(stored_blocks, 3 * 13);
  EXPECT_GT(removed_blocks, 0);  // the third prompt needed the first one's blocks
}

TEST(EmuServerTest, ChatStreamsRoleThenContentThenUsageThenDone) {
  auto emu = StartEmu();
  net::HttpClient c(net::HostPort{"127.0.0.1", emu->port()});
  auto r = c.Post("/v1/chat/completions",
                  json({{"model", "emu-model"},
                        {"messages", {{{"role", "user"}, {"content", "hello"}}}},
                        {"max_tokens", 3},
                        {"stream", true},
                        {"stream_options", {{"include_usage", true}}}})
                      .dump());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->content_type, "text/event-stream");
  std::vector<json> chunks;
  size_t pos = 0;
  while (true) {
    const size_t end = r->body.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string line = r->body.substr(pos, end - pos);
    ASSERT_EQ(line.rfind("data: ", 0), 0u) << line;
    if (line == "data: [DONE]") break;
    chunks.push_back(json::parse(line.substr(6)));
    pos = end + 2;
  }
  ASSERT_EQ(chunks.size(), 6u);  // role, 3 tokens, finish, usage
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(chunks[4]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(chunks[5]["usage"]["completion_tokens"], 3);
  EXPECT_TRUE(r->body.ends_with("data: [DONE]\n\n"));
}

TEST(EmuServerTest, PrefillAndDecodeFollowVllmsKvTransferProtocol) {
  auto prefill = StartEmu();
  auto decode = StartEmu();
  net::HttpClient p(net::HostPort{"127.0.0.1", prefill->port()});
  net::HttpClient d(net::HostPort{"127.0.0.1", decode->port()});
  json req = {{"prompt", LongPrompt(100)}, {"max_tokens", 1}, {"stream", false},
              {"kv_transfer_params",
               {{"do_remote_decode", true}, {"do_remote_prefill", false},
                {"remote_engine_id", nullptr}, {"remote_block_ids", nullptr},
                {"remote_host", nullptr}, {"remote_port", nullptr}}}};
  auto pr = p.Post("/v1/completions", req.dump());
  ASSERT_TRUE(pr.ok());
  json kv = json::parse(pr->body)["kv_transfer_params"];
  ASSERT_TRUE(kv.is_object()) << pr->body;
  EXPECT_EQ(kv["do_remote_prefill"], true);
  EXPECT_EQ(kv["remote_port"], prefill->port());
  EXPECT_EQ(kv["remote_block_ids"].size(), 7u);
  req["kv_transfer_params"] = kv;
  req["max_tokens"] = 5;
  auto dr = d.Post("/v1/completions", req.dump());
  ASSERT_TRUE(dr.ok());
  json out = json::parse(dr->body);
  EXPECT_EQ(out["usage"]["completion_tokens"], 5);
  EXPECT_EQ(out["usage"]["prompt_tokens_details"]["cached_tokens"], 100);  // nothing recomputed
  EXPECT_EQ(decode->engine().stats().prompt_tokens, 0u);
}

TEST(EmuServerTest, FaultsOnCommand) {
  auto emu = StartEmu();
  net::HttpClient c(net::HostPort{"127.0.0.1", emu->port()});
  const std::string body = json({{"prompt", "a b c"}, {"max_tokens", 20}, {"stream", true}}).dump();
  ASSERT_EQ(c.Post("/admin/fault", R"({"kind":"error","status":503})")->status, 200);
  EXPECT_EQ(c.Post("/v1/completions", body)->status, 503);
  ASSERT_EQ(c.Post("/admin/fault", R"({"kind":"drop_stream","after_tokens":2})")->status, 200);
  auto cut = c.Post("/v1/completions", body);
  // The stream is cut without its last chunk: the client sees a broken response.
  EXPECT_TRUE(!cut.ok() || cut->body.find("[DONE]") == std::string::npos);
  ASSERT_EQ(c.Post("/admin/fault", R"({"kind":"none"})")->status, 200);
  auto fine = c.Post("/v1/completions", body);
  ASSERT_TRUE(fine.ok());
  EXPECT_NE(fine->body.find("[DONE]"), std::string::npos);
  EXPECT_EQ(c.Post("/admin/fault", R"({"kind":"melt"})")->status, 400);
  // Hung: health checks get no answer at all.
  ASSERT_EQ(c.Post("/admin/fault", R"({"kind":"hang"})")->status, 200);
  net::HttpClient h(net::HostPort{"127.0.0.1", emu->port()}, {.timeout = 200 * kMillisecond});
  EXPECT_EQ(h.Get("/health").status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_EQ(c.Post("/admin/fault", R"({"kind":"none"})")->status, 200);
  net::HttpClient h2(net::HostPort{"127.0.0.1", emu->port()});
  EXPECT_EQ(h2.Get("/health")->status, 200);
}

// Faults for the controller's proof (issue 21): a slow DP rank (a straggler inside one engine)
// and silent corruption (right status and token counts, wrong text).
TEST(EmuServerTest, SlowRankAndWrongAnswerFaults) {
  EmuOptions o;
  o.dp_ranks = 3;
  auto emu = StartEmu(o);
  net::HttpClient c(net::HostPort{"127.0.0.1", emu->port()});
  ASSERT_EQ(c.Post("/admin/fault", R"({"kind":"slow","factor":4,"rank":1})")->status, 200);
  EXPECT_EQ(emu->engine(0).slowdown(), 1.0);
  EXPECT_EQ(emu->engine(1).slowdown(), 4.0);
  EXPECT_EQ(emu->engine(2).slowdown(), 1.0);
  EXPECT_EQ(c.Post("/admin/fault", R"({"kind":"slow","rank":3})")->status, 400);
  EXPECT_EQ(c.Post("/admin/fault", R"({"kind":"slow","rank":"one"})")->status, 400);
  EXPECT_EQ(c.Post("/admin/fault", R"({"kind":"slow","factor":"x"})")->status, 400);
  ASSERT_EQ(c.Post("/admin/fault", R"({"kind":"slow","factor":2})")->status, 200);
  EXPECT_EQ(emu->engine(0).slowdown(), 2.0);
  EXPECT_EQ(emu->engine(2).slowdown(), 2.0);

  const std::string body = json({{"prompt", "the known answer"}, {"max_tokens", 8}, {"temperature", 0}}).dump();
  ASSERT_EQ(c.Post("/admin/fault", R"({"kind":"none"})")->status, 200);
  auto right = c.Post("/v1/completions", body);
  ASSERT_TRUE(right.ok());
  ASSERT_EQ(c.Post("/admin/fault", R"({"kind":"wrong_answer"})")->status, 200);
  auto wrong = c.Post("/v1/completions", body);
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong->status, 200);
  const json a = json::parse(right->body), b = json::parse(wrong->body);
  EXPECT_NE(a["choices"][0]["text"], b["choices"][0]["text"]);
  EXPECT_EQ(a["usage"]["completion_tokens"], b["usage"]["completion_tokens"]);
  ASSERT_EQ(c.Post("/admin/fault", R"({"kind":"none"})")->status, 200);
  auto again = c.Post("/v1/completions", body);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(json::parse(again->body)["choices"][0]["text"], a["choices"][0]["text"]);
}

// DP ranks are replicas of one model: at temperature 0 each answers a prompt alike, whichever
// rank the request lands on (the known-answer probe does not pick a rank).
TEST(EmuServerTest, EveryDpRankGivesTheSameAnswer) {
  EmuOptions o;
  o.dp_ranks = 4;
  auto emu = StartEmu(o);
  net::HttpClient c(net::HostPort{"127.0.0.1", emu->port()});
  const std::string body = json({{"prompt", "The capital of France is"}, {"max_tokens", 8}, {"temperature", 0}}).dump();
  std::vector<std::string> answers;
  for (int rank = 0; rank < 4; ++rank) {
    auto r = c.Request("POST", "/v1/completions", body, {}, {{"X-data-parallel-rank", std::to_string(rank)}});
    ASSERT_TRUE(r.ok() && r->status == 200) << rank;
    answers.push_back(json::parse(r->body)["choices"][0]["text"].get<std::string>());
  }
  EXPECT_EQ(answers, std::vector<std::string>(4, answers[0]));
}

TEST(EmuServerTest, BadRequestsGetOpenAiErrors) {
  auto emu = StartEmu();
  net::HttpClient c(net::HostPort{"127.0.0.1", emu->port()});
  struct Case {
    std::string body;
    int status;
    std::string param;
  };
  for (const Case& k : std::vector<Case>{
           {"not json", 400, ""},
           {R"({"max_tokens": 3})", 400, "prompt"},
           {R"({"prompt": "x", "max_tokens": 0})", 400, "max_tokens"},
           {R"({"prompt": {"a": 1}})", 400, "prompt"},
           {R"({"prompt": "x", "model": "other"})", 404, "model"},
       }) {
    auto r = c.Post("/v1/completions", k.body);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, k.status) << k.body;
    json e = json::parse(r->body);
    ASSERT_TRUE(e.contains("error")) << r->body;
    if (!k.param.empty()) {
      EXPECT_EQ(e["error"]["param"], k.param) << r->body;
    }
  }
  auto t = c.Post("/tokenize", R"({"prompt": "one two three"})");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(json::parse(t->body)["count"], 3);
}

// The emulator reads requests with the gateway's parser (net/openai_request.h), so it refuses
// a body with the gateway's words. Before, it had rules of its own: a non-boolean "stream" or
// do_remote_decode threw inside the handler (500), stream_options without stream, a numeric
// model, n > 1 and a non-text content were served, batched prompts got a vaguer message.
TEST(EmuServerTest, BadRequestsGetTheSharedParsersAnswers) {
  auto emu = StartEmu();
  net::HttpClient c(net::HostPort{"127.0.0.1", emu->port()});
  struct Case {
    std::string path, body, message, param;
  };
  const std::string kCompletions = "/v1/completions";
  for (const Case& k : std::vector<Case>{
           {kCompletions, "{not json", "the body is not valid JSON", ""},
           {kCompletions, R"({"prompt":"x","stream_options":{"include_usage":true}})",
            "Stream options can only be defined when `stream=True`.", "stream_options"},
           {kCompletions, R"({"prompt":"x","max_tokens":-1})", "'max_tokens' must be an integer in [1, 16777216]",
            "max_tokens"},
           {kCompletions, R"({"model":7,"prompt":"x"})", "'model' must be a non-empty string", "model"},
           {kCompletions, R"({"prompt":"x","stream":"yes"})", "'stream' must be a boolean", "stream"},
           {kCompletions, R"({"prompt":"x","n":2})",
            "'n' = 2 is not supported: this server makes at most 1 choice(s) per request", "n"},
           {kCompletions, R"({"prompt":["a","b"]})",
            "batched prompts (several in one 'prompt') are not supported: send one request per prompt", "prompt"},
           {kCompletions, R"({"prompt":"x","kv_transfer_params":{"do_remote_decode":"yes"}})",
            "'kv_transfer_params.do_remote_decode' must be a boolean", "kv_transfer_params"},
           {"/v1/chat/completions", R"({"messages":[{"role":"user","content":3}]})",
            "messages[0].content must be a string or an array of parts", "messages"},
       }) {
    auto r = c.Post(k.path, k.body);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 400) << k.body << " -> " << r->body;
    json want = {{"error", {{"message", k.message}, {"type", "invalid_request_error"}}}};
    if (!k.param.empty()) want["error"]["param"] = k.param;
    EXPECT_EQ(json::parse(r->body, nullptr, false), want) << k.body << " -> " << r->body;
  }
  EXPECT_EQ(emu->completions(), 0u);
}

// Good requests in the forms the emulator did not take before still stream: one prompt of
// token ids inside an array, and an empty stream_options, which (as vLLM) asks for usage.
TEST(EmuServerTest, CompletionStreamsWithUsageForEmptyStreamOptions) {
  auto emu = StartEmu();
  net::HttpClient c(net::HostPort{"127.0.0.1", emu->port()});
  auto r = c.Post("/v1/completions", json({{"prompt", {{11, 12, 13, 14}}},
                                           {"max_tokens", 2},
                                           {"stream", true},
                                           {"stream_options", json::object()}})
                                         .dump());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->content_type, "text/event-stream");
  const size_t usage = r->body.find(R"("usage":{"completion_tokens":2,)");
  ASSERT_NE(usage, std::string::npos) << r->body;
  EXPECT_NE(r->body.find(R"("prompt_tokens":4)", usage), std::string::npos) << r->body;
  EXPECT_TRUE(r->body.ends_with("data: [DONE]\n\n"));
}

TEST(EmuServerTest, ContextLongerThanTheKvCacheIs400NotAStuckEngine) {
  EmuOptions o;
  o.engine.kv_blocks = 8;  // 128 tokens of KV: max_model_len (131072) cannot be honoured
  auto emu = StartEmu(o);
  net::HttpClient c(net::HostPort{"127.0.0.1", emu->port()});
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models.ok());
  EXPECT_EQ(json::parse(models->body)["data"][0]["max_model_len"], 128) << models->body;
  auto big = c.Post("/v1/completions", json({{"prompt", LongPrompt(120)}, {"max_tokens", 16}}).dump());
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->status, 400) << big->body;
  EXPECT_NE(big->body.find("maximum context length is 128 tokens"), std::string::npos) << big->body;
  // One that fits is still served: the engine was not left holding the refused one.
  auto small = c.Post("/v1/completions", json({{"prompt", LongPrompt(100)}, {"max_tokens", 8}}).dump());
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->status, 200) << small->body;
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("vllm:num_preemptions_total{model_name=\"emu-model\",engine=\"0\"} 0"),
            std::string::npos) << metrics->body;
}

}  // namespace
}  // namespace myriad::emu
