// The one OpenAI request parser the gateway and the emulator share: what it accepts, what it
// refuses, and that every refusal names the field.
#include "net/openai_request.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace myriad::net {
namespace {

using json = nlohmann::json;

struct Parsed {
  bool ok = false;
  GenerateRequest req;
  RequestError error;
};

Parsed Parse(const std::string& body, bool chat = false, ParseOptions options = {}) {
  Parsed p;
  p.ok = ParseGenerateRequest(body, chat, &p.req, &p.error, options);
  return p;
}

// The field the refusal names, or "accepted".
std::string Refused(const std::string& body, bool chat = false, ParseOptions options = {}) {
  Parsed p = Parse(body, chat, options);
  if (p.ok) return "accepted";
  EXPECT_EQ(p.error.status, 400) << body;
  EXPECT_FALSE(p.error.message.empty()) << body;
  return p.error.param.empty() ? "(body)" : p.error.param;
}

TEST(OpenAiRequestTest, CompletionDefaultsAndPromptForms) {
  Parsed p = Parse(R"({"model":"m","prompt":"hello there"})");
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.req.model, "m");
  EXPECT_EQ(p.req.text, "hello there");
  EXPECT_EQ(p.req.max_tokens, 16);
  EXPECT_FALSE(p.req.stream);
  EXPECT_EQ(p.req.n, 1);
  EXPECT_EQ(Parse(R"({"model":"m","prompt":["one"]})").req.text, "one");
  EXPECT_EQ(Parse(R"({"model":"m","prompt":[1,2,4294967295]})").req.token_ids,
            (std::vector<uint32_t>{1, 2, 4294967295u}));
  // One prompt of ids in an array, as vLLM's list[list[int]] with one entry.
  EXPECT_EQ(Parse(R"({"model":"m","prompt":[[7,8]]})").req.token_ids, (std::vector<uint32_t>{7, 8}));
  EXPECT_EQ(Parse(R"({"model":"m","prompt":"x"})", false, {.default_max_tokens = 5}).req.max_tokens, 5);
}

TEST(OpenAiRequestTest, RefusesBadPromptsNamingThePrompt) {
  for (const char* body : {R"({"model":"m"})", R"({"model":"m","prompt":null})", R"({"model":"m","prompt":""})",
                           R"({"model":"m","prompt":[]})", R"({"model":"m","prompt":{"a":1}})",
                           R"({"model":"m","prompt":[1,-2]})", R"({"model":"m","prompt":[1,4294967296]})",
                           R"({"model":"m","prompt":[1.5]})", R"({"model":"m","prompt":[1,"a"]})"}) {
    EXPECT_EQ(Refused(body), "prompt") << body;
  }
  Parsed batched = Parse(R"({"model":"m","prompt":["a","b"]})");
  EXPECT_FALSE(batched.ok);
  EXPECT_NE(batched.error.message.find("batched prompts"), std::string::npos) << batched.error.message;
  EXPECT_EQ(Refused(R"({"model":"m","prompt":[[1],[2]]})"), "prompt");
}

TEST(OpenAiRequestTest, ChatMessagesKeepTextPartsAndSkipOthers) {
  Parsed p = Parse(
      R"({"model":"m","messages":[{"role":"system","content":"be brief"},
          {"role":"user","content":[{"type":"text","text":"a "},{"type":"image_url","image_url":{"url":"x"}},
                                    {"text":"b"}]},
          {"role":"assistant","content":null,"tool_calls":[]}]})",
      true);
  ASSERT_TRUE(p.ok) << p.error.message;
  ASSERT_EQ(p.req.messages.size(), 3u);
  EXPECT_EQ(p.req.messages[1].role, "user");
  EXPECT_EQ(p.req.messages[1].content, "a b");
  EXPECT_EQ(p.req.messages[2].content, "");
  EXPECT_EQ(p.req.text, "system\nbe brief\nuser\na b\nassistant\n\n");
  for (const char* body :
       {R"({"model":"m"})", R"({"model":"m","messages":[]})", R"({"model":"m","messages":["hi"]})",
        R"({"model":"m","messages":[{"content":"x"}]})", R"({"model":"m","messages":[{"role":"user","content":3}]})",
        R"({"model":"m","messages":[{"role":"user","content":["x"]}]})",
        R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":3}]}]})",
        R"({"model":"m","messages":[{"role":"user","content":[{"type":1}]}]})"}) {
    EXPECT_EQ(Refused(body, true), "messages") << body;
  }
}

TEST(OpenAiRequestTest, ModelIsRequiredWhereTheCallerRoutesByIt) {
  EXPECT_EQ(Refused(R"({"prompt":"x"})"), "model");
  Parsed anon = Parse(R"({"prompt":"x"})", false, {.require_model = false});
  ASSERT_TRUE(anon.ok);
  EXPECT_EQ(anon.req.model, "");
  // A model that is not a string is wrong whoever parses.
  for (bool require : {true, false}) {
    EXPECT_EQ(Refused(R"({"model":7,"prompt":"x"})", false, {.require_model = require}), "model");
    EXPECT_EQ(Refused(R"({"model":"","prompt":"x"})", false, {.require_model = require}), "model");
  }
}

TEST(OpenAiRequestTest, StreamAndStreamOptionsFollowVllm) {
  EXPECT_EQ(Refused(R"({"model":"m","prompt":"x","stream":"yes"})"), "stream");
  EXPECT_EQ(Refused(R"({"model":"m","prompt":"x","stream_options":{"include_usage":true}})"), "stream_options");
  EXPECT_EQ(Refused(R"({"model":"m","prompt":"x","stream":false,"stream_options":{"include_usage":false}})"),
            "stream_options");
  EXPECT_EQ(Refused(R"({"model":"m","prompt":"x","stream":true,"stream_options":[]})"), "stream_options");
  EXPECT_EQ(Refused(R"({"model":"m","prompt":"x","stream":true,"stream_options":{"include_usage":"x"}})"),
            "stream_options");
  // An empty object passes without a stream, as in vLLM (its check is on truthiness).
  EXPECT_EQ(Refused(R"({"model":"m","prompt":"x","stream_options":{}})"), "accepted");
  // vLLM's StreamOptions.include_usage defaults to true.
  EXPECT_TRUE(Parse(R"({"model":"m","prompt":"x","stream":true,"stream_options":{}})").req.include_usage);
  EXPECT_FALSE(
      Parse(R"({"model":"m","prompt":"x","stream":true,"stream_options":{"include_usage":false}})").req.include_usage);
  EXPECT_FALSE(Parse(R"({"model":"m","prompt":"x","stream":true})").req.include_usage);
}

TEST(OpenAiRequestTest, TokenBudgetsAreBoundedIntegers) {
  for (const char* v : {"0", "-1", "1.5", "\"10\"", "true", "16777217", "18446744073709551615"}) {
    const std::string body = std::string(R"({"model":"m","prompt":"x","max_tokens":)") + v + "}";
    EXPECT_EQ(Refused(body), "max_tokens") << body;
  }
  EXPECT_EQ(Parse(R"({"model":"m","prompt":"x","max_tokens":16777216})").req.max_tokens, 16777216);
  EXPECT_EQ(Refused(R"({"model":"m","messages":[{"role":"u"}],"max_completion_tokens":0})", true),
            "max_completion_tokens");
  // Both sent: max_completion_tokens counts, as in vLLM's chat requests.
  EXPECT_EQ(Parse(R"({"model":"m","messages":[{"role":"u"}],"max_tokens":9,"max_completion_tokens":3})", true)
                .req.max_tokens,
            3);
  Parsed p = Parse(R"({"model":"m","prompt":"x","max_tokens":0})");
  EXPECT_EQ(p.error.message, "'max_tokens' must be an integer in [1, 16777216]");
}

TEST(OpenAiRequestTest, ChoicesAreRefusedClearlyWhereOnlyOneIsMade) {
  EXPECT_EQ(Parse(R"({"model":"m","prompt":"x","n":4})").req.n, 4);
  EXPECT_EQ(Refused(R"({"model":"m","prompt":"x","n":0})"), "n");
  EXPECT_EQ(Refused(R"({"model":"m","prompt":"x","n":129})"), "n");
  Parsed one = Parse(R"({"model":"m","prompt":"x","n":2})", false, {.max_n = 1});
  ASSERT_FALSE(one.ok);
  EXPECT_EQ(one.error.param, "n");
  EXPECT_EQ(one.error.message, "'n' = 2 is not supported: this server makes at most 1 choice(s) per request");
  EXPECT_TRUE(Parse(R"({"model":"m","prompt":"x","n":1})", false, {.max_n = 1}).ok);
}

TEST(OpenAiRequestTest, SamplingFieldsAreCheckedAgainstTheirBounds) {
  const std::string ok_fields =
      R"("temperature":0.7,"top_p":1,"seed":-5,"stop":["\n","END"],"stop_token_ids":[2],"priority":-3,)"
      R"("user":"u1","presence_penalty":-2,"frequency_penalty":2,"logprobs":5)";
  Parsed p = Parse(R"({"model":"m","prompt":"x",)" + ok_fields + "}");
  ASSERT_TRUE(p.ok) << p.error.message;
  EXPECT_EQ(p.req.priority, -3);
  EXPECT_EQ(p.req.user, "u1");
  EXPECT_EQ(Refused(R"({"model":"m","prompt":"x","stop":"END","temperature":0})"), "accepted");
  struct Case {
    const char* field;
    const char* value;
  };
  for (const Case& c : std::vector<Case>{{"temperature", "-0.1"},
                                         {"temperature", "100.5"},
                                         {"temperature", "\"hot\""},
                                         {"top_p", "0"},
                                         {"top_p", "1.01"},
                                         {"seed", "1.5"},
                                         {"seed", "9223372036854775808"},
                                         {"stop", "[1]"},
                                         {"stop", "{}"},
                                         {"stop_token_ids", "[-1]"},
                                         {"priority", "2147483648"},
                                         {"user", "7"},
                                         {"presence_penalty", "2.5"},
                                         {"frequency_penalty", "-3"},
                                         {"logprobs", "21"},
                                         {"logprobs", "true"}}) {
    const std::string body = fmt::format(R"({{"model":"m","prompt":"x","{}":{}}})", c.field, c.value);
    EXPECT_EQ(Refused(body), c.field) << body;
  }
  json many = {{"model", "m"}, {"prompt", "x"}, {"stop", std::vector<std::string>(65, "s")}};
  EXPECT_EQ(Refused(many.dump()), "stop");
  // Chat's logprobs is a flag, with top_logprobs the count.
  EXPECT_EQ(Refused(R"({"model":"m","messages":[{"role":"u"}],"logprobs":true,"top_logprobs":20})", true), "accepted");
  EXPECT_EQ(Refused(R"({"model":"m","messages":[{"role":"u"}],"logprobs":3})", true), "logprobs");
  EXPECT_EQ(Refused(R"({"model":"m","messages":[{"role":"u"}],"top_logprobs":21})", true), "top_logprobs");
}

TEST(OpenAiRequestTest, CacheSaltAndKvTransferParams) {
  EXPECT_EQ(Parse(R"({"model":"m","prompt":"x","cache_salt":"t1"})").req.cache_salt, "t1");
  EXPECT_EQ(Refused(R"({"model":"m","prompt":"x","cache_salt":""})"), "cache_salt");
  EXPECT_EQ(Refused(R"({"model":"m","prompt":"x","cache_salt":5})"), "cache_salt");
  // The gateway's prefill-side request, and the decode side with the prefill's answer.
  Parsed prefill = Parse(
      R"({"model":"m","prompt":"x","kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,
          "remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}})");
  ASSERT_TRUE(prefill.ok) << prefill.error.message;
  EXPECT_TRUE(prefill.req.remote_decode);
  EXPECT_FALSE(prefill.req.remote_prefill);
  Parsed decode = Parse(R"({"model":"m","prompt":"x","kv_transfer_params":{"do_remote_prefill":true,
                            "remote_block_ids":[0,1]}})");
  ASSERT_TRUE(decode.ok) << decode.error.message;
  EXPECT_TRUE(decode.req.remote_prefill);
  for (const char* kv : {"[]", R"({"do_remote_decode":"yes"})", R"({"do_remote_prefill":true})",
                         R"({"do_remote_prefill":true,"remote_block_ids":[-1]})"}) {
    const std::string body = std::string(R"({"model":"m","prompt":"x","kv_transfer_params":)") + kv + "}";
    EXPECT_EQ(Refused(body), "kv_transfer_params") << body;
  }
}

TEST(OpenAiRequestTest, ErrorsHaveOpenAisShape) {
  EXPECT_EQ(Refused("{not json"), "(body)");
  EXPECT_EQ(Refused("[1,2]"), "(body)");
  Parsed p = Parse(R"({"model":"m","prompt":"x","stream_options":{"include_usage":true}})");
  ASSERT_FALSE(p.ok);
  HttpResponse r = p.error.Response();
  EXPECT_EQ(r.status, 400);
  json e = json::parse(r.body);
  EXPECT_EQ(e["error"]["message"], "Stream options can only be defined when `stream=True`.");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["param"], "stream_options");
}

TEST(OpenAiRequestTest, BearerToken) {
  EXPECT_EQ(BearerToken({{"Authorization", "Bearer  k1 "}}), "k1");
  EXPECT_EQ(BearerToken({{"authorization", "bearer k2"}}), "k2");
  EXPECT_EQ(BearerToken({{"Authorization", "Basic abc"}}), "");
  EXPECT_EQ(BearerToken({}), "");
}

}  // namespace
}  // namespace myriad::net
