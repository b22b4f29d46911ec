// `myriad sim --request-log`: one line per request's end, what a twin check compares with the
// live side's `loadgen --trace --log`.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "run_myriad.h"
#include "../test_util/read_file.h"

namespace {

using myriad::test::ReadFile;

using myriad::testing::RunMyriad;
using myriad::testing::WriteTempFile;

TEST(SimRequestLog, OneLinePerRequestMatchingTheReportAndRepeatable) {
  const std::string log_a = WriteTempFile("requests_a.jsonl", "");
  const std::string log_b = WriteTempFile("requests_b.jsonl", "");
  const std::string scenario = std::string(MYRIAD_SOURCE_DIR) + "/scenarios/store_node_loss.yaml";
  const auto a = RunMyriad("sim " + scenario + " --json --request-log " + log_a, "", 300);
  const auto b = RunMyriad("sim " + scenario + " --json --request-log " + log_b, "", 300);
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  const std::string text = ReadFile(log_a);
  EXPECT_EQ(text, ReadFile(log_b));
  const auto report = nlohmann::json::parse(a.out);
  std::istringstream lines(text);
  std::string line;
  int64_t completed = 0, rejected = 0;
  std::map<std::string, int64_t> reasons;
  double last_end = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_GE(j["end_s"].get<double>(), last_end) << line;  // virtual-time order
    last_end = j["end_s"].get<double>();
    if (j["outcome"] == "completed") {
      ++completed;
      EXPECT_TRUE(j["reason"].is_null()) << line;
      EXPECT_GE(j["unit"].get<int>(), 0) << line;
      EXPECT_LT(j["unit"].get<int>(), 16) << line;
      EXPECT_GT(j["ttft_s"].get<double>(), 0) << line;
    } else {
      ++rejected;
      EXPECT_EQ(j["outcome"], "rejected") << line;
      ++reasons[j["reason"].get<std::string>()];
    }
  }
  EXPECT_EQ(completed, report["requests"]["completed"].get<int64_t>());
  EXPECT_EQ(rejected, report["requests"]["rejected"].get<int64_t>());
  EXPECT_GT(rejected, 0);
  for (const auto& [reason, n] : reasons) {
    EXPECT_EQ(n, report["requests"]["rejected_by_reason"][reason].get<int64_t>()) << reason;
  }
}

TEST(SimRequestLog, WithCompareIsAUsageErrorAndAnUnwritablePathFails) {
  const std::string scenario = std::string(MYRIAD_SOURCE_DIR) + "/scenarios/store_node_loss.yaml";
  const std::string log = WriteTempFile("requests_c.jsonl", "");
  const auto both = RunMyriad("sim " + scenario + " --compare least-loaded,kv-aware --request-log " + log);
  EXPECT_EQ(both.code, 2) << both.out;
  EXPECT_NE(both.out.find("--request-log and --compare"), std::string::npos) << both.out;
  const auto bad = RunMyriad("sim " + scenario + " --quiet --request-log /nonexistent-dir/requests.jsonl");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("cannot write /nonexistent-dir/requests.jsonl"), std::string::npos) << bad.out;
}

}  // namespace
