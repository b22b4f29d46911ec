// `myriad loadgen --trace ... --tenant-keys`: each record speaks with its tenant's key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "emu/emu_server.h"
#include "gateway/gateway.h"
#include "run_myriad.h"

namespace myriad::cli {
namespace {

using json = nlohmann::json;

TEST(LoadgenTenantKeysTest, EachRecordSendsItsTenantsKey) {
  emu::EmuOptions eo;
  eo.engine.speed = 1000;
  auto emu = emu::EmuServer::Create(eo);
  ASSERT_TRUE(emu.ok()) << emu.status();
  ASSERT_TRUE((*emu)->Start().ok());
  // A gateway that knows only the two keys: a record sent without its key gets 401.
  gateway::GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.access_log = "";
  c.allow_anonymous = false;
  gateway::BackendConfig b;
  b.name = "e0";
  b.url = "http://127.0.0.1:" + std::to_string((*emu)->port());
  b.model = "emu-model";
  c.backends.push_back(b);
  for (const char* key : {"key-a", "key-b"}) {
    gateway::TenantEntry t;
    t.config.name = key;
    t.api_keys = {key};
    c.tenants.push_back(t);
  }
  auto gw = gateway::Gateway::Create(c);
  ASSERT_TRUE(gw.ok()) << gw.status();
  ASSERT_TRUE((*gw)->Start().ok());
  const std::string trace = testing::WriteTempFile(
      "tenants.jsonl",
      R"({"timestamp": 0, "input_length": 40, "output_length": 2, "hash_ids": [1], "tenant": 0})"
      "\n"
      R"({"timestamp": 10, "input_length": 40, "output_length": 2, "hash_ids": [2], "tenant": 1})"
      "\n");
  const std::string url = "http://127.0.0.1:" + std::to_string((*gw)->port());
  auto with = testing::RunMyriad("loadgen --url " + url + " --trace " + trace + " --tenant-keys key-a,key-b --json", "", 60);
  ASSERT_EQ(with.code, 0) << with.out;
  EXPECT_EQ(json::parse(with.out)["status"]["200"], 2) << with.out;
  // Without them the same records are refused.
  auto without = testing::RunMyriad("loadgen --url " + url + " --trace " + trace + " --json", "", 60);
  EXPECT_EQ(json::parse(without.out)["status"].value("200", 0), 0) << without.out;
}

TEST(LoadgenTenantKeysTest, KeysNeedATraceAndAreBounded) {
  auto r = testing::RunMyriad("loadgen --tenant-keys a,b --requests 1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--tenant-keys need --trace"), std::string::npos) << r.out;
  std::string keys = "k0";
  for (int i = 1; i <= 1024; ++i) keys += ",k" + std::to_string(i);
  const std::string trace = testing::WriteTempFile(
      "one.jsonl", R"({"timestamp": 0, "input_length": 40, "output_length": 2, "hash_ids": [1]})" "\n");
  r = testing::RunMyriad("loadgen --url http://127.0.0.1:9 --trace " + trace + " --tenant-keys " + keys);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--tenant-keys: at most 1024"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace myriad::cli
