// `myriad eplb` as a user runs it.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_myriad.h"

namespace {

using myriad::testing::CommandResult;

using myriad::testing::RunMyriad;

CommandResult Sh(const std::string& args) { return RunMyriad(args); }

std::string TempFile(const std::string& name, const std::string& text) {
  return myriad::testing::WriteTempFile("eplb_" + name, text);
}

// deepseek-ai/EPLB's README example: 2 layers, 12 experts, 16 replicas, 4 groups, 2 nodes, 8 GPUs.
constexpr char kReadmeCsv[] =
    "e0,e1,e2,e3,e4,e5,e6,e7,e8,e9,e10,e11\n"
    "90,132,40,61,104,165,39,4,73,56,183,86\n"
    "20,107,104,64,19,197,187,157,172,86,16,27\n";
constexpr char kReadmeArgs[] = " --replicas 16 --groups 4 --nodes 2 --gpus 8";

TEST(EplbCli, Help) {
  auto r = Sh("eplb --help");
  EXPECT_EQ(r.code, 0);
  for (const char* flag : {"--loads", "--replicas", "--groups", "--nodes", "--gpus", "--format"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  }
}

TEST(EplbCli, ReadmeExampleAsTable) {
  auto csv = TempFile("readme.csv", kReadmeCsv);
  auto r = Sh("eplb --loads " + csv + kReadmeArgs);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("phy2log: 5 6 5 7 8 4 3 4 10 9 10 2 0 1 11 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("phy2log: 7 10 6 8 6 11 8 9 2 4 5 1 5 0 3 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hierarchical"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("imbalance"), std::string::npos) << r.out;
}

TEST(EplbCli, ReadmeExampleFromJsonAsJson) {
  auto json = TempFile("readme.json",
                       "[[90,132,40,61,104,165,39,4,73,56,183,86],\n"
                       " [20,107,104,64,19,197,187,157,172,86,16,27]]\n");
  auto r = Sh("eplb --loads " + json + kReadmeArgs + " --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["config"]["policy"], "hierarchical");
  EXPECT_EQ(j["config"]["experts_per_gpu"], 2);
  ASSERT_EQ(j["layers"].size(), 2u);
  EXPECT_EQ(j["layers"][0]["phy2log"].get<std::vector<int>>(),
            (std::vector<int>{5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1}));
  EXPECT_EQ(j["layers"][1]["phy2log"].get<std::vector<int>>(),
            (std::vector<int>{7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1}));
  EXPECT_EQ(j["layers"][0]["gpus"][0]["experts"].get<std::vector<int>>(), (std::vector<int>{5, 6}));
  EXPECT_EQ(j["layers"][0]["log2phy"][5].get<std::vector<int>>(), (std::vector<int>{0, 2}));
  EXPECT_EQ(j["layers"][0]["log2phy"][0].get<std::vector<int>>(), (std::vector<int>{12, -1}));
  EXPECT_LT(j["imbalance"]["max_after"].get<double>(), j["imbalance"]["max_before"].get<double>());
  EXPECT_GE(j["imbalance"]["mean_after"].get<double>(), 1.0);

  // The same placement from CSV without a header, with spaces and CRLF line ends.
  auto csv = TempFile("plain.csv",
                      "90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86\r\n"
                      "20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27\r\n\r\n");
  auto r2 = Sh("eplb --loads " + csv + kReadmeArgs + " --format json");
  ASSERT_EQ(r2.code, 0) << r2.out;
  EXPECT_EQ(nlohmann::json::parse(r2.out)["layers"], j["layers"]);
}

TEST(EplbCli, FromLoadsPrintsTheIncrementalRePlacement) {
  auto csv = TempFile("readme_now.csv", kReadmeCsv);
  // The same loads: nothing to move. Two experts trade loads: fewer fetches than a fresh EPLB.
  auto r = Sh("eplb --format json --loads " + csv + " --from-loads " + csv + kReadmeArgs);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["config"]["policy"], "incremental");
  EXPECT_EQ(j["moves"]["fetched_slots"], 0);
  EXPECT_EQ(j["moves"]["fresh_fetched_slots"], 0);
  auto old = TempFile("readme_old.csv",
                      "90,132,40,61,104,165,39,4,73,56,183,86\n"
                      "20,107,104,64,19,197,187,157,172,16,86,27\n");
  r = Sh("eplb --format json --loads " + csv + " --from-loads " + old + kReadmeArgs);
  ASSERT_EQ(r.code, 0) << r.out;
  j = nlohmann::json::parse(r.out);
  EXPECT_LE(j["moves"]["fetched_slots"].get<int>(), j["moves"]["fresh_fetched_slots"].get<int>());
  EXPECT_LE(j["imbalance"]["mean_after"].get<double>(), 1.02 * j["moves"]["fresh_mean_imbalance"].get<double>() + 1e-9);
  r = Sh("eplb --loads " + csv + " --from-loads " + old + kReadmeArgs);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("slots fetched (a fresh placement:"), std::string::npos) << r.out;
  auto short_file = TempFile("readme_short.csv", "1,2,3\n");
  r = Sh("eplb --loads " + csv + " --from-loads " + short_file + kReadmeArgs);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("1 x 3 loads"), std::string::npos) << r.out;
}

TEST(EplbCli, GlobalPolicyWhenGroupsDoNotDivide) {
  auto csv = TempFile("global.csv", kReadmeCsv);
  auto r = Sh("eplb --loads " + csv + " --replicas 16 --groups 3 --nodes 2 --gpus 8 --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["config"]["policy"], "global");
}

TEST(EplbCli, InputErrorsNameFileAndLine) {
  auto r = Sh("eplb --loads /nonexistent/loads.csv" + std::string(kReadmeArgs));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("/nonexistent/loads.csv"), std::string::npos) << r.out;

  auto ragged = TempFile("ragged.csv", "a,b,c\n1,2,3\n4,5\n");
  r = Sh("eplb --loads " + ragged + " --replicas 4 --gpus 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("ragged.csv:3: 2 loads, expected 3 (as on line 2)"), std::string::npos)
      << r.out;

  auto word = TempFile("word.csv", "1,2,3\n4,five,6\n");
  r = Sh("eplb --loads " + word + " --replicas 4 --gpus 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("word.csv:2:3: field 2: 'five' is not a finite number"), std::string::npos)
      << r.out;

  auto negative = TempFile("negative.csv", "1,2,3\n4,5,6\n7,8,-9\n");
  r = Sh("eplb --loads " + negative + " --replicas 4 --gpus 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("negative.csv:3:5: field 3: negative load -9"), std::string::npos) << r.out;

  auto empty = TempFile("empty.csv", "only,a,header\n");
  r = Sh("eplb --loads " + empty + " --replicas 4 --gpus 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("empty.csv: no loads"), std::string::npos) << r.out;

  auto syntax = TempFile("syntax.json", "[[1, 2],\n [3, 4,]]\n");
  r = Sh("eplb --loads " + syntax + " --replicas 2 --gpus 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("syntax.json:2:"), std::string::npos) << r.out;

  auto json_ragged = TempFile("ragged.json", "[[1, 2, 3],\n [4, 5, 6],\n [7, 8]]");
  r = Sh("eplb --loads " + json_ragged + " --replicas 4 --gpus 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("ragged.json:3:2: layer 2 has 2 loads, expected 3"), std::string::npos)
      << r.out;

  auto json_bad = TempFile("bad.json", "[[1, 2, 3],\n [4, \"x\", 6]]");
  r = Sh("eplb --loads " + json_bad + " --replicas 4 --gpus 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("bad.json:2:6: layer 1, expert 1: expected a number"), std::string::npos)
      << r.out;

  auto json_negative = TempFile("negative.json", "[[1, 2, 3],\n [4, 5, -6]]");
  r = Sh("eplb --loads " + json_negative + " --replicas 4 --gpus 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("negative.json:2:9: layer 1, expert 2"), std::string::npos) << r.out;
}

TEST(EplbCli, ParameterErrorsNameTheParameter) {
  auto csv = TempFile("params.csv", kReadmeCsv);
  auto r = Sh("eplb --loads " + csv + " --replicas 15 --groups 4 --nodes 2 --gpus 8");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--replicas (15) must be a multiple of --gpus (8)"), std::string::npos)
      << r.out;
  r = Sh("eplb --loads " + csv + " --replicas 8 --gpus 8");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--replicas (8) must be at least the experts per layer in " + csv + " (12)"),
            std::string::npos)
      << r.out;
  r = Sh("eplb --loads " + csv + " --replicas 16 --groups 4 --nodes 3 --gpus 8");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--gpus (8) must be a multiple of --nodes (3)"), std::string::npos) << r.out;
  r = Sh("eplb --loads " + csv + " --replicas 16 --groups 8 --nodes 2 --gpus 8");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("must be a multiple of --groups (8)"), std::string::npos) << r.out;
  r = Sh("eplb --loads " + csv + kReadmeArgs + " --format yaml");
  EXPECT_NE(r.code, 0);
}

}  // namespace
