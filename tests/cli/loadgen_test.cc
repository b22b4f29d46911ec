// `myriad loadgen`: its bodies, its SSE token counting, and whole runs against an in-process
// engine emulator, through the library and through the binary.
#include "cli/loadgen.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "emu/emu_server.h"
#include "gateway/gateway.h"
#include "run_myriad.h"

namespace myriad::cli {
namespace {

using json = nlohmann::json;

std::unique_ptr<emu::EmuServer> StartEmu() {
  emu::EmuOptions o;
  o.http.port = 0;
  o.engine.speed = 1000;  // the engine is not what these tests measure
  auto s = emu::EmuServer::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Start().ok());
  return *std::move(s);
}

int Words(const std::string& s) {
  int n = 0;
  for (size_t i = 0; i < s.size(); ++i) n += (s[i] != ' ' && (i == 0 || s[i - 1] == ' '));
  return n;
}

TEST(LoadgenTest, BodiesAreAFunctionOfSeedAndIndex) {
  LoadgenOptions o;
  o.prompt_words = 10;
  o.shared_prefix_words = 30;
  o.prefix_groups = 3;
  o.stream = true;
  o.model = "m\"x";
  BodyMaker a(o), b(o);
  EXPECT_EQ(a.Body(7), b.Body(7));
  EXPECT_NE(a.Body(7), a.Body(8));
  LoadgenOptions other = o;
  other.seed = 2;
  EXPECT_NE(BodyMaker(other).Body(7), a.Body(7));

  json j = json::parse(a.Body(7));
  EXPECT_EQ(j["model"], "m\"x");
  EXPECT_EQ(j["max_tokens"], 16);
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  EXPECT_EQ(Words(j["prompt"].get<std::string>()), 40);

  // Requests of one group share their first 30 words; of different groups they do not.
  std::map<int, std::string> prefix_of_group;
  std::set<int> groups;
  for (uint64_t i = 0; i < 30; ++i) {
    const std::string p = a.Prompt(i);
    std::string prefix;
    for (int w = 0, pos = 0; w < 30; ++w) {
      size_t next = p.find(' ', pos);
      prefix += p.substr(pos, next - pos) + " ";
      pos = static_cast<int>(next) + 1;
    }
    const int g = a.Group(i);
    groups.insert(g);
    auto [it, fresh] = prefix_of_group.emplace(g, prefix);
    EXPECT_EQ(it->second, prefix) << "request " << i;
  }
  EXPECT_EQ(groups.size(), 3u);
  EXPECT_NE(prefix_of_group[0], prefix_of_group[1]);

  LoadgenOptions plain;
  plain.stream = false;
  json k = json::parse(BodyMaker(plain).Body(0));
  EXPECT_EQ(k["stream"], false);
  EXPECT_FALSE(k.contains("stream_options"));
}

TEST(LoadgenTest, SseCounterPrefersUsageAndSurvivesSplits) {
  const std::string stream =
      "data: {\"choices\":[{\"text\":\" a\",\"finish_reason\":null}]}\n\n"
      "data: {\"choices\":[{\"text\":\" b\",\"finish_reason\":null}]}\n\n"
      "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n";
  for (size_t cut = 1; cut < stream.size(); cut += 7) {
    SseTokenCounter c;
    c.Feed(stream.substr(0, cut));
    c.Feed(stream.substr(cut));
    EXPECT_EQ(c.tokens(), 2);
    EXPECT_FALSE(c.done());
    c.Feed("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":5}}\n\ndata: [DONE]\n\n");
    EXPECT_EQ(c.tokens(), 5);
    EXPECT_EQ(c.prompt_tokens(), 3);
    EXPECT_EQ(c.cached_tokens(), -1);  // the server sent no prompt_tokens_details
    EXPECT_TRUE(c.done());
  }
  SseTokenCounter cached;
  cached.Feed(R"(data: {"usage":{"prompt_tokens":40,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":32}}})"
              "\n\n");
  EXPECT_EQ(cached.prompt_tokens(), 40);
  EXPECT_EQ(cached.cached_tokens(), 32);
  EXPECT_EQ(UsageCompletionTokens(R"({"usage":{"completion_tokens":9}})"), 9);
  EXPECT_EQ(UsageCompletionTokens("not json"), -1);
}

TEST(LoadgenTest, BadOptionsNameTheFlag) {
  LoadgenOptions o;
  o.concurrency = 0;
  EXPECT_NE(ValidateLoadgenOptions(o).message().find("--concurrency"), std::string::npos);
  o = {};
  o.url = "https://x:1";
  EXPECT_NE(ValidateLoadgenOptions(o).message().find("--url"), std::string::npos);
  o = {};
  o.duration = 0;
  EXPECT_NE(ValidateLoadgenOptions(o).message().find("--duration"), std::string::npos);
  o = {};
  o.prefix_groups = 0;
  EXPECT_NE(ValidateLoadgenOptions(o).message().find("--prefix-groups"), std::string::npos);
  // Upper bounds: a typo must not exhaust memory or threads.
  o = {};
  o.concurrency = 2'000'000'000;
  EXPECT_NE(ValidateLoadgenOptions(o).message().find("--concurrency"), std::string::npos);
  o = {};
  o.rate = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(ValidateLoadgenOptions(o).message().find("--rate"), std::string::npos);
  o = {};
  o.shared_prefix_words = 1'000'000;
  o.prefix_groups = 100'000;
  EXPECT_NE(ValidateLoadgenOptions(o).message().find("--shared-prefix-words"), std::string::npos);
  o = {};
  o.threads = 100'000'000;
  EXPECT_NE(ValidateLoadgenOptions(o).message().find("--threads"), std::string::npos);
  EXPECT_TRUE(ValidateLoadgenOptions(LoadgenOptions{}).ok());
}

TEST(LoadgenTest, StreamingRunCountsEveryRequestAndToken) {
  auto emu = StartEmu();
  LoadgenOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(emu->port());
  o.concurrency = 4;
  o.duration = 0;
  o.requests = 40;
  o.max_tokens = 5;
  o.stream = true;
  o.prompt_words = 20;
  o.shared_prefix_words = 32;
  o.prefix_groups = 2;
  auto r = RunLoad(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sent, 40u);
  EXPECT_EQ(r->ok, 40u) << r->Table();
  EXPECT_EQ(r->error_count(), 0u) << r->Table();
  EXPECT_EQ(r->output_tokens, 200);
  EXPECT_EQ(r->latency_ms.count(), 40u);
  EXPECT_EQ(r->ttft_ms.count(), 40u);
  EXPECT_LE(r->ttft_ms.Quantile(0.5), r->latency_ms.Quantile(0.5));
  EXPECT_EQ(emu->completions(), 40u);
  json j = json::parse(r->Json());
  EXPECT_EQ(j["requests"]["ok"], 40);
  EXPECT_EQ(j["settings"]["concurrency"], 4);
  EXPECT_TRUE(j.contains("ttft_ms"));
  EXPECT_NE(r->Table().find("ttft ms"), std::string::npos);
}

TEST(LoadgenTest, NonStreamingRunReadsUsageAndStopsAtItsDuration) {
  auto emu = StartEmu();
  LoadgenOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(emu->port());
  o.concurrency = 2;
  o.duration = 300 * kMillisecond;
  o.max_tokens = 3;
  auto r = RunLoad(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->ok, 0u);
  EXPECT_EQ(r->ok, r->sent) << r->Table();
  EXPECT_EQ(r->output_tokens, static_cast<int64_t>(3 * r->ok));
  EXPECT_LT(r->elapsed_s, 5.0);
  EXPECT_EQ(r->ttft_ms.count(), 0u);
}

TEST(LoadgenTest, ErrorsAreCountedByKind) {
  auto emu = StartEmu();
  LoadgenOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(emu->port());
  o.path = "/v1/nowhere";
  o.duration = 0;
  o.requests = 6;
  auto r = RunLoad(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ok, 0u);
  EXPECT_EQ(r->errors["http_404"], 6u) << r->Table();

  const uint16_t port = emu->port();
  emu->Stop();
  o.url = "http://127.0.0.1:" + std::to_string(port);
  o.path = "/v1/completions";
  r = RunLoad(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ok, 0u);
  EXPECT_EQ(r->error_count(), 6u) << r->Table();
  EXPECT_EQ(r->errors.count("connect_unavailable"), 1u) << r->Table();
}

TEST(LoadgenCliTest, RunsAgainstAnEmulatorAndRejectsBadFlags) {
  auto emu = StartEmu();
  const std::string url = "http://127.0.0.1:" + std::to_string(emu->port());
  auto r = testing::RunMyriad("loadgen --url " + url + " --requests 12 -c 3 --stream --max-tokens 4 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  json j = json::parse(r.out);
  EXPECT_EQ(j["requests"]["sent"], 12);
  EXPECT_EQ(j["requests"]["ok"], 12);
  EXPECT_EQ(j["output_tokens"], 48);
  r = testing::RunMyriad("loadgen --url " + url + " --requests 5");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("5 sent, 5 ok, 0 errors"), std::string::npos) << r.out;

  r = testing::RunMyriad("loadgen --concurrency 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--concurrency: must be in [1, 100000]"), std::string::npos) << r.out;
  r = testing::RunMyriad("loadgen --duration 10parsecs");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--duration"), std::string::npos) << r.out;
  r = testing::RunMyriad("loadgen --url ftp://x");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--url"), std::string::npos) << r.out;
}

// A gateway with tenants and no anonymous access answers 401 without a key; --api-key (or
// $OPENAI_API_KEY) sends the tenant's key.
TEST(LoadgenCliTest, ApiKeyDrivesAGatewayWithTenants) {
  auto emu = StartEmu();
  gateway::GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.access_log = "";
  gateway::BackendConfig b;
  b.name = "e0";
  b.url = "http://127.0.0.1:" + std::to_string(emu->port());
  b.model = "emu-model";
  c.backends.push_back(b);
  gateway::TenantEntry t;
  t.config.name = "team";
  t.api_keys = {"sk-team"};
  c.tenants.push_back(t);
  c.allow_anonymous = false;
  auto gw = gateway::Gateway::Create(c);
  ASSERT_TRUE(gw.ok()) << gw.status();
  ASSERT_TRUE((*gw)->Start().ok());
  const std::string url = "http://127.0.0.1:" + std::to_string((*gw)->port());
  auto r = testing::RunMyriad("loadgen --url " + url + " --requests 4 -c 2 --json", "OPENAI_API_KEY=");
  ASSERT_EQ(r.code, 1) << r.out;  // a run whose every request failed
  json j = json::parse(r.out);
  EXPECT_EQ(j["requests"]["ok"], 0) << r.out;
  EXPECT_EQ(j["errors"]["http_401"], 4) << r.out;
  r = testing::RunMyriad("loadgen --url " + url + " --requests 4 -c 2 --json --api-key sk-team");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(json::parse(r.out)["requests"]["ok"], 4) << r.out;
  r = testing::RunMyriad("loadgen --url " + url + " --requests 4 -c 2 --json", "OPENAI_API_KEY=sk-team");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(json::parse(r.out)["requests"]["ok"], 4) << r.out;
  (*gw)->Stop();
}

}  // namespace
}  // namespace myriad::cli
