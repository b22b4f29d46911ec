// The `myriad` binary as a user runs it.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "run_myriad.h"

namespace {

using myriad::testing::CommandResult;

using myriad::testing::RunMyriad;

CommandResult Sh(const std::string& args) { return RunMyriad(args); }

std::string TempFile(const std::string& name, const std::string& text) {
  return myriad::testing::WriteTempFile("cli_" + name, text);
}

TEST(Cli, HelpOnEverySubcommand) {
  auto r = Sh("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("sim"), std::string::npos);
  r = Sh("sim --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("--seed"), std::string::npos);
}

TEST(Cli, ErrorsAreClearAndNonZero) {
  auto r = Sh("");
  EXPECT_NE(r.code, 0);
  r = Sh("sim /nonexistent/scenario.yaml");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("/nonexistent/scenario.yaml"), std::string::npos) << r.out;
  auto bad = TempFile("bad.yaml", "seed: 1\nhardware: {gpu: H100, nodes: 1}\npools: []\nfrobnicate: 3\n");
  r = Sh("sim " + bad);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("bad.yaml:"), std::string::npos) << r.out;
  r = Sh("sim " + bad + " --scale -1");
  EXPECT_NE(r.code, 0);
}

TEST(Cli, SimWritesJsonResults) {
  auto scenario = TempFile("ok.yaml", R"(
seed: 2
duration: 20s
hardware: {gpu: H200, nodes: 1}
model: Llama-3.1-8B
pools:
  - {name: u, role: colocated, count: 8, layout: {tp: 1, dp: 1, ep: 1}}
workload: {type: synthetic, rate: 20}
)");
  auto out = myriad::testing::TestTempDir() / "out.json";
  auto r = Sh("sim " + scenario + " -o " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("within SLO"), std::string::npos) << r.out;
  std::ifstream in(out);
  auto j = nlohmann::json::parse(in);
  EXPECT_GT(j["requests"]["completed"].get<int>(), 100);
  r = Sh("sim " + scenario + " --router round-robin --json --seed 9");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j2 = nlohmann::json::parse(r.out);
  EXPECT_EQ(j2["scenario"]["router"], "round-robin");
  EXPECT_EQ(j2["scenario"]["seed"], 9);
  EXPECT_NE(Sh("sim " + scenario + " --router psychic").code, 0);
}

// `myriad sim` re-executes itself with glibc's huge-page tunable (cli/huge_pages.h) unless told
// not to or already set: the arguments must survive it and the results must not depend on it.
TEST(Cli, SimResultsDoNotDependOnHugePages) {
  auto scenario = TempFile("hp.yaml", R"(
seed: 3
duration: 20s
hardware: {gpu: H200, nodes: 1}
model: Llama-3.1-8B
pools:
  - {name: u, role: colocated, count: 4, layout: {tp: 1, dp: 1, ep: 1}}
workload: {type: synthetic, rate: 20}
)");
  const std::string args = "sim " + scenario + " --json --seed 5 --router round-robin";
  const auto plain = RunMyriad(args);
  const auto off = RunMyriad(args, "MYRIAD_HUGE_PAGES=0");
  const auto other = RunMyriad(args, "GLIBC_TUNABLES=glibc.malloc.check=0");
  ASSERT_EQ(plain.code, 0) << plain.out;
  ASSERT_EQ(off.code, 0) << off.out;
  ASSERT_EQ(other.code, 0) << other.out;
  const auto j = nlohmann::json::parse(plain.out);
  EXPECT_EQ(j["scenario"]["seed"], 5);
  EXPECT_EQ(j["scenario"]["router"], "round-robin");
  EXPECT_EQ(plain.out, off.out);
  EXPECT_EQ(plain.out, other.out);
}

}  // namespace
