// `myriad up --store`: a KV store master and storage nodes come up beside the engines and the
// gateway; the engines offload what their small HBM evicts to the store and the master holds
// it; SIGTERM stops everything. Bad store flags are input errors.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "../test_util/child_process.h"
#include "../test_util/temp_dir.h"
#include "../test_util/wait_for.h"
#include "net/http_client.h"
#include "run_myriad.h"

namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using myriad::net::HostPort;
using myriad::net::HttpClient;

using myriad::test::ReadFile;
using myriad::test::WaitFor;

json GetJson(HttpClient& c, const std::string& path) {
  auto r = c.Get(path);
  if (!r.ok() || r->status != 200) return json();
  return json::parse(r->body, nullptr, false);
}

TEST(UpStoreCli, StoreComesUpTakesTheEnginesEvictionsAndStopsOnSigterm) {
  const auto dir = myriad::testing::TestTempDir();
  const std::string out_path = (dir / "up_store.out").string();
  // 64 HBM blocks (1,024 tokens) per engine; 12 distinct prompts of 320 words (20 blocks each)
  // are 240 blocks, so most of them are evicted and offloaded.
  myriad::test::ChildProcess up({MYRIAD_BINARY, "up", "--engines", "1", "--port", "0", "--speed", "20", "--store",
                                 "--store-nodes", "2", "--store-node-capacity", "16777216", "--kv-blocks", "64",
                                 "--kv-block-bytes", "4096"},
                                out_path);
  std::smatch gw, master;
  std::string text;
  ASSERT_TRUE(WaitFor(
      [&] {
        text = ReadFile(out_path);
        return std::regex_search(text, gw, std::regex(R"(gateway on http://127\.0\.0\.1:(\d+) )")) &&
               std::regex_search(text, master, std::regex(R"(kv-store\s+master\s+http://127\.0\.0\.1:(\d+))"));
      },
      15000ms))
      << text;
  EXPECT_NE(text.find("kv-node-2"), std::string::npos) << text;
  EXPECT_NE(text.find("kv store tier"), std::string::npos) << text;
  HttpClient gateway(HostPort{"127.0.0.1", static_cast<uint16_t>(std::stoi(gw[1]))});
  HttpClient store(HostPort{"127.0.0.1", static_cast<uint16_t>(std::stoi(master[1]))});

  const json nodes = GetJson(store, "/v1/nodes");
  ASSERT_TRUE(nodes.is_object()) << nodes;
  ASSERT_EQ(nodes["nodes"].size(), 2u) << nodes;

  for (int p = 0; p < 12; ++p) {
    std::string prompt;
    for (int w = 0; w < 320; ++w) prompt += " p" + std::to_string(p) + "w" + std::to_string(w);
    auto r = gateway.Post("/v1/completions", json({{"model", "emu-model"}, {"prompt", prompt}, {"max_tokens", 2}}).dump());
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status, 200) << r->body;
  }
  // Offloads run off the engines' step loops: the objects arrive shortly after.
  json stats;
  EXPECT_TRUE(WaitFor(
      [&] {
        stats = GetJson(store, "/v1/stats");
        return stats.is_object() && stats.value("objects", 0) > 100;
      },
      10000ms))
      << stats;
  // In one namespace, the served model's: creating it again is refused as existing.
  EXPECT_EQ(stats.value("namespaces", 0), 1) << stats;
  auto again = store.Post("/v1/namespaces", json({{"name", "emu-model"}}).dump());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->status, 409) << again->body;

  const int status = up.Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << ReadFile(out_path);
  // The master went with it.
  EXPECT_FALSE(store.Get("/health").ok());
}

TEST(UpStoreCli, BadStoreFlagsAreInputErrors) {
  auto r = myriad::testing::RunMyriad("up --store --store-nodes 17 --port 0", "", 20);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--store-nodes"), std::string::npos) << r.out;
  r = myriad::testing::RunMyriad("up --store --store-node-capacity 1000 --port 0", "", 20);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--store-node-capacity"), std::string::npos) << r.out;
  // A store flag without --store.
  r = myriad::testing::RunMyriad("up --store-nodes 3 --port 0", "", 20);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--store"), std::string::npos) << r.out;
  r = myriad::testing::RunMyriad("up --kv-blocks 0 --port 0", "", 20);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--kv-blocks"), std::string::npos) << r.out;
}

}  // namespace
