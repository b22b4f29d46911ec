// The gateway's /metrics and access log through a client's and an operator's eyes: promtool
// accepts the exposition, its labels stay bounded, TTFT is taken at the first streamed token,
// and every request (refused ones too) leaves a line with its time, client and tokens.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <string>

#include "../test_util/promtool.h"
#include "core/time.h"
#include "gateway/stream_meter.h"
#include "gateway_test_util.h"

namespace myriad::gateway {
namespace {

using namespace gwtest;

std::string Chat(bool stream, int max_tokens = 4) {
  return json({{"model", "emu-model"},
               {"messages", {{{"role", "user"}, {"content", "hello there"}}}},
               {"max_tokens", max_tokens},
               {"stream", stream}})
      .dump();
}

// A gateway with one emulated engine, anonymous clients and a tenant "small" whose quota has
// room for one short request.
GatewayConfig SmallTenantConfig() {
  GatewayConfig c;
  TenantEntry small;
  small.config.name = "small";
  small.config.quota_tokens_per_s = 1e-3;
  small.config.burst_tokens = 13;  // a ~9-token prompt plus 4 output tokens
  small.api_keys = {"key-small"};
  c.tenants.push_back(small);
  return c;
}

bool Has(const std::string& text, const std::string& sample) { return text.find(sample + "\n") != std::string::npos; }

TEST(GatewayObservability, MetricsPassPromtoolWithBoundedModelTenantAndReasonLabels) {
  Harness h(1, SmallTenantConfig());
  net::AsyncHttpClient ac;
  const uint16_t port = h.gw->port();
  const std::string prompt = Completion("one two three four five six seven eight", 4);
  ASSERT_EQ(Send(ac, port, "POST", "/v1/completions", Completion("a b c d", 4, true), "").status, 200);
  ASSERT_EQ(Send(ac, port, "POST", "/v1/chat/completions", Chat(true), "").status, 200);
  ASSERT_EQ(Send(ac, port, "POST", "/v1/completions", Completion("a b c d", 4, false), "").status, 200);
  ASSERT_EQ(Send(ac, port, "POST", "/v1/completions", prompt, "key-small").status, 200);
  ASSERT_EQ(Send(ac, port, "POST", "/v1/completions", prompt, "key-small").status, 429);
  ASSERT_EQ(Send(ac, port, "POST", "/v1/completions", prompt, "no-such-key").status, 401);
  // Made-up model names: refused, and counted under "other", never as series of their own.
  for (int i = 0; i < 20; ++i) {
    const std::string body = json({{"model", "made-up-" + std::to_string(i)}, {"prompt", "x"}}).dump();
    ASSERT_EQ(Send(ac, port, "POST", "/v1/completions", body, "").status, 404);
  }
  ASSERT_TRUE(h.RequestLog(26).is_object());  // every request counted and logged
  auto m = h.Client().Get("/metrics");
  ASSERT_TRUE(m.ok());
  const std::string& text = m->body;

  const std::vector<std::string> complaints = myriad::testing::PromtoolComplaints(text);
  EXPECT_TRUE(complaints.empty()) << ::testing::PrintToString(complaints) << "\n" << text;
  EXPECT_EQ(text.find("made-up"), std::string::npos) << text;

  const std::string anon = R"({model="emu-model",tenant="anonymous"})";
  for (const std::string& sample : std::vector<std::string>{
           R"(myriad_gateway_rejections_total{model="emu-model",tenant="small",reason="tenant_quota"} 1)",
           R"(myriad_gateway_rejections_total{model="other",tenant="unauthenticated",reason="invalid_api_key"} 1)",
           R"(myriad_gateway_rejections_total{model="other",tenant="anonymous",reason="unknown_model"} 20)",
           // The two streams, not the whole answer: TTFT is a streamed token's.
           "myriad_gateway_ttft_seconds_count" + anon + " 2",
           // Four tokens each: three gaps per stream.
           "myriad_gateway_inter_token_latency_seconds_count" + anon + " 6",
           "myriad_gateway_request_seconds_count" + anon + " 3",
           "myriad_gateway_generation_tokens_total" + anon + " 12",
           R"(myriad_gateway_generation_tokens_total{model="emu-model",tenant="small"} 4)",
           R"(myriad_gateway_responses_total{route="completions",code="401"} 1)",
       }) {
    EXPECT_TRUE(Has(text, sample)) << sample << "\n" << text;
  }
  EXPECT_NE(text.find("# TYPE myriad_gateway_responses_total counter\n"), std::string::npos);
}

TEST(GatewayObservability, TtftIsTheFirstStreamedTokenNotTheResponseHeader) {
  Harness h(1);
  // The engine sends its stream's header at once and its first token only after a prefill
  // step made 2000 times slower: a gap no scheduler jitter explains.
  h.emus[0]->engine().SetSlowdown(2000);
  net::AsyncHttpClient ac;
  const CallResult r = Send(ac, h.gw->port(), "POST", "/v1/completions", Completion("a b c d", 2, true), "");
  ASSERT_EQ(r.status, 200) << r.body;
  const json line = h.RequestLog(1);
  ASSERT_TRUE(line.is_object());
  const double first_byte = line["first_byte_ms"].get<double>(), ttft = line["ttft_ms"].get<double>();
  EXPECT_GE(first_byte, 0);
  EXPECT_GT(ttft, first_byte + 20) << line.dump();
  EXPECT_LE(ttft, line["duration_ms"].get<double>());
  auto m = h.Client().Get("/metrics");
  ASSERT_TRUE(m.ok());
  // The one TTFT observed is over 20 ms: not in the 5 ms or 10 ms buckets.
  EXPECT_TRUE(Has(m->body, R"(myriad_gateway_ttft_seconds_bucket{model="emu-model",tenant="anonymous",le="0.01"} 0)"))
      << m->body;
}

TEST(GatewayObservability, AccessLogLinesCarryTimeClientTokensAndRefusals) {
  Harness h(1, SmallTenantConfig());
  net::AsyncHttpClient ac;
  const uint16_t port = h.gw->port();
  const int64_t before = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string prompt = Completion("one two three four five six seven eight", 4);
  ASSERT_EQ(Send(ac, port, "POST", "/v1/chat/completions", Chat(true, 3), "").status, 200);
  ASSERT_EQ(Send(ac, port, "POST", "/v1/completions", Completion("a b c d", 5, false), "").status, 200);
  ASSERT_EQ(Send(ac, port, "POST", "/v1/completions", prompt, "bad-key").status, 401);
  ASSERT_EQ(Send(ac, port, "POST", "/v1/completions", prompt, "key-small").status, 200);
  ASSERT_EQ(Send(ac, port, "POST", "/v1/completions", prompt, "key-small").status, 429);

  const json stream = h.RequestLog(1);
  ASSERT_TRUE(stream.is_object());
  const std::string time = stream["time"].get<std::string>();
  EXPECT_TRUE(std::regex_match(time, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)"))) << time;
  // The arrival time, to the millisecond: not before the test sent it.
  EXPECT_GE(time, FormatRfc3339Millis(before));
  EXPECT_TRUE(std::regex_match(stream["client"].get<std::string>(), std::regex(R"(127\.0\.0\.1:\d+)")))
      << stream.dump();
  EXPECT_EQ(stream["output_tokens"], 3) << stream.dump();  // counted from the stream's events
  EXPECT_GE(stream["ttft_ms"].get<double>(), 0);

  const json whole = h.RequestLog(2);
  EXPECT_EQ(whole["output_tokens"], 5) << whole.dump();  // the engine's usage
  EXPECT_EQ(whole["ttft_ms"], -1.0) << whole.dump();      // nothing streamed
  EXPECT_FALSE(whole.contains("reason"));

  const json unauthorized = h.RequestLog(3);
  EXPECT_EQ(unauthorized["status"], 401);
  EXPECT_EQ(unauthorized["reason"], "invalid_api_key");
  EXPECT_EQ(unauthorized["tenant"], "");
  EXPECT_EQ(unauthorized["output_tokens"], -1);
  EXPECT_TRUE(std::regex_match(unauthorized["time"].get<std::string>(), std::regex(R"(.*T.*\.\d{3}Z)")));
  EXPECT_FALSE(unauthorized["client"].get<std::string>().empty());

  const json limited = h.RequestLog(5);
  EXPECT_EQ(limited["status"], 429);
  EXPECT_EQ(limited["tenant"], "small");
  EXPECT_EQ(limited["reason"], "tenant_quota") << limited.dump();
  EXPECT_EQ(limited["backend"], "");
}

// The meter on its own: events cut anywhere by the reads, a role-only first event, usage.
TEST(StreamMeterTest, FindsTokenEventsAcrossReadsAndTheEnginesUsage) {
  const std::string stream =
      "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\": \"lo \\\"completion_tokens\\\":9\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,"
      "\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n"
      "data: [DONE]\n\n";
  for (size_t cut : {size_t{1}, size_t{5}, size_t{64}, stream.size()}) {
    StreamMeter m(true);
    auto t = StreamMeter::Clock::time_point{};
    for (size_t at = 0; at < stream.size(); at += cut) {
      t += std::chrono::milliseconds(1);
      m.OnData(std::string_view(stream).substr(at, cut), t);
    }
    EXPECT_EQ(m.token_events(), 3) << cut;
    EXPECT_EQ(m.usage_prompt_tokens(), 7) << cut;
    EXPECT_EQ(m.usage_completion_tokens(), 3) << cut;
    EXPECT_EQ(m.output_tokens(), 3);
    uint64_t gaps = 0;
    for (uint64_t g : m.gaps()) gaps += g;
    EXPECT_EQ(gaps, 2u) << cut;
  }
  // A whole answer: the usage at its end, split between reads.
  const std::string whole = R"({"choices":[{"text":"x \"completion_tokens\":99"}],"usage":{"prompt_tokens":12,"completion_tokens":1234}})";
  StreamMeter w(false);
  w.OnData(std::string_view(whole).substr(0, whole.size() - 3), {});
  w.OnData(std::string_view(whole).substr(whole.size() - 3), {});
  EXPECT_EQ(w.usage_completion_tokens(), 1234);
  EXPECT_EQ(w.usage_prompt_tokens(), 12);
  EXPECT_FALSE(w.has_first_token());
  // An event over the bound is skipped, not buffered; the next one counts again.
  StreamMeter big(true);
  big.OnData("data: {\"text\":\"" + std::string(StreamMeter::kMaxEventBytes + 10, 'a'), {});
  big.OnData("\"}\n\ndata: {\"text\":\"b\"}\n\n", {});
  EXPECT_EQ(big.token_events(), 1);
}

}  // namespace
}  // namespace myriad::gateway
