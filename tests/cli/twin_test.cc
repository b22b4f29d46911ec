// `myriad twin`: the description's errors, the generated workload and scenario, and one short
// live run against the simulator through the binary (issue 19's twin check).
#include "cli/twin.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "run_myriad.h"
#include "../test_util/read_file.h"

namespace myriad::cli {
namespace {

using myriad::test::ReadFile;

using json = nlohmann::json;
using testing::RunMyriad;
using testing::WriteTempFile;

TEST(TwinDescription, ErrorsNameFileLineAndKey) {
  struct Case {
    const char* yaml;
    const char* expect;
  } cases[] = {
      {"name: x\nspeeed: 2\n", "bad.yaml:2: speeed"},
      {"engines: {prefill: 2}\n", "engines.decode: prefill and decode go together"},
      {"engines: {colocated: 2}\nfailure: {engine: 2, at: 10s}\n", "bad.yaml:2: failure.engine: must name an engine in [0, 2)"},
      {"kv_block_tokens: 24\n", "kv_block_tokens: must divide 512"},
      {"workload:\n  requests: 0\n", "bad.yaml:2: workload.requests: must be in [1, 100000]"},
      {"workload:\n  own_blocks: {min: 3, max: 2}\n", "workload.own_blocks.max: must be in [min, 64]"},
      {"tenants:\n  - {name: a, share: 2}\n", "tenants[0].share: must be in (0, 1]"},
      {"handoff_delay: 200ms\n", "bad.yaml:1: handoff_delay: must be between 0 and 100.00ms"},
  };
  for (const Case& c : cases) {
    const std::string path = WriteTempFile("bad.yaml", c.yaml);
    const auto r = RunMyriad("twin " + path + " --sim-only");
    EXPECT_EQ(r.code, 2) << c.yaml << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.yaml << r.out;
  }
  EXPECT_EQ(RunMyriad("twin /nonexistent/twin.yaml").code, 2);
}

TEST(TwinDescription, TheSameSeedDrawsTheSameWorkloadWithSharedPrefixesAndTenants) {
  auto d = ParseTwinDescription(
      "seed: 4\ntenants: [{name: a, share: 0.25}, {name: b, share: 0.75}]\n"
      "workload: {requests: 400, rate: 10, prefixes: 5, prefix_blocks: 2}\n",
      "t.yaml");
  ASSERT_TRUE(d.ok()) << d.status();
  auto a = TwinRecords(*d), b = TwinRecords(*d);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 400u);
  EXPECT_EQ(TwinTraceJsonl(*a), TwinTraceJsonl(*b));
  std::map<uint64_t, int> first_blocks;
  int tenant_b = 0;
  for (const sim::TraceRecord& r : *a) {
    ASSERT_GE(r.content_ids.size(), 3u);
    ++first_blocks[r.content_ids[0]];
    tenant_b += r.tenant == 1 ? 1 : 0;
    EXPECT_LE(r.input_tokens, static_cast<int32_t>(r.content_ids.size()) * sim::kTraceBlockTokens);
  }
  EXPECT_LE(first_blocks.size(), 5u);  // every request starts with one of the 5 prefixes
  EXPECT_NEAR(tenant_b, 300, 40);
  // The written trace reads back as the same records, tenants and sub-millisecond times included.
  std::istringstream in(TwinTraceJsonl(*a));
  auto back = sim::ParseMooncakeTrace(in, "twin");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), a->size());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*back)[i].offset, (*a)[i].offset - a->front().offset);
    EXPECT_EQ((*back)[i].tenant, (*a)[i].tenant);
    EXPECT_EQ((*back)[i].content_ids, (*a)[i].content_ids);
  }
}

TEST(TwinScenario, LearnCostOffReachesTheSimulatedRouter) {
  const std::string dir = testing::TestTempDir().string();
  const std::string path = WriteTempFile("lc.yaml", "learn_cost: false\nworkload: {requests: 20, rate: 5}\n");
  const auto r = RunMyriad("twin " + path + " --sim-only --out " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string scenario = ReadFile(dir + "/out/scenario.yaml");
  EXPECT_NE(scenario.find("learn_cost: false"), std::string::npos) << scenario;
  const std::string bad = WriteTempFile("lc_bad.yaml", "learn_cost: maybe\n");
  const auto e = RunMyriad("twin " + bad + " --sim-only --out " + dir + "/out2");
  EXPECT_EQ(e.code, 2) << e.out;
  EXPECT_NE(e.out.find("learn_cost"), std::string::npos) << e.out;
}

TEST(TwinScenario, TheHandoffDelayReachesTheSimulatedRouterInEmulatedTime) {
  const std::string dir = testing::TestTempDir().string();
  const std::string path = WriteTempFile(
      "hd.yaml", "speed: 2\nhandoff_delay: 3ms\nengines: {prefill: 1, decode: 1}\nworkload: {requests: 20, rate: 5}\n");
  const auto r = RunMyriad("twin " + path + " --sim-only --out " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string scenario = ReadFile(dir + "/out/scenario.yaml");
  // 3 real ms on the live side are 6 emulated ms at speed 2.
  EXPECT_NE(scenario.find("handoff_delay: 6000us"), std::string::npos) << scenario;
}

TEST(TwinScenario, PdEnginesAreUnitsInOrderAndTheFailureWindowIsLeftOut) {
  const std::string dir = testing::TestTempDir().string();
  const std::string path = WriteTempFile(
      "pd.yaml",
      "engines: {prefill: 2, decode: 2}\ntenants: [{name: a, share: 0.5}, {name: b, share: 0.5}]\n"
      "workload: {requests: 300, rate: 5}\nfailure: {engine: 1, at: 20s}\n");
  const auto r = RunMyriad("twin " + path + " --sim-only --json --out " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string scenario = ReadFile(dir + "/out/scenario.yaml");
  EXPECT_NE(scenario.find("role: prefill, count: 2"), std::string::npos) << scenario;
  EXPECT_NE(scenario.find("keys: tokens"), std::string::npos) << scenario;
  EXPECT_NE(scenario.find("kind: crash, unit: 1"), std::string::npos) << scenario;
  EXPECT_NE(scenario.find("learn_cost: true"), std::string::npos) << scenario;
  std::ifstream log(dir + "/out/sim.jsonl");
  std::string line;
  int served = 0, on_failed_after = 0;
  while (std::getline(log, line)) {
    const json j = json::parse(line);
    if (!j["served"].get<bool>()) continue;
    ++served;
    EXPECT_TRUE(j["entry"] == 0 || j["entry"] == 1) << line;
    EXPECT_TRUE(j["decode"] == 2 || j["decode"] == 3) << line;
  }
  EXPECT_GT(served, 250);
  (void)on_failed_after;
  const json c = json::parse(ReadFile(dir + "/out/comparison.json"));
  EXPECT_GT(c["excluded_failure_window"].get<int>(), 0);
  EXPECT_GT(c["eject_s"]["sim"].get<double>(), 0);
}

// The live gateway and emulated engines against the simulator, at real speed (so the live side's
// own milliseconds count once): about 15 s.
TEST(TwinLive, ColocatedEnginesRouteAsTheSimulatorDoes) {
  const std::string dir = testing::TestTempDir().string();
  const std::string path = WriteTempFile(
      "live.yaml",
      "seed: 3\nspeed: 1\nengines: {colocated: 2}\n"
      "workload: {requests: 90, rate: 6, prefixes: 6, prefix_blocks: 2, own_blocks: {min: 1, max: 3}, "
      "output_tokens: {min: 8, max: 64}}\n");
  const auto r = RunMyriad("twin " + path + " --out " + dir + "/out", "", 120);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("same entry engine"), std::string::npos) << r.out;
  const json c = json::parse(ReadFile(dir + "/out/comparison.json"));
  const int compared = c["compared"].get<int>(), agreed = c["agreed"].get<int>();
  EXPECT_EQ(compared, 90) << r.out;
#if defined(__SANITIZE_ADDRESS__)
  // Under the sanitizer the live side spends about 10 ms more per request than the release
  // build: its timing is not the engines' any more, and agreement is a release-build figure
  // (about a coin toss here). This build checks the path end to end.
  (void)agreed;
#else
  // 90 of 90 in quiet runs; the margin is for a loaded machine.
  EXPECT_GE(agreed, 0.85 * compared) << r.out;
#endif
  EXPECT_NEAR(c["hit_rate"]["sim"].get<double>(), c["hit_rate"]["live"].get<double>(), 0.03) << r.out;
}

}  // namespace
}  // namespace myriad::cli
