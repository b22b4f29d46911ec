// `myriad sim` with a KV store tier, as a user runs it.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "run_myriad.h"

namespace {

using myriad::testing::RunMyriad;

TEST(StoreCli, NodeLossScenarioReportsTheStoreAndRepeatsByteForByte) {
  const std::string args = std::string("sim ") + MYRIAD_SOURCE_DIR + "/scenarios/store_node_loss.yaml --json";
  const auto a = RunMyriad(args, "", 300);
  const auto b = RunMyriad(args, "", 300);
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_EQ(a.out, b.out);
  const auto j = nlohmann::json::parse(a.out);
  ASSERT_TRUE(j.contains("store"));
  const auto& s = j["store"];
  EXPECT_GT(s["load_back"]["hit_rate"].get<double>(), 0);
  EXPECT_EQ(s["node_losses"].size(), 2u);
  EXPECT_GT(s["objects"]["lost"].get<int64_t>(), 0);
  EXPECT_GT(s["repair"]["gigabytes"].get<double>(), 0);
  EXPECT_GT(s["repair"]["time_s"].get<double>(), 0);
  EXPECT_FALSE(s["recompute_tokens_per_s"]["after_first_loss"].is_null());
  EXPECT_GT(s["recompute_limiter"]["shed_after_first_loss"].get<int64_t>(), 0);
  // The terminal summary carries the store's lines too.
  const auto text = RunMyriad(std::string("sim ") + MYRIAD_SOURCE_DIR + "/scenarios/store_node_loss.yaml", "", 300);
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("store      4 nodes, 2 replicas: hit rate"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("2 node losses"), std::string::npos) << text.out;
}

TEST(StoreCli, BadStoreSectionIsAnInputError) {
  const std::string yaml = myriad::testing::WriteTempFile("store_bad.yaml", R"(
hardware: {gpu: H100, nodes: 4, gpus_per_node: 8, nodes_per_rack: 2}
model: Llama-3.1-8B
pools:
  - {name: u, role: colocated, count: 4, layout: {tp: 1, dp: 1, ep: 1}}
store: {nodes: 2, replicas: 5}
)");
  const auto r = RunMyriad("sim " + yaml);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("store_bad.yaml:6: store.replicas: must be between 1 and 4"), std::string::npos) << r.out;
}

}  // namespace
