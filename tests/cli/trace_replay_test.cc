// `myriad loadgen --trace`: the prompts built from trace records, and replays against an
// in-process engine emulator through the binary.
#include "cli/trace_replay.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "emu/emu_server.h"
#include "gateway/gateway.h"
#include "run_myriad.h"

namespace myriad::cli {
namespace {

using json = nlohmann::json;
using sim::kReplayVocab;
using sim::TracePromptIds;

sim::TraceRecord Record(int32_t input, int32_t output, std::vector<uint64_t> ids) {
  sim::TraceRecord r;
  r.input_tokens = input;
  r.output_tokens = output;
  r.content_ids = std::move(ids);
  return r;
}

TEST(LoadgenTraceTest, EqualBlockIdsGiveEqualTokenBlocks) {
  const auto a = TracePromptIds(Record(1200, 5, {7, 8, 9}), 0);
  const auto b = TracePromptIds(Record(1100, 5, {7, 8, 10}), 1);
  ASSERT_EQ(a.size(), 1200u);  // the last block cut to the input length
  ASSERT_EQ(b.size(), 1100u);
  // Blocks 7 and 8 are shared, block 9 and 10 are not.
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + 1024, b.begin()));
  EXPECT_NE(std::vector<uint32_t>(a.begin() + 1024, a.begin() + 1100),
            std::vector<uint32_t>(b.begin() + 1024, b.begin() + 1100));
  // Within a block positions differ, and one block id is not another's shifted copy.
  EXPECT_NE(std::vector<uint32_t>(a.begin(), a.begin() + 16), std::vector<uint32_t>(a.begin() + 1, a.begin() + 17));
  EXPECT_NE(std::vector<uint32_t>(a.begin(), a.begin() + 512), std::vector<uint32_t>(a.begin() + 512, a.begin() + 1024));
  for (uint32_t t : a) EXPECT_LT(t, kReplayVocab);

  // Without ids (Azure) requests share nothing, even with equal lengths.
  const auto c = TracePromptIds(Record(600, 5, {}), 2);
  const auto d = TracePromptIds(Record(600, 5, {}), 3);
  EXPECT_NE(std::vector<uint32_t>(c.begin(), c.begin() + 16), std::vector<uint32_t>(d.begin(), d.begin() + 16));
  // Ids shorter than the prompt: the blocks past them are the request's own.
  const auto e = TracePromptIds(Record(1024, 5, {7}), 4);
  const auto f = TracePromptIds(Record(1024, 5, {7}), 5);
  EXPECT_TRUE(std::equal(e.begin(), e.begin() + 512, f.begin()));
  EXPECT_NE(std::vector<uint32_t>(e.begin() + 512, e.end()), std::vector<uint32_t>(f.begin() + 512, f.end()));
}

TEST(LoadgenTraceTest, BodiesAreAPureFunctionOfTheRecord) {
  const sim::TraceRecord r = Record(700, 12, {3, 4});
  EXPECT_EQ(TraceRequestBody(r, 0, "m"), TraceRequestBody(r, 0, "m"));
  EXPECT_EQ(TraceRequestBody(r, 0, "m"), TraceRequestBody(r, 9, "m"));  // the trace's ids cover the prompt
  json j = json::parse(TraceRequestBody(r, 0, "m\"x"));
  EXPECT_EQ(j["model"], "m\"x");
  EXPECT_EQ(j["max_tokens"], 12);
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  ASSERT_TRUE(j["prompt"].is_array());
  EXPECT_EQ(j["prompt"].get<std::vector<uint32_t>>(), TracePromptIds(r, 0));
  // An output length of 0 still asks for one token: OpenAI servers refuse max_tokens 0.
  EXPECT_EQ(json::parse(TraceRequestBody(Record(10, 0, {1}), 0, "m"))["max_tokens"], 1);
}

TEST(LoadgenTraceTest, ErrorReasonReadsOpenAiErrors) {
  EXPECT_EQ(ErrorReason(R"({"error":{"message":"slow down","type":"rate_limited"}})"), "rate_limited: slow down");
  EXPECT_EQ(ErrorReason(R"({"error":{"message":"gone"}})"), "gone");
  EXPECT_EQ(ErrorReason("plain text"), "plain text");
}

std::unique_ptr<emu::EmuServer> StartEmu() {
  emu::EmuOptions o;
  o.http.port = 0;
  o.engine.speed = 1000;  // the engine is not what these tests measure
  auto s = emu::EmuServer::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Start().ok());
  return *std::move(s);
}

std::unique_ptr<gateway::Gateway> StartGateway(uint16_t engine_port) {
  gateway::GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.access_log = "";
  gateway::BackendConfig b;
  b.name = "e0";
  b.url = "http://127.0.0.1:" + std::to_string(engine_port);
  b.model = "emu-model";
  c.backends.push_back(b);
  auto gw = gateway::Gateway::Create(c);
  EXPECT_TRUE(gw.ok()) << gw.status();
  EXPECT_TRUE((*gw)->Start().ok());
  return *std::move(gw);
}

std::vector<json> LogLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

// Records 1 and 3 share leading blocks with record 0, which has finished by the time they
// arrive: the engine's prefix cache serves that part.
constexpr const char* kTrace =
    R"({"timestamp": 1000, "input_length": 1100, "output_length": 4, "hash_ids": [1, 2, 3]})"
    "\n"
    R"({"timestamp": 1300, "input_length": 1100, "output_length": 4, "hash_ids": [1, 2, 4]})"
    "\n\n"
    R"({"timestamp": 1400, "input_length": 500, "output_length": 3, "hash_ids": [9]})"
    "\n"
    R"({"timestamp": 1600, "input_length": 700, "output_length": 2, "hash_ids": [1, 5]})"
    "\n";

TEST(LoadgenTraceCliTest, ReplaysAMooncakeTraceThroughTheGatewayAndLogsEveryRequest) {
  auto emu = StartEmu();
  auto gw = StartGateway(emu->port());
  const std::string trace = testing::WriteTempFile("trace.jsonl", kTrace);
  const std::string log = (testing::TestTempDir() / "replay.log").string();
  const std::string url = "http://127.0.0.1:" + std::to_string(gw->port());
  auto r = testing::RunMyriad("loadgen --url " + url + " --trace " + trace + " --log " + log + " -c 4 --json", "", 60);
  ASSERT_EQ(r.code, 0) << r.out;
  json j = json::parse(r.out);
  EXPECT_EQ(j["requests"]["sent"], 4) << r.out;
  EXPECT_EQ(j["status"]["200"], 4) << r.out;
  EXPECT_EQ(j["ttft_ms"]["count"], 4) << r.out;
  EXPECT_EQ(j["prefix"]["prompt_tokens"], 1100 + 1100 + 500 + 700) << r.out;
  EXPECT_GT(j["prefix"]["hit_rate"].get<double>(), 0.3) << r.out;

  const std::vector<json> lines = LogLines(log);
  ASSERT_EQ(lines.size(), 4u);
  const int inputs[] = {1100, 1100, 500, 700};
  const double offsets[] = {0, 0.3, 0.4, 0.6};
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["index"], i);
    EXPECT_EQ(lines[i]["status"], 200) << lines[i];
    EXPECT_EQ(lines[i]["backend"], "e0") << lines[i];
    EXPECT_EQ(lines[i]["prompt_tokens"], inputs[i]) << lines[i];
    EXPECT_NEAR(lines[i]["scheduled_s"].get<double>(), offsets[i], 1e-9);
    EXPECT_GE(lines[i]["sent_s"].get<double>(), offsets[i]);
    EXPECT_GE(lines[i]["e2e_s"].get<double>(), lines[i]["ttft_s"].get<double>());
    EXPECT_EQ(lines[i]["error"], "");
  }
  EXPECT_EQ(lines[0]["cached_tokens"], 0);
  EXPECT_GE(lines[1]["cached_tokens"], 1024) << lines[1];  // blocks 1 and 2
  EXPECT_EQ(lines[2]["cached_tokens"], 0);
  EXPECT_GE(lines[3]["cached_tokens"], 512) << lines[3];  // block 1
  EXPECT_EQ(lines[1]["output_tokens"], 4);
  gw->Stop();
}

// Arrivals past the cap wait and say so; a faster time scale brings them closer; Azure's CSV
// works the same way, every request with prompt blocks of its own.
TEST(LoadgenTraceCliTest, ArrivalsPastTheCapAreDelayedAndCounted) {
  auto emu = StartEmu();
  const std::string trace = testing::WriteTempFile(
      "azure.csv",
      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
      "2023-11-16 18:15:46.6805900,600,3\n"
      "2023-11-16 18:15:46.6805900,600,3\n"
      "2023-11-16 18:15:46.6805900,600,3\n"
      "2023-11-16 18:15:56.6805900,600,3\n");
  const std::string log = (testing::TestTempDir() / "azure.log").string();
  const std::string url = "http://127.0.0.1:" + std::to_string(emu->port());
  auto r = testing::RunMyriad(
      "loadgen --url " + url + " --trace " + trace + " --trace-format azure --time-scale 100 -c 1 --log " + log, "", 60);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("4 sent"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("200 4"), std::string::npos) << r.out;
  const std::vector<json> lines = LogLines(log);
  ASSERT_EQ(lines.size(), 4u);
  int delayed = 0;
  for (const json& l : lines) {
    delayed += l["delayed"].get<bool>();
    EXPECT_EQ(l["cached_tokens"], 0) << l;
    EXPECT_EQ(l["backend"], "") << l;  // no gateway in front
  }
  EXPECT_GE(delayed, 1);  // the second arrival at the same instant finds the first in flight
  EXPECT_NE(r.out.find(std::to_string(delayed) + " delayed by the cap"), std::string::npos) << r.out;
  EXPECT_NEAR(lines[3]["scheduled_s"].get<double>(), 0.1, 1e-9);  // 10 s of trace at 100x
}

TEST(LoadgenTraceCliTest, BadTraceFlagsAndFilesAreInputErrors) {
  const std::string trace = testing::WriteTempFile("ok.jsonl", kTrace);
  auto r = testing::RunMyriad("loadgen --trace " + trace + " --rate 5 --requests 3");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--trace conflicts with --rate, --requests"), std::string::npos) << r.out;
  r = testing::RunMyriad("loadgen --trace " + trace + " --prompt-words 9");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--prompt-words"), std::string::npos) << r.out;
  r = testing::RunMyriad("loadgen --trace " + trace + " --time-scale 0");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--time-scale: must be in [0.001, 1e+06]"), std::string::npos) << r.out;
  r = testing::RunMyriad("loadgen --trace " + trace + " --trace-format parquet");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--trace-format"), std::string::npos) << r.out;
  r = testing::RunMyriad("loadgen --log x.log --requests 1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("need --trace"), std::string::npos) << r.out;

  const std::string bad = testing::WriteTempFile(
      "bad.jsonl", std::string(R"({"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]})") +
                       "\n" + R"({"timestamp": 5, "input_length": "many", "output_length": 2})" + "\n");
  r = testing::RunMyriad("loadgen --trace " + bad);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(bad + ":2: input_length"), std::string::npos) << r.out;
  r = testing::RunMyriad("loadgen --trace " + trace + " --log " + (testing::TestTempDir() / "no/such/dir.log").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--log: cannot open"), std::string::npos) << r.out;

  // A schedule beyond the bound (here 10^9 s of trace at 1x) is refused, not slept through.
  const std::string slow = testing::WriteTempFile(
      "slow.jsonl", std::string(R"({"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]})") +
                        "\n" + R"({"timestamp": 1000000000000, "input_length": 10, "output_length": 2, "hash_ids": [2]})" + "\n");
  r = testing::RunMyriad("loadgen --trace " + slow, "", 30);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--time-scale: the trace would take 1e+09 s to replay at 1, more than the bound of 1e+07 s"),
            std::string::npos)
      << r.out;

  // Past the record bound: refused before parsing, naming the first line over it.
  const std::string huge = (testing::TestTempDir() / "huge.jsonl").string();
  {
    std::ofstream out(huge);
    for (int64_t i = 0; i <= kMaxReplayRecords; ++i) out << "x\n";
  }
  r = testing::RunMyriad("loadgen --trace " + huge);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(huge + ":1000001: more than 1000000 records"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace myriad::cli
