// `myriad diagnose` as an operator runs it: over a simulation's results (a straggler, hot
// experts) and over a live emulated engine with one slow DP rank; bad input exits 2 naming it.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "cli/diagnose_inputs.h"
#include "emu/emu_server.h"
#include "net/http_client.h"
#include "run_myriad.h"

namespace myriad::testing {
namespace {

using nlohmann::json;

std::string Source(const std::string& relative) {
  std::ifstream in(std::string(MYRIAD_SOURCE_DIR) + "/" + relative);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

json Findings(const CommandResult& r) {
  const json j = json::parse(r.out, nullptr, false);
  return j.is_object() ? j.value("findings", json::array()) : json::array();
}

// The quick scenario with one decode GPU 50% slow from the first minute, and the straggler
// practice off so the rank stays in the unit: the radar's top rank, named first.
TEST(DiagnoseCli, SimulatedStragglerIsTheFirstFindingWithItsUnitAndRank) {
  const std::string scenario = WriteTempFile(
      "straggler.yaml", Source("scenarios/small.yaml") +
                            "faults:\n  rates: none\n  scripted:\n"
                            "    - {at: 60s, kind: straggler, unit: 4, rank: 17, factor: 1.5}\n"
                            "  straggler_detection: {enabled: false}\n");
  const std::string results = (TestTempDir() / "straggler.json").string();
  const CommandResult sim = RunMyriad("sim " + scenario + " -q -o " + results, "", 120);
  ASSERT_EQ(sim.code, 0) << sim.out;
  const CommandResult d = RunMyriad("diagnose --json --sim " + results, "", 60);
  ASSERT_EQ(d.code, 0) << d.out;
  const json f = Findings(d);
  ASSERT_FALSE(f.empty()) << d.out;
  EXPECT_EQ(f[0]["suspicion"], "straggler") << d.out;
  EXPECT_EQ(f[0]["unit"], "unit 4 (decode)") << d.out;
  EXPECT_EQ(f[0]["rank"], 17) << d.out;
  const CommandResult text = RunMyriad("diagnose --sim " + results, "", 60);
  EXPECT_NE(text.out.find(" 1. straggler"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("unit 4 (decode) rank 17"), std::string::npos) << text.out;
}

// scenarios/moe_units.yaml with its decode unit's experts placed contiguously (no EPLB): the
// hot experts are the first finding, and with EPLB (the scenario as written) they are not one.
TEST(DiagnoseCli, SimulatedExpertImbalanceIsNamedFirstAndGoneUnderEplb) {
  const std::string contiguous = (TestTempDir() / "contiguous.json").string();
  const std::string eplb = (TestTempDir() / "eplb.json").string();
  const std::string scenario = std::string(MYRIAD_SOURCE_DIR) + "/scenarios/moe_units.yaml";
  ASSERT_EQ(RunMyriad("sim " + scenario + " -q --set pools.1.moe.placement=contiguous -o " + contiguous, "", 120).code,
            0);
  ASSERT_EQ(RunMyriad("sim " + scenario + " -q -o " + eplb, "", 120).code, 0);
  const CommandResult d = RunMyriad("diagnose --json --sim " + contiguous, "", 60);
  ASSERT_EQ(d.code, 0) << d.out;
  const json f = Findings(d);
  ASSERT_FALSE(f.empty()) << d.out;
  EXPECT_EQ(f[0]["suspicion"], "expert_imbalance") << d.out;
  EXPECT_EQ(f[0]["unit"], "pool decode") << d.out;
  EXPECT_NE(f[0]["evidence"].get<std::string>().find("contiguous"), std::string::npos) << d.out;
  const CommandResult balanced = RunMyriad("diagnose --json --sim " + eplb, "", 60);
  ASSERT_EQ(balanced.code, 0) << balanced.out;
  for (const json& x : Findings(balanced)) EXPECT_NE(x["suspicion"], "expert_imbalance") << balanced.out;
}

// A live emulated engine with four DP ranks, rank 2 four times slower per step (the emulator's
// per-engine slowdown, the one its /admin/fault "slow" sets): scraped, it is named first.
TEST(DiagnoseCli, ScrapedEmulatorWithASlowRankNamesThatRankFirst) {
  emu::EmuOptions o;
  o.dp_ranks = 4;
  auto emu = emu::EmuServer::Create(o);
  ASSERT_TRUE(emu.ok()) << emu.status();
  ASSERT_TRUE((*emu)->Start().ok());
  (*emu)->engine(2).SetSlowdown(4.0);
  std::vector<std::thread> load;
  for (int rank = 0; rank < 4; ++rank) {
    load.emplace_back([&, rank] {
      net::HttpClient c(net::HostPort{"127.0.0.1", (*emu)->port()});
      for (int i = 0; i < 2; ++i) {
        auto r = c.Request("POST", "/v1/completions",
                           json({{"prompt", "one two three four"}, {"max_tokens", 12}, {"stream", true}}).dump(),
                           "application/json", {{"X-data-parallel-rank", std::to_string(rank)}});
        EXPECT_TRUE(r.ok() && r->status == 200);
      }
    });
  }
  for (auto& t : load) t.join();
  const std::string url = "http://127.0.0.1:" + std::to_string((*emu)->port()) + "/metrics";
  const CommandResult d = RunMyriad("diagnose --json --metrics " + url, "", 60);
  ASSERT_EQ(d.code, 0) << d.out;
  const json f = Findings(d);
  ASSERT_FALSE(f.empty()) << d.out;
  EXPECT_EQ(f[0]["suspicion"], "straggler") << d.out;
  EXPECT_EQ(f[0]["unit"], "engine " + url) << d.out;
  EXPECT_EQ(f[0]["rank"], 2) << d.out;
  (*emu)->Stop();
}

// What each kind of endpoint gives: an engine's ranks, the gateway's refusals, the controller's
// radar (whose rank 3 is then a finding of its own).
TEST(DiagnoseCli, ReadsEnginesGatewayAndControllerExpositions) {
  const std::string engine =
      "# TYPE vllm:num_requests_running gauge\n"
      "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 2\n"
      "vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 6\n"
      "vllm:inter_token_latency_seconds_sum{engine=\"0\",model_name=\"m\"} 1.0\n"
      "vllm:inter_token_latency_seconds_count{engine=\"0\",model_name=\"m\"} 100\n"
      "vllm:inter_token_latency_seconds_sum{engine=\"1\",model_name=\"m\"} 3.0\n"
      "vllm:inter_token_latency_seconds_count{engine=\"1\",model_name=\"m\"} 100\n"
      "vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"m\"} 25\n"
      "vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"m\"} 100\n"
      "vllm:num_preemptions_total{engine=\"1\",model_name=\"m\"} 3\n";
  const std::string gateway =
      "myriad_gateway_responses_total{route=\"completions\",code=\"200\"} 90\n"
      "myriad_gateway_responses_total{route=\"completions\",code=\"429\"} 10\n"
      "myriad_gateway_rejections_total{model=\"m\",tenant=\"a\",reason=\"tenant_quota\"} 10\n";
  const std::string controller = "myriad_control_radar_step_time_excess{engine=\"b1\",rank=\"3\"} 0.6\n";
  const policy::DiagnoseInput in =
      cli::FromExpositions({{"e0", engine}, {"gw", gateway}, {"ctl", controller}});
  ASSERT_EQ(in.units.size(), 1u);
  EXPECT_EQ(in.units[0].name, "engine e0");
  EXPECT_EQ(in.units[0].rank_step_s, (std::vector<double>{0.01, 0.03}));
  EXPECT_EQ(in.units[0].rank_load, (std::vector<double>{2, 6}));
  EXPECT_DOUBLE_EQ(in.prefix_hit_rate, 0.25);
  EXPECT_EQ(in.requests, 100);  // the gateway's answers, refusals included
  EXPECT_EQ(in.preempted, 3);
  ASSERT_EQ(in.rejections.size(), 1u);
  EXPECT_EQ(in.rejections[0], (std::pair<std::string, double>{"tenant_quota", 10}));
  ASSERT_EQ(in.radar.size(), 1u);
  EXPECT_EQ(in.radar[0].unit, "engine b1");
  EXPECT_EQ(in.radar[0].rank, 3);
  const auto f = policy::Diagnose(in);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].suspicion, "straggler");
  EXPECT_EQ(f[0].unit, "engine b1");
}

TEST(DiagnoseCli, BadInputExits2NamingTheFileLineOrFieldAndAFailedScrapeExits1) {
  const std::string missing = (TestTempDir() / "missing.json").string();
  CommandResult r = RunMyriad("diagnose --sim " + missing);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(missing), std::string::npos) << r.out;
  const std::string broken = WriteTempFile("broken.json", "{\n  \"scenario\": {,\n}\n");
  r = RunMyriad("diagnose --sim " + broken);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("broken.json: not JSON: parse error at line 2"), std::string::npos) << r.out;
  const std::string typed =
      WriteTempFile("typed.json", R"({"scenario": {}, "tokens": {"prefix_hit_rate": "high"}})");
  r = RunMyriad("diagnose --sim " + typed);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("typed.json: field 'tokens.prefix_hit_rate': expected a number"), std::string::npos) << r.out;
  const std::string other = WriteTempFile("other.json", R"({"findings": []})");
  r = RunMyriad("diagnose --sim " + other);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("not a simulation's results"), std::string::npos) << r.out;
  r = RunMyriad("diagnose --metrics ftp://127.0.0.1:1/metrics");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--metrics 'ftp://127.0.0.1:1/metrics'"), std::string::npos) << r.out;
  r = RunMyriad("diagnose");
  EXPECT_EQ(r.code, 2) << r.out;
  r = RunMyriad("diagnose --sim " + typed + " --top 0");
  EXPECT_EQ(r.code, 2) << r.out;
  // Nothing listens on port 1: not bad input, a failed run.
  r = RunMyriad("diagnose --metrics http://127.0.0.1:1/metrics", "", 30);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("http://127.0.0.1:1/metrics"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace myriad::testing
