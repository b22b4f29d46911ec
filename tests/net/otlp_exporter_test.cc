// The OTLP/HTTP exporter against collectors that refuse, stall or are not there.
#include "net/otlp_exporter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "net/http_server.h"
#include "../test_util/wait_for.h"

namespace myriad::net {
namespace {

using myriad::test::WaitFor;

using namespace std::chrono_literals;
using json = nlohmann::json;

std::vector<otlp::Span> OneTrace(int n) {
  std::vector<otlp::Span> out;
  for (int i = 0; i < n; ++i) {
    otlp::Span s;
    s.trace_id = "0af7651916cd43dd8448eb211c80319c";
    s.span_id = static_cast<uint64_t>(i + 1);
    s.parent_span_id = i == 0 ? 0 : 1;
    s.name = "x";
    s.start_unix_ns = 1'700'000'000'000'000'000;
    s.end_unix_ns = s.start_unix_ns + 5;
    s.attributes = {{"n", int64_t{1} << 60}, {"d", 0.5}, {"b", true}, {"s", std::string("v")}};
    out.push_back(s);
  }
  return out;
}

OtlpExporterOptions Options(uint16_t port) {
  OtlpExporterOptions o;
  o.endpoint = "http://127.0.0.1:" + std::to_string(port);
  o.flush_interval = 10 * kMillisecond;
  return o;
}

TEST(OtlpExporterTest, EncodesTheJsonMappingIdsInHexIntegersAsStrings) {
  otlp::Resource r;
  r.attributes = {{"service.name", std::string("svc")}};
  const json j = json::parse(otlp::EncodeTraces(r, OneTrace(2)));
  const json& s = j["resourceSpans"][0]["scopeSpans"][0]["spans"];
  EXPECT_EQ(s[0]["spanId"], "0000000000000001");
  EXPECT_FALSE(s[0].contains("parentSpanId"));
  EXPECT_EQ(s[1]["parentSpanId"], "0000000000000001");
  EXPECT_EQ(s[0]["startTimeUnixNano"], "1700000000000000000");
  EXPECT_EQ(s[0]["kind"], 1);
  EXPECT_EQ(s[0]["attributes"][0]["value"]["intValue"], "1152921504606846976");
  EXPECT_EQ(s[0]["attributes"][1]["value"]["doubleValue"], 0.5);
  EXPECT_EQ(s[0]["attributes"][2]["value"]["boolValue"], true);
  EXPECT_EQ(s[0]["attributes"][3]["value"]["stringValue"], "v");
  EXPECT_EQ(j["resourceSpans"][0]["resource"]["attributes"][0]["key"], "service.name");
}

// 429 and 503 with Retry-After are retried (the wait bounded by max_backoff); the batch goes
// through once the collector takes it.
TEST(OtlpExporterTest, RetriesRefusalsHonouringRetryAfterUpToTheBackoffBound) {
  std::atomic<int> posts{0};
  HttpServer col(HttpServerOptions{}, [&](const HttpRequest&) {
    const int n = posts++;
    if (n == 0) return HttpResponse{429, "text/plain", "", {{"Retry-After", "3600"}}};
    if (n == 1) return HttpResponse{503, "text/plain", "", {{"Retry-After", "0"}}};
    return HttpResponse{200, "application/json", "{}", {}};
  });
  ASSERT_TRUE(col.Start().ok());
  OtlpExporterOptions o = Options(col.port());
  o.max_backoff = 20 * kMillisecond;
  auto e = OtlpExporter::Create(o);
  ASSERT_TRUE(e.ok()) << e.status();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE((*e)->Export(OneTrace(3)));
  ASSERT_TRUE(WaitFor([&] { return (*e)->stats().exported == 3; }));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "Retry-After: 3600 was not bounded";
  EXPECT_EQ((*e)->stats().retries, 2u);
  EXPECT_EQ(posts.load(), 3);
}

TEST(OtlpExporterTest, GivesUpAfterMaxRetriesAndCountsTheSpans) {
  std::atomic<int> posts{0};
  HttpServer col(HttpServerOptions{}, [&](const HttpRequest&) {
    ++posts;
    return HttpResponse{503, "text/plain", "", {}};
  });
  ASSERT_TRUE(col.Start().ok());
  OtlpExporterOptions o = Options(col.port());
  o.max_retries = 2;
  o.max_backoff = 5 * kMillisecond;
  auto e = OtlpExporter::Create(o);
  ASSERT_TRUE(e.ok());
  (*e)->Export(OneTrace(4));
  ASSERT_TRUE(WaitFor([&] { return (*e)->stats().dropped_export_failed == 4; }));
  EXPECT_EQ(posts.load(), 3);
  EXPECT_EQ((*e)->stats().exported, 0u);
}

// A collector slower than the timeout: Export never waits for it, the queue's bound drops
// what does not fit, and Stop takes about one timeout.
TEST(OtlpExporterTest, SlowCollectorCostsSpansNotTime) {
  HttpServer col(HttpServerOptions{.threads = 2}, [&](const HttpRequest&) {
    std::this_thread::sleep_for(300ms);
    return HttpResponse{200, "application/json", "{}", {}};
  });
  ASSERT_TRUE(col.Start().ok());
  OtlpExporterOptions o = Options(col.port());
  o.max_queue = 10;
  o.max_batch = 2;
  o.flush_interval = 5 * kMillisecond;
  o.timeout = 50 * kMillisecond;
  o.max_retries = 0;
  auto e = OtlpExporter::Create(o);
  ASSERT_TRUE(e.ok());
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) (*e)->Export(OneTrace(2));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 100ms);
  EXPECT_GT((*e)->stats().dropped_queue_full, 0u);
  ASSERT_TRUE(WaitFor([&] { return (*e)->stats().dropped_export_failed > 0; }));
  const auto s0 = std::chrono::steady_clock::now();
  (*e)->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - s0, 1s);
  EXPECT_FALSE((*e)->Export(OneTrace(1)));
}

TEST(OtlpExporterTest, RefusesAnEndpointThatIsNotAnHttpUrl) {
  OtlpExporterOptions o;
  o.endpoint = "grpc://collector:4317";
  auto e = OtlpExporter::Create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("tracing.endpoint"), std::string::npos);
}

}  // namespace
}  // namespace myriad::net
